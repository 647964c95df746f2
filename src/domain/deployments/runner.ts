import { isDomainError } from '../core/errors.ts';
import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import { recordable } from './inbound.ts';
import type { Connector, PlatformSecrets, Receiver } from './ports.ts';
import { type DeploymentRun, LeftForLater, type RelayRules } from './relay.ts';
import type { DeploymentRuntimeStore, HeldDeployment, RecordedUpdate } from './runtime-store.ts';

/** Chats of one deployment answered at once on an instance; the others wait their turn. */
const CHATS_AT_ONCE = 4;

/** What the owner sees while messages read cannot be recorded (never the database's own words). */
const UNRECORDED = {
  unavailable: 'The database is unavailable: the messages read are read again once it is back',
  other: 'The messages read could not be recorded; reading them again shortly',
};

export interface RunnerDependencies {
  store: DeploymentRuntimeStore;
  relay: RelayRules;
  instanceId: string;
  log: { error(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
  /** The platform refused the secrets: the runtime invalidates the deployment and tells its owner. */
  revoked(deployment: HeldDeployment, reason: string): Promise<void>;
  /** Waits before trying again after the `attempt`th failure in a row, or less if `signal` aborts. */
  pause(attempt: number, signal: AbortSignal): Promise<void>;
}

export interface Runner {
  readonly deployment: HeldDeployment;
  /** The version of the sealed secrets it runs on; a new seal of the same secrets (a reseal, a deploy again) only moves it. */
  version: string;
  /** The secrets it runs on, as JSON (in memory only, like the runner's own copy). */
  readonly secrets: string;
  /** Until when this instance holds the lease, by its own clock (renewed by the runtime). */
  holdUntil: number;
  /** Whether its receiver has stopped by itself (lease lost, revoked). */
  readonly ended: boolean;
  /** Stop taking updates; answers under way go on (a shutdown's grace). */
  quiesce(): Promise<void>;
  /** Stops everything and waits for it. */
  stop(): Promise<void>;
}

/**
 * One running deployment on the instance that holds its lease: the connector's receiver records
 * each batch with the cursor past it (only while the lease holds), then its updates are saved in
 * order per chat and answered as their session says (`while_replying`), a few chats at once. An update that cannot be answered now is retried after
 * a pause while the lease holds, and otherwise left recorded for whoever holds it next.
 */
export function startRunner(
  deps: RunnerDependencies,
  held: HeldDeployment,
  secrets: PlatformSecrets,
  connector: Connector,
  holdUntil: number,
): Runner {
  const { store, relay, log } = deps;
  const controller = new AbortController();
  const { signal } = controller;
  let accepting = true;
  let cursor = held.cursor;
  let ended = false;
  const queued = new Set<string>();
  /** By chat: its last update queued, saved in its session (what the chat's next update waits for). */
  const chats = new Map<string, Promise<void>>();
  /** Every update being answered. */
  const answering = new Set<Promise<void>>();
  let running = 0;
  const waiting: (() => void)[] = [];

  const self: Runner = {
    deployment: held,
    version: held.version,
    secrets: JSON.stringify(secrets),
    holdUntil,
    get ended() {
      return ended;
    },
    async quiesce() {
      accepting = false;
      await receiver.stop();
    },
    async stop() {
      accepting = false;
      controller.abort();
      await receiver.stop();
      await Promise.allSettled([...chats.values(), ...answering]);
    },
  };

  const run: DeploymentRun = {
    deployment: held,
    secrets,
    connector,
    signal,
    holds: () => !signal.aborted && Date.now() < self.holdUntil,
    accepting: () => accepting && !signal.aborted,
    revoked: async (reason) => {
      accepting = false;
      controller.abort();
      await deps.revoked(held, reason);
    },
  };

  /** A slot among CHATS_AT_ONCE, waited for in turn. */
  const slot = async () => {
    if (running >= CHATS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
  };
  const release = () => {
    running--;
    waiting.shift()?.();
  };

  async function answer(update: RecordedUpdate, saved: () => void) {
    await slot();
    try {
      for (let attempt = 1; run.holds(); attempt++) {
        try {
          await relay.answer(run, update, (n) => deps.pause(n, signal), saved);
          return;
        } catch (e) {
          if (e instanceof LeftForLater || !run.holds()) return;
          if (isDomainError(e) && e.code === 'BAD_USER_INPUT') {
            // Refused for what it says, as often as it is tried: settled unanswered, so its chat goes on.
            const why = [...(e.fieldPath?.length ? [e.fieldPath.join('.')] : []), e.message].join(': ');
            log.warn({ deployment: held.id, update: update.id, reason: why }, 'a message of a deployment cannot be relayed');
            await store.finishUpdate(update.id, 'failed', `It could not be relayed: ${why}`);
            return;
          }
          log.error({ err: e, deployment: held.id, update: update.id }, 'could not answer a message of a deployment; trying again');
          await store.noteError(held.id, 'An answer could not be sent; trying again').catch(() => {});
          await deps.pause(attempt, signal);
        }
      }
    } finally {
      release();
      queued.delete(update.id);
    }
  }

  /** Queues what is recorded and not yet queued, each behind the earlier updates of its chat. */
  async function queuePending() {
    for (const update of await store.pending(held.id)) {
      if (queued.has(update.id)) continue;
      queued.add(update.id);
      const key = update.conversation.id;
      // The chat's next update waits for this one to be saved in the session, not answered: the
      // deployment's `while_replying` then says whether it waits for the answer or stops it.
      let saved!: () => void;
      const relayed = new Promise<void>((resolve) => {
        saved = resolve;
      });
      const answered = (chats.get(key) ?? Promise.resolve()).then(() => answer(update, saved)).finally(saved);
      answering.add(answered);
      void answered.finally(() => answering.delete(answered));
      chats.set(key, relayed);
      void relayed.then(() => {
        if (chats.get(key) === relayed) chats.delete(key);
      });
    }
  }

  const receiver: Receiver = connector.start(secrets, {
    cursor,
    async take(messages, to) {
      if (!run.accepting() || !run.holds()) return false;
      const batch = messages.map(recordable);
      let taken: Awaited<ReturnType<typeof store.receive>>;
      try {
        taken = await store.receive(held.id, deps.instanceId, cursor, to, batch);
      } catch (err) {
        log.error({ err, deployment: held.id }, 'could not record the messages a deployment read');
        await store.noteError(held.id, isDatabaseUnavailable(err) ? UNRECORDED.unavailable : UNRECORDED.other).catch(() => {});
        throw new Error(UNRECORDED.other);
      }
      if (!taken) return false;
      const skipped = new Set([...batch.filter((m) => m.skipped).map((m) => m.eventId), ...taken.refused]);
      if (skipped.size) log.warn({ deployment: held.id, updates: [...skipped] }, 'a deployment skipped messages it could not record');
      cursor = to;
      await queuePending();
      return true;
    },
    press: (p) =>
      relay.press(run, p).catch((err) => log.error({ err, deployment: held.id }, 'could not answer a press in a chat of a deployment')),
    revoked: (reason) => run.revoked(reason),
    fault(reason, retryInMs) {
      log.warn({ deployment: held.id, retryInMs }, reason);
      void store.noteError(held.id, reason).catch(() => {});
    },
    healthy() {
      void store.noteError(held.id, null).catch(() => {});
    },
  });
  void receiver.ended.finally(() => (ended = true));
  void queuePending().catch((err) => log.error({ err, deployment: held.id }, 'could not read the messages a deployment has to answer'));
  return self;
}
