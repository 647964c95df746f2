import type { EventsConfig, LimitsConfig } from '../../src/config.ts';
import type { Db } from '../../src/db/database.ts';
import { accessGate, prismaWatchAccessStore } from '../../src/domain/access/index.ts';
import { apiKeyService, prismaApiKeyStore } from '../../src/domain/api-keys/index.ts';
import { autonomyRules, prismaAutonomyStore } from '../../src/domain/autonomy/index.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { feedService } from '../../src/domain/feeds/index.ts';
import type { ReplyEngine, ReplyJob } from '../../src/domain/replies/engine.ts';
import { prismaSessionStore, sessionService } from '../../src/domain/sessions/index.ts';
import { prismaSignalStore, signalOutbox } from '../../src/domain/signals/index.ts';
import { memorySlotStore } from '../../src/limits/slots.ts';
import { streamLimits } from '../../src/limits/streams.ts';
import { inMemoryJobQueue } from '../domain/in-memory-jobs.ts';
import { domainConfig, quietLog } from './domain-database.ts';

/**
 * The sessions service, API keys and users' feeds over their Prisma stores, composed as
 * src/domain/services.ts composes them, for tests of what those stores answer on a real database.
 * Unless given `replies` (a reply engine of the test's), none runs: the replies a prompt asks for
 * are written `streaming` by the sessions' store and their start is recorded in `started`. Autonomous turns go to a job queue in memory
 * that nothing works. Stream slots are counted in this process.
 */
export function sessionsOver(
  db: Db,
  bus: EventBus,
  options: { limits?: Partial<LimitsConfig>; events?: Partial<EventsConfig>; replies?: Pick<ReplyEngine, 'instanceId' | 'start'> } = {},
) {
  const streams = streamLimits(memorySlotStore(), { ...domainConfig.limits, ...options.limits }, quietLog);
  const signals = signalOutbox(prismaSignalStore(db), bus, quietLog);
  const gate = accessGate(prismaWatchAccessStore(db), options.events?.accessRecheckMs ?? domainConfig.events.accessRecheckMs, quietLog);
  const started: ReplyJob[] = [];
  const replies = options.replies ?? {
    instanceId: 'test-instance',
    start: async (job: ReplyJob) => {
      started.push(job);
    },
  };
  const autonomy = autonomyRules({ store: prismaAutonomyStore(db), bus, jobs: inMemoryJobQueue().queue, replies, log: quietLog });
  return {
    sessions: sessionService(prismaSessionStore(db), bus, replies, domainConfig.work, streams, { gate, signals, autonomy }),
    apiKeys: apiKeyService(prismaApiKeyStore(db), signals),
    feeds: feedService({ bus, limits: streams, gate }),
    started,
    /** Stops the periodic check of open watches' access (the app stops it when it closes). */
    stop: () => gate.stop(),
  };
}
