/**
 * The domain's own words for the states and kinds its rules speak of. The database stores the
 * same values (its enums in prisma/schema.prisma); the stores hand rows over in these types, so
 * no rule and no transport needs Prisma's generated client to name a status.
 * test/architecture/vocabulary.test.ts checks that the two lists say the same.
 */

export const CreatorType = { user: 'user', agent: 'agent' } as const;
export type CreatorType = (typeof CreatorType)[keyof typeof CreatorType];

/** Who pays for what an agent does: its owner never, for its deployments' chats, or always. */
export const OwnerPays = { off: 'off', deployments: 'deployments', full: 'full' } as const;
export type OwnerPays = (typeof OwnerPays)[keyof typeof OwnerPays];

export const DeploymentPlatform = {
  discord: 'discord',
  telegram: 'telegram',
  twitter: 'twitter',
  farcaster: 'farcaster',
  email: 'email',
  gmail: 'gmail',
  shopify: 'shopify',
  printify: 'printify',
  tiktok: 'tiktok',
} as const;
export type DeploymentPlatform = (typeof DeploymentPlatform)[keyof typeof DeploymentPlatform];

export const TriggerStatus = { active: 'active', paused: 'paused', running: 'running', finished: 'finished' } as const;
export type TriggerStatus = (typeof TriggerStatus)[keyof typeof TriggerStatus];

/** Where a trigger's prompt goes: a new session each time, or one that exists. */
export const TriggerSessionTarget = { new: 'new', existing: 'existing' } as const;
export type TriggerSessionTarget = (typeof TriggerSessionTarget)[keyof typeof TriggerSessionTarget];

export const TriggerRunStatus = { running: 'running', completed: 'completed', failed: 'failed' } as const;
export type TriggerRunStatus = (typeof TriggerRunStatus)[keyof typeof TriggerRunStatus];

export const SessionStatus = { active: 'active', archived: 'archived' } as const;
export type SessionStatus = (typeof SessionStatus)[keyof typeof SessionStatus];

/** How the next speaker of an autonomous session is chosen among its agents. */
export const ActorSelection = { random: 'random', random_exclude_last: 'random_exclude_last' } as const;
export type ActorSelection = (typeof ActorSelection)[keyof typeof ActorSelection];

export const SessionPermission = { editor: 'editor', owner: 'owner' } as const;
export type SessionPermission = (typeof SessionPermission)[keyof typeof SessionPermission];

export const MessageRole = { user: 'user', assistant: 'assistant', system: 'system', tool: 'tool', eden: 'eden' } as const;
export type MessageRole = (typeof MessageRole)[keyof typeof MessageRole];

/**
 * `streaming` while its agent still writes it; a reply that breaks off is kept as `failed`, with
 * its text, and one a newer prompt interrupted as `interrupted`, with what it had written.
 */
export const MessageStatus = {
  streaming: 'streaming',
  complete: 'complete',
  failed: 'failed',
  cancelled: 'cancelled',
  interrupted: 'interrupted',
} as const;
export type MessageStatus = (typeof MessageStatus)[keyof typeof MessageStatus];

/**
 * What a prompt does while an agent of its session is still replying (`docs/sessions.md`): refused
 * (409), answered after the replies under way, or answered once they are stopped and kept as
 * interrupted, or stopped and removed.
 */
export const WhileReplying = { reject: 'reject', enqueue: 'enqueue', interrupt: 'interrupt', rollback: 'rollback' } as const;
export type WhileReplying = (typeof WhileReplying)[keyof typeof WhileReplying];
/** What a newer prompt asked of a reply still being written: stop it and keep it, or stop it and remove it. */
export const ReplyStop = { interrupt: 'interrupt', rollback: 'rollback' } as const;
export type ReplyStop = (typeof ReplyStop)[keyof typeof ReplyStop];

/**
 * A task (a reply's tool call too) is `pending` until it runs, then `running`, then one of the
 * three ends; a reply's call that needs its payer's yes is `awaiting_approval` first.
 */
export const TaskStatus = {
  pending: 'pending',
  awaiting_approval: 'awaiting_approval',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
} as const;
export type TaskStatus = (typeof TaskStatus)[keyof typeof TaskStatus];

/** Where a tool call's approval stands: asked, answered yes or no, or given up after the agent's timeout. */
export const ToolApprovalState = { requested: 'requested', approved: 'approved', denied: 'denied', expired: 'expired' } as const;
export type ToolApprovalState = (typeof ToolApprovalState)[keyof typeof ToolApprovalState];

/** A user's two balances: the subscription's, spent first, and the one that does not expire. */
export const BalanceKind = { subscription: 'subscription', forever: 'forever' } as const;
export type BalanceKind = (typeof BalanceKind)[keyof typeof BalanceKind];

export const DeploymentUpdateStatus = {
  received: 'received',
  answered: 'answered',
  refused: 'refused',
  failed: 'failed',
  skipped: 'skipped',
} as const;
export type DeploymentUpdateStatus = (typeof DeploymentUpdateStatus)[keyof typeof DeploymentUpdateStatus];
