/**
 * The replies service's front: the engine that writes replies and how a prompt's replies end,
 * with the stores they are composed over; the chat model a composition root chooses, tried once
 * more when it fails before streaming; and the recovery of replies a stopped process left.
 */
export { createReplyEngine } from './engine.ts';
export type { ReplyEngine } from './engine.ts';
export { promptOutcomes } from './outcome.ts';
export type { PromptOutcomeService } from './outcome.ts';
export { type ChosenProvider, withOneRetry } from './provider.ts';
export { recoverAbandonedReplies, type RecoveredReply, watchForDeadInstances } from './recovery.ts';
export { recoveryStore } from './recovery-store.ts';
export { promptOutcomeStore, replyStore } from './store.ts';
