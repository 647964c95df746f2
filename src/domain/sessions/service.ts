import type { WorkConfig } from '../../config.ts';
import type { EventBus } from '../core/bus.ts';
import type { StreamLimits } from '../core/stream-limits.ts';
import type { ReplyEngine } from '../replies/engine.ts';
import { sessionAccess } from '../access/service.ts';
import type { AccessGate } from '../access/gate.ts';
import type { SignalOutbox } from '../signals/service.ts';
import { memberRules } from './members.ts';
import { promptRules, type SessionAutonomy } from './prompting.ts';
import { reactionRules } from './reacting.ts';
import { readRules } from './reads.ts';
import { settingRules } from './settings.ts';
import type { SessionStore } from './store.ts';
import { watchRules } from './watching.ts';

/**
 * Sessions, as REST and GraphQL use them: each operation parses its input, checks the caller's
 * place in the session (`access/`), decides, and calls the store; changes are published on the
 * bus, and prompts start their replies. Every statement is the store's (`prisma-store.ts`).
 */
export function sessionService(
  store: SessionStore,
  bus: EventBus,
  replies: Pick<ReplyEngine, 'instanceId' | 'start'>,
  work: Pick<WorkConfig, 'messagePageMaxBytes' | 'listPageMaxBytes' | 'reactionsPerUserMessage'>,
  limits: StreamLimits,
  { gate, signals, autonomy }: { gate: Pick<AccessGate, 'open'>; signals: Pick<SignalOutbox, 'deliver'>; autonomy: SessionAutonomy },
) {
  const access = sessionAccess(store);
  const { send, cancel } = promptRules({ store, bus, replies, access, autonomy });
  return {
    permissionIn: access.permissionIn,
    ...readRules(store, access, work),
    send,
    ...settingRules({ store, bus, access, autonomy }),
    ...watchRules({ bus, limits, gate, access, send }),
    ...reactionRules(store, bus, access, work),
    cancel,
    ...memberRules({ store, bus, access, signals }),
  };
}

export type SessionService = ReturnType<typeof sessionService>;
