import type { WorkConfig } from '../../config.ts';
import type { EventBus } from '../core/bus.ts';
import type { StreamLimits } from '../core/stream-limits.ts';
import type { ReplyEngine } from '../replies/engine.ts';
import { sessionAccess } from './access.ts';
import type { AccessGate } from './access-gate.ts';
import { memberRules } from './members.ts';
import { type PromptDependencies, promptRules } from './prompting.ts';
import { reactionRules } from './reacting.ts';
import { readRules } from './reads.ts';
import type { SignalOutbox } from './signals.ts';
import type { SessionStore } from './store.ts';
import { watchRules } from './watching.ts';

// What REST and GraphQL name from the sessions service, where they have always found it.
export { AGENT_IDS_REQUIRED } from './prompting.ts';
export { DEFAULT_MESSAGE_PAGE, MAX_MESSAGE_PAGE, type MessagePage } from './reads.ts';

/**
 * Sessions, as REST and GraphQL use them: each operation parses its input, checks the caller's
 * place in the session, decides, and calls the store; changes are published on the bus, and
 * prompts start their replies. Every statement is the store's (`prisma-store.ts`).
 */
export function sessionService(
  store: SessionStore,
  bus: EventBus,
  replies: Pick<ReplyEngine, 'instanceId' | 'start'>,
  work: Pick<WorkConfig, 'messagePageMaxBytes' | 'listPageMaxBytes' | 'reactionsPerUserMessage'>,
  limits: StreamLimits,
  {
    gate,
    signals,
    autonomy,
  }: { gate: Pick<AccessGate, 'open'>; signals: Pick<SignalOutbox, 'deliver'>; autonomy: PromptDependencies['autonomy'] },
) {
  const access = sessionAccess(store);
  const { send, cancel } = promptRules({ store, bus, replies, access, autonomy });
  return {
    permissionIn: access.permissionIn,
    ...readRules(store, access, work),
    send,
    ...watchRules({ bus, limits, gate, access, send }),
    ...reactionRules(store, bus, access, work),
    cancel,
    ...memberRules({ store, bus, access, signals }),
  };
}

export type SessionService = ReturnType<typeof sessionService>;
