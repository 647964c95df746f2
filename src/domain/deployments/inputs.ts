import { z } from 'zod';
import { DeploymentPlatform, WhileReplying } from '../core/vocabulary.ts';

/**
 * What owners send to deploy an agent, in the original's spelling (its SDK's `config` and
 * `secrets`, keyed by platform), plus the bounds parley adds for strangers writing to an agent.
 */

const allowlistItem = z.object({
  id: z
    .string()
    .trim()
    .regex(/^-?\d{1,20}$/, 'must be a Telegram chat id (a whole number; groups are negative)'),
  note: z.string().max(200, 'must be at most 200 characters').optional(),
});

const channelItem = z.object({
  id: z.string().trim().min(1, 'must not be empty').max(100, 'must be at most 100 characters'),
  note: z.string().max(200, 'must be at most 200 characters').optional(),
});

const MAX_ALLOWLIST = 500;

/** The Telegram user who may press Approve / Deny under a tool call in the deployment's chats (a number, or its digits). */
const approverUserId = z
  .union(
    [
      z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
      z
        .string()
        .trim()
        .regex(/^\d{1,20}$/),
    ],
    {
      error: 'must be a Telegram user id (a positive whole number)',
    },
  )
  .transform(String);

/**
 * What a chat's message does while the agent still answers the one before (`docs/sessions.md`):
 * not `reject`, which would drop what the person wrote, who cannot send it again another way.
 */
const chatWhileReplying = [WhileReplying.enqueue, WhileReplying.interrupt, WhileReplying.rollback] as const;

/**
 * A deployment's `config`. `telegram.topic_allowlist`: when it lists chats, only those are
 * answered. `telegram.approver_user_id`: the owner's Telegram user, the one who may answer a tool
 * call that waits for approval with the buttons under it in a chat. `daily_manna_cap` and `chat_messages_per_minute` override the service's defaults
 * (`DEPLOYMENT_DAILY_MANNA_CAP`, `DEPLOYMENT_CHAT_RATE`); null goes back to them. `while_replying`:
 * what a message does while the agent still answers the chat's one before (`enqueue` unless set).
 * Other keys are dropped.
 */
export const deploymentConfigSchema = z.object({
  telegram: z
    .object({
      topic_allowlist: z.array(allowlistItem).max(MAX_ALLOWLIST, `must list at most ${MAX_ALLOWLIST} chats`).optional(),
      approver_user_id: approverUserId.optional(),
    })
    .optional(),
  discord: z
    .object({ channel_allowlist: z.array(channelItem).max(MAX_ALLOWLIST, `must list at most ${MAX_ALLOWLIST} channels`).optional() })
    .optional(),
  daily_manna_cap: z
    .number({ error: 'must be a number' })
    .min(0, 'must be at least 0')
    .max(1_000_000, 'must be at most 1000000')
    .nullable()
    .optional(),
  chat_messages_per_minute: z
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(600, 'must be at most 600')
    .nullable()
    .optional(),
  while_replying: z.enum(chatWhileReplying, { error: `must be one of ${chatWhileReplying.join(', ')}` }).optional(),
});
export type DeploymentConfig = z.output<typeof deploymentConfigSchema>;

const secretValue = z.string({ error: 'must be text' }).min(1, 'must not be empty').max(1_000, 'must be at most 1000 characters');

/** Secrets per platform, write-only: checked with the platform, sealed, never shown again. */
export const secretsSchema = z.object({
  telegram: z.object({ token: secretValue }).optional(),
  discord: z.object({ token: secretValue }).optional(),
  farcaster: z.record(z.string(), secretValue).optional(),
  twitter: z.record(z.string(), secretValue).optional(),
});
export type SecretsInput = z.output<typeof secretsSchema>;

const platform = z.enum(DeploymentPlatform, { error: `must be one of ${Object.values(DeploymentPlatform).join(', ')}` });

export const deploySchema = z.object({
  platform,
  config: deploymentConfigSchema.optional(),
  secrets: secretsSchema.optional(),
});
export type DeployInput = z.output<typeof deploySchema>;

export const updateDeploymentSchema = deploySchema;

export const platformSchema = z.object({ platform });
