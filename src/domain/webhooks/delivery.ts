import type { EventBus } from '../core/bus.ts';
import type { JobQueue } from '../core/jobs.ts';
import type { Sealer, WebhookPayloads, WebhookSender } from './ports.ts';
import { signedHeaders } from './signing.ts';
import type { ClaimedDelivery, DeliveryStore, TryOutcome } from './store.ts';

export const WEBHOOK_QUEUE = 'webhook-deliveries';
/** Of an answer, what is read and kept in the log: a receiver cannot make the service read more. */
export const MAX_ANSWER_BYTES = 4096;
/** Deliveries one instance runs at once, over all endpoints. */
const CONCURRENCY = 64;
/** Deliveries a sweep hands to the queue at most; the rest go in the next. */
const SWEEP_BATCH = 500;
/** How long past its timeout a try holds its delivery: enough to store the outcome. */
const CLAIM_MARGIN_MS = 5_000;
/**
 * A delivery handed to the queue this long ago and held by no try is handed out again: its job
 * was lost (an instance died between the sweep and the send) or ended without a try.
 */
const STALE_MS = 30_000;
/**
 * How long a job waits on this instance for a slot of its endpoint (`inFlightPerEndpoint`) before
 * it puts its try off by a second: a try that ends hands its slot to the next at once, rather than
 * every try over the bound taking a claim, giving it back and waiting a second.
 */
const SLOT_WAIT_MS = 2_000;

/** A job of the queue: the delivery, and its endpoint (known to jobs sent since the endpoint was named in them). */
interface DeliveryJob {
  id: string;
  webhookId?: string;
}

/** Slots of tries under way to each endpoint on this instance: at most `size` each, the rest wait in turn. */
function endpointSlots(size: number) {
  const slots = new Map<string, { running: number; waiting: (() => void)[] }>();
  return {
    /** Takes a slot of `webhookId` now, or within `waitMs`; whether it got one. */
    take(webhookId: string, waitMs: number): Promise<boolean> {
      const slot = slots.get(webhookId) ?? { running: 0, waiting: [] };
      slots.set(webhookId, slot);
      if (slot.running < size) {
        slot.running++;
        return Promise.resolve(true);
      }
      // As many wait as run, no more: jobs waiting on one busy endpoint would hold the workers
      // the others' tries need.
      if (waitMs <= 0 || slot.waiting.length >= size) return Promise.resolve(false);
      return new Promise((resolve) => {
        const handed = () => {
          clearTimeout(timer);
          resolve(true);
        };
        const timer = setTimeout(() => {
          slot.waiting.splice(slot.waiting.indexOf(handed), 1);
          resolve(false);
        }, waitMs);
        slot.waiting.push(handed);
      });
    },
    /** Gives a slot back: to the next waiting, if any. */
    give(webhookId: string) {
      const slot = slots.get(webhookId);
      if (!slot) return;
      const next = slot.waiting.shift();
      if (next) return next();
      slot.running--;
      if (!slot.running) slots.delete(webhookId);
    },
  };
}

export interface DeliverySettings {
  timeoutMs: number;
  retryDelaysS: readonly number[];
  disableAfterS: number;
  inFlightPerEndpoint: number;
  sweepMs: number;
}

interface Log {
  error(obj: unknown, msg?: string): void;
  warn?(obj: unknown, msg?: string): void;
  info?(obj: unknown, msg?: string): void;
}

/** The secrets that sign now: the current one, and the one before while its overlap lasts. */
function openSecrets(sealer: Sealer, claimed: ClaimedDelivery, now: Date): string[] {
  const { secret, previousSecret, previousUntil } = claimed.secrets;
  const open = [sealer.open(secret, claimed.webhookId)];
  if (previousSecret && previousUntil && previousUntil > now) open.push(sealer.open(previousSecret, claimed.webhookId));
  return open;
}

/** When the try after try `attempt` (ended at `at`) is due; null after the last. */
function nextTry(settings: DeliverySettings, attempt: number, at: Date) {
  const delay = settings.retryDelaysS[attempt - 1];
  return delay === undefined ? null : new Date(at.getTime() + delay * 1000);
}

/** A try that sent nothing, for a reason of the service's (a secret it cannot open, an event it cannot render). */
function unsent(settings: DeliverySettings, claimed: ClaimedDelivery, at: Date, error: string): TryOutcome {
  return {
    at,
    statusCode: null,
    durationMs: 0,
    answer: null,
    error,
    delivered: false,
    nextAttemptAt: nextTry(settings, claimed.attempts + 1, at),
  };
}

/** One try: signed with the secrets that sign now, posted, and how it went (nothing stored). */
async function sendTry(
  deps: { sender: WebhookSender; sealer: Sealer; settings: DeliverySettings; log: Log },
  claimed: ClaimedDelivery,
  signal: AbortSignal | undefined,
): Promise<TryOutcome> {
  const { sender, sealer, settings, log } = deps;
  const at = new Date();
  let secrets: string[];
  try {
    secrets = openSecrets(sealer, claimed, at);
  } catch (err) {
    log.error({ err, webhook: claimed.webhookId }, 'a webhook secret could not be opened');
    return unsent(settings, claimed, at, 'the signing secret cannot be opened here');
  }
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'parley-webhooks',
    ...signedHeaders(secrets, claimed.eventId, at, claimed.body),
  };
  const response = await sender.post({
    url: claimed.url,
    headers,
    body: claimed.body,
    timeoutMs: settings.timeoutMs,
    maxAnswerBytes: MAX_ANSWER_BYTES,
    signal,
  });
  const delivered = response.status !== undefined && response.status >= 200 && response.status < 300;
  // The wait before the next try counts from the end of this one: a try cut at the timeout is not followed at once.
  const ended = new Date();
  return {
    at,
    statusCode: response.status ?? null,
    durationMs: response.durationMs,
    answer: response.status !== undefined ? response.answer : null,
    error: response.status === undefined ? response.error : null,
    delivered,
    nextAttemptAt: delivered ? null : nextTry(settings, claimed.attempts + 1, ended),
  };
}

/**
 * Delivering on the job queue, at least once: a delivery is a row, due at `nextAttemptAt`; a
 * sweep on every instance hands due ones to the queue, a job takes one try (the row's claim, so
 * one instance tries it however many jobs name it), signs it, sends it and stores the outcome,
 * then sends the job of the next try with the growing delay. A try whose instance dies is taken
 * again once its claim lapses, with the same `webhook-id`.
 */
export function webhookDeliveries(deps: {
  store: DeliveryStore;
  sender: WebhookSender;
  sealer: Sealer;
  /** Adds the objects an event names, as REST shows them, before its first try. */
  payloads: WebhookPayloads;
  jobs: JobQueue;
  /** The owner's feed, told when an endpoint is turned off (`webhook_disabled`). */
  feeds: Pick<EventBus['feeds'], 'publish'>;
  settings: DeliverySettings;
  log: Log;
}) {
  const { store, sender, sealer, payloads, jobs, feeds, settings, log } = deps;
  const slots = endpointSlots(settings.inFlightPerEndpoint);
  const again = (id: string, webhookId: string | undefined, at: Date) =>
    jobs.send(WEBHOOK_QUEUE, { id, webhookId } satisfies DeliveryJob, { at });

  const send = (claimed: ClaimedDelivery, signal: AbortSignal | undefined) => sendTry({ sender, sealer, settings, log }, claimed, signal);

  /**
   * The event's body with its objects as REST shows them, rendered by the first try of any of its
   * deliveries and stored (whichever try stored first is what all send); null when it cannot be
   * rendered now (the try fails, and the next renders again).
   */
  async function rendered(claimed: ClaimedDelivery): Promise<ClaimedDelivery | null> {
    if (claimed.rendered) return claimed;
    try {
      const { type, timestamp, data } = JSON.parse(claimed.body) as { type: string; timestamp: string; data: Record<string, unknown> };
      const full = await payloads.render({ userId: claimed.userId, type: claimed.eventType, data });
      const body = await store.saveRendered(claimed.eventId, JSON.stringify({ type, timestamp, data: full }));
      return { ...claimed, body, rendered: true };
    } catch (err) {
      log.error({ err, webhook: claimed.webhookId, event: claimed.eventId }, 'a webhook event could not be rendered');
      return null;
    }
  }

  async function tryOnce(claimed: ClaimedDelivery, signal: AbortSignal | undefined) {
    const ready = await rendered(claimed);
    const outcome = ready
      ? await send(ready, signal)
      : unsent(settings, claimed, new Date(), 'the event could not be rendered; it is tried again');
    if (signal?.aborted) {
      // Given up here (a shutdown): not the receiver's failure. The try goes back untried, and the
      // job fails so that another instance takes it at once (the same webhook-id).
      await store.release(claimed.id, claimed.attempts, new Date());
      throw new Error('the instance stopped during the try');
    }
    const reason = `every delivery failed for ${Math.round(settings.disableAfterS / 3600)} hours; turn it on again once the receiver answers`;
    const { disabled } = await store.settle(claimed, outcome, {
      before: new Date(outcome.at.getTime() - settings.disableAfterS * 1000),
      reason,
    });
    if (disabled) await tellDisabled(claimed, reason, outcome.at);
    if (outcome.nextAttemptAt) await again(claimed.id, claimed.webhookId, outcome.nextAttemptAt);
  }

  /**
   * The owner hears an endpoint was turned off on their feed, once it is stored (the endpoint's
   * `disabled_reason` and `disabled_at` say it too, whether or not a watcher was there).
   */
  async function tellDisabled(claimed: ClaimedDelivery, reason: string, at: Date) {
    log.warn?.({ webhook: claimed.webhookId, user: claimed.userId }, 'a webhook that kept failing was turned off');
    const event = {
      type: 'webhook_disabled' as const,
      webhookId: claimed.webhookId,
      url: claimed.url,
      reason,
      disabledAt: at.toISOString(),
    };
    await feeds
      .publish(claimed.userId, event)
      .catch((err) => log.error({ err, webhook: claimed.webhookId }, 'could not publish webhook_disabled'));
  }

  /**
   * One job: one try of the delivery, if it is due and no one else holds it, once a slot of its
   * endpoint is free here (waited for before the claim when the job names the endpoint).
   */
  async function handle(job: DeliveryJob, signal?: AbortSignal) {
    const { id, webhookId } = job;
    if (webhookId && !(await slots.take(webhookId, SLOT_WAIT_MS))) return void (await again(id, webhookId, new Date(Date.now() + 1_000)));
    let held = webhookId;
    try {
      const now = new Date();
      const claimed = await store.claim(id, now, new Date(now.getTime() + settings.timeoutMs + CLAIM_MARGIN_MS));
      if (!claimed) {
        // Not due yet (a job sent before its try was put off), or held by a try under way or by an
        // instance that died during one: the job comes back when it can be taken. A try that ends
        // meanwhile sends its own next job, and the claim makes the two one.
        const due = await store.dueAt(id);
        if (due && due > now) await again(id, webhookId, new Date(due.getTime() + 100));
        return;
      }
      if (claimed.endpointOff) return await store.dropOff(id, claimed.attempts, now);
      if (!held) {
        if (!(await slots.take(claimed.webhookId, 0))) {
          const later = new Date(now.getTime() + 1_000);
          await store.release(id, claimed.attempts, later);
          await again(id, claimed.webhookId, later);
          return;
        }
        held = claimed.webhookId;
      }
      await tryOnce(claimed, signal);
    } finally {
      if (held) slots.give(held);
    }
  }

  /** Hands every due delivery no job holds to the queue: new events, tries whose job was lost. */
  async function sweep() {
    const now = new Date();
    const stale = new Date(now.getTime() - STALE_MS);
    for (;;) {
      const due = await store.takeDue(now, stale, SWEEP_BATCH);
      await Promise.all(due.map((job) => jobs.send(WEBHOOK_QUEUE, job satisfies DeliveryJob)));
      if (due.length < SWEEP_BATCH) return;
    }
  }

  return {
    handle,
    sweep,
    /** Declares the queue, works it here and sweeps every `sweepMs`; returns how to stop sweeping. */
    async start() {
      const runSeconds = Math.ceil((settings.timeoutMs + CLAIM_MARGIN_MS) / 1000) + 30;
      await jobs.declare({ name: WEBHOOK_QUEUE, retries: 3, retryDelaySeconds: 1, runSeconds });
      await jobs.work<DeliveryJob>(WEBHOOK_QUEUE, { concurrency: CONCURRENCY }, (job) => handle(job.data, job.signal));
      // One sweep at a time here: a slow one is not joined by the next tick.
      let sweeping = false;
      const tick = () => {
        if (sweeping) return;
        sweeping = true;
        sweep()
          .catch((err) => log.error({ err }, 'webhook deliveries could not be handed to the queue'))
          .finally(() => {
            sweeping = false;
          });
      };
      tick();
      const timer = setInterval(tick, settings.sweepMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

export type WebhookDeliveries = ReturnType<typeof webhookDeliveries>;
