import type { DeploymentsConfig } from '../../config.ts';
import type { DeploymentPlatform } from '../core/vocabulary.ts';
import type { DeploymentConfig } from './inputs.ts';

/**
 * The bounds on what strangers can make a deployed agent do (and its owner pay for): the chats
 * it answers in, its spending per day, each chat's pace. What is refused is told in the chat,
 * once per period: these decide what and until when.
 */
export type RefusalReason = 'allowlist' | 'cap' | 'rate';

export interface Refusal {
  reason: RefusalReason;
  /** What the chat is told. */
  text: string;
  /** Until when the chat is not told again. */
  until: Date;
}

export type LimitDefaults = Pick<DeploymentsConfig, 'dailyMannaCap' | 'chatMessagesPerMinute'>;

const DAY_MS = 24 * 60 * 60 * 1000;
export const RATE_WINDOW_MS = 60_000;

export const nextUtcMidnight = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));

/** The chats the deployment may answer in: all, or the ones its config lists. */
export function allowsConversation(config: DeploymentConfig, platform: DeploymentPlatform, conversationId: string): boolean {
  const listed =
    platform === 'telegram' ? config.telegram?.topic_allowlist : platform === 'discord' ? config.discord?.channel_allowlist : undefined;
  return !listed?.length || listed.some((item) => item.id === conversationId);
}

export const dailyCapOf = (config: DeploymentConfig, defaults: LimitDefaults) => config.daily_manna_cap ?? defaults.dailyMannaCap;
export const chatRateOf = (config: DeploymentConfig, defaults: LimitDefaults) =>
  config.chat_messages_per_minute ?? defaults.chatMessagesPerMinute;

/** Refused before anything is counted: a chat not on the allowlist, or a day's manna spent. */
export function refusalBeforeCounting(input: {
  config: DeploymentConfig;
  platform: DeploymentPlatform;
  conversationId: string;
  spentToday: number;
  defaults: LimitDefaults;
  now: Date;
}): Refusal | null {
  if (!allowsConversation(input.config, input.platform, input.conversationId))
    return { reason: 'allowlist', text: 'This bot does not answer in this chat.', until: new Date(input.now.getTime() + DAY_MS) };
  if (input.spentToday >= dailyCapOf(input.config, input.defaults))
    return {
      reason: 'cap',
      text: "I have reached today's limit here and will answer again after midnight (UTC).",
      until: nextUtcMidnight(input.now),
    };
  return null;
}

/** Refused for the chat's pace: more messages this minute than it may send. */
export const rateRefusal = (perMinute: number, resetAt: Date): Refusal => ({
  reason: 'rate',
  text: `Too many messages: I answer at most ${perMinute} a minute in this chat. Please wait a moment.`,
  until: resetAt,
});
