import type { Db } from '../../db/database.ts';
import type { Prisma } from '../../generated/prisma/client.ts';
import { newId } from '../core/ids.ts';
import type { WebhookEventInput, WebhookEventType } from './events.ts';
import type { ClaimedDelivery, DeliveryStore, DeliveryView, WebhookStore, WebhookView } from './store.ts';

type Tx = Prisma.TransactionClient;

const webhookView = (row: {
  id: string;
  userId: string;
  url: string;
  description: string;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: Date | null;
  failingSince: Date | null;
  previousUntil: Date | null;
  createdAt: Date;
  updatedAt: Date;
}): WebhookView => ({
  id: row.id,
  userId: row.userId,
  url: row.url,
  description: row.description,
  eventTypes: row.eventTypes,
  enabled: row.enabled,
  disabledReason: row.disabledReason,
  disabledAt: row.disabledAt,
  failingSince: row.failingSince,
  previousSecretUntil: row.previousUntil,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
});

const withEvent = {
  event: { select: { type: true } },
  tries: {
    select: { attempt: true, at: true, statusCode: true, durationMs: true, answer: true, error: true, nextAttemptAt: true },
    orderBy: { attempt: 'asc' },
  },
} as const;
type DeliveryRow = Prisma.WebhookDeliveryGetPayload<{ include: typeof withEvent }>;

const deliveryView = (row: DeliveryRow): DeliveryView => ({
  id: row.id,
  webhookId: row.webhookId,
  eventId: row.eventId,
  eventType: row.event.type,
  status: row.status as DeliveryView['status'],
  attempts: row.attempts,
  lastAttemptAt: row.lastAttemptAt,
  statusCode: row.statusCode,
  durationMs: row.durationMs,
  answer: row.answer,
  error: row.error,
  nextAttemptAt: row.status === 'pending' ? row.nextAttemptAt : null,
  createdAt: row.createdAt,
  tries: row.tries,
});

/** An event's id, the `webhook-id` of its deliveries: `msg_` and a time-ordered id, as the specification's examples are. */
const eventId = () => `msg_${newId().replaceAll('-', '')}`;

async function writeEvent(tx: Tx, event: WebhookEventInput, webhookIds: string[], at: Date) {
  const id = eventId();
  const body = JSON.stringify({ type: event.type, timestamp: at.toISOString(), data: event.data });
  await tx.webhookEvent.create({ data: { id, userId: event.userId, type: event.type, body, createdAt: at } });
  await tx.webhookDelivery.createMany({
    data: webhookIds.map((webhookId) => ({ id: newId(), webhookId, eventId: id, nextAttemptAt: at, createdAt: at })),
  });
  return id;
}

/**
 * Writes an event inside the transaction of the change it reports (a reply ended, a run
 * completed, a deployment stopped), with one delivery for each of its owner's endpoints that
 * is on and wants its type; nothing when there are none. Returns the event's id, or null.
 */
export async function recordWebhookEvent(tx: Tx, event: WebhookEventInput, at: Date = new Date()): Promise<string | null> {
  const endpoints = await tx.webhook.findMany({
    where: { userId: event.userId, enabled: true, eventTypes: { has: event.type } },
    select: { id: true },
  });
  if (!endpoints.length) return null;
  return writeEvent(
    tx,
    event,
    endpoints.map((e) => e.id),
    at,
  );
}

/**
 * `recordWebhookEvent` for many events in one transaction (replies saved together): one read of
 * the endpoints of all their owners, then the events that have one.
 */
export async function recordWebhookEvents(tx: Tx, events: readonly WebhookEventInput[], at: Date = new Date()): Promise<void> {
  if (!events.length) return;
  const endpoints = await tx.webhook.findMany({
    where: { userId: { in: [...new Set(events.map((e) => e.userId))] }, enabled: true },
    select: { id: true, userId: true, eventTypes: true },
  });
  if (!endpoints.length) return;
  for (const event of events) {
    const wanted = endpoints.filter((e) => e.userId === event.userId && e.eventTypes.includes(event.type)).map((e) => e.id);
    if (wanted.length) await writeEvent(tx, event, wanted, at);
  }
}

export function prismaWebhookStore(db: Db): WebhookStore {
  const deliveryById = async (id: string) =>
    deliveryView(await db.webhookDelivery.findUniqueOrThrow({ where: { id }, include: withEvent }));
  return {
    count: (userId) => db.webhook.count({ where: { userId } }),
    async create(row) {
      return webhookView(await db.webhook.create({ data: row }));
    },
    async list(userId) {
      return (await db.webhook.findMany({ where: { userId }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }] })).map(webhookView);
    },
    async byId(id) {
      const row = await db.webhook.findUnique({ where: { id } });
      return row && webhookView(row);
    },
    async update(id, changes) {
      const on = changes.enabled === true ? { disabledReason: null, disabledAt: null, failingSince: null } : {};
      return webhookView(await db.webhook.update({ where: { id }, data: { ...changes, ...on } }));
    },
    async remove(id) {
      await db.webhook.deleteMany({ where: { id } });
    },
    async sealedSecret(id) {
      return (await db.webhook.findUnique({ where: { id }, select: { secret: true } }))?.secret ?? null;
    },
    async rotate(id, secrets) {
      return webhookView(await db.webhook.update({ where: { id }, data: secrets }));
    },
    async deliveries(webhookId, page) {
      const rows = await db.webhookDelivery.findMany({
        where: { webhookId, ...(page.before ? { id: { lt: page.before } } : {}) },
        include: withEvent,
        orderBy: { id: 'desc' },
        take: page.limit,
      });
      return rows.map(deliveryView);
    },
    async delivery(webhookId, deliveryId) {
      const row = await db.webhookDelivery.findFirst({ where: { id: deliveryId, webhookId }, include: withEvent });
      return row && deliveryView(row);
    },
    async redeliver(webhookId, eventId, at) {
      const id = newId();
      await db.webhookDelivery.create({ data: { id, webhookId, eventId, nextAttemptAt: at, createdAt: at } });
      return deliveryById(id);
    },
    async recordFor(webhookId, event, at) {
      const eventId = await db.$transaction((tx) => writeEvent(tx, event, [webhookId], at));
      const row = await db.webhookDelivery.findFirstOrThrow({ where: { eventId, webhookId }, include: withEvent });
      return deliveryView(row);
    },
  };
}

const stamp = (at: Date) => at.toISOString();

export function prismaDeliveryStore(db: Db): DeliveryStore {
  return {
    async takeDue(now, staleBefore, limit) {
      return db.$queryRaw<{ id: string; webhookId: string }[]>`
        UPDATE "WebhookDelivery" SET "queuedAt" = ${stamp(now)}::timestamp(3)
        WHERE "id" IN (
          SELECT "id" FROM "WebhookDelivery"
          WHERE "status" = 'pending' AND "nextAttemptAt" <= ${stamp(now)}::timestamp(3)
            AND ("queuedAt" IS NULL OR "queuedAt" < ${stamp(staleBefore)}::timestamp(3))
            AND ("claimedUntil" IS NULL OR "claimedUntil" < ${stamp(now)}::timestamp(3))
          ORDER BY "nextAttemptAt" LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
        RETURNING "id", "webhookId"`;
    },

    async claim(id, now, until): Promise<ClaimedDelivery | null> {
      const { count } = await db.webhookDelivery.updateMany({
        where: { id, status: 'pending', nextAttemptAt: { lte: now }, OR: [{ claimedUntil: null }, { claimedUntil: { lt: now } }] },
        data: { claimedUntil: until },
      });
      if (!count) return null;
      const row = await db.webhookDelivery.findUnique({
        where: { id },
        select: {
          id: true,
          attempts: true,
          event: { select: { id: true, type: true, body: true, rendered: true } },
          webhook: {
            select: {
              id: true,
              userId: true,
              url: true,
              enabled: true,
              failingSince: true,
              secret: true,
              previousSecret: true,
              previousUntil: true,
            },
          },
        },
      });
      if (!row) return null;
      const { webhook } = row;
      return {
        id: row.id,
        webhookId: webhook.id,
        userId: webhook.userId,
        url: webhook.url,
        eventId: row.event.id,
        eventType: row.event.type as WebhookEventType,
        body: row.event.body,
        rendered: row.event.rendered,
        attempts: row.attempts,
        secrets: { secret: webhook.secret, previousSecret: webhook.previousSecret, previousUntil: webhook.previousUntil },
        endpointOff: !webhook.enabled,
        endpointFailing: webhook.failingSince !== null,
      };
    },

    async dueAt(id) {
      const row = await db.webhookDelivery.findUnique({ where: { id }, select: { status: true, nextAttemptAt: true, claimedUntil: true } });
      if (row?.status !== 'pending' || !row.nextAttemptAt) return null;
      return row.claimedUntil && row.claimedUntil > row.nextAttemptAt ? row.claimedUntil : row.nextAttemptAt;
    },

    async release(id, attempts, at) {
      await db.webhookDelivery.updateMany({ where: { id, attempts }, data: { claimedUntil: null, nextAttemptAt: at, queuedAt: at } });
    },

    async settle(claimed, outcome, disable) {
      return db.$transaction(async (tx) => {
        const { count } = await tx.webhookDelivery.updateMany({
          where: { id: claimed.id, attempts: claimed.attempts, status: 'pending' },
          data: {
            attempts: claimed.attempts + 1,
            status: outcome.delivered ? 'delivered' : outcome.nextAttemptAt ? 'pending' : 'failed',
            nextAttemptAt: outcome.nextAttemptAt,
            // The job for the next try is sent with it (the sweep sends another only once this is stale).
            queuedAt: outcome.nextAttemptAt,
            claimedUntil: null,
            lastAttemptAt: outcome.at,
            statusCode: outcome.statusCode,
            durationMs: outcome.durationMs,
            answer: outcome.answer,
            error: outcome.error,
          },
        });
        if (!count) return { disabled: false };
        await tx.webhookAttempt.create({
          data: {
            deliveryId: claimed.id,
            attempt: claimed.attempts + 1,
            at: outcome.at,
            statusCode: outcome.statusCode,
            durationMs: outcome.durationMs,
            answer: outcome.answer,
            error: outcome.error,
            nextAttemptAt: outcome.nextAttemptAt,
          },
        });
        if (outcome.delivered) {
          // Most successes follow successes: the endpoint's row is written only when it was failing.
          if (claimed.endpointFailing)
            await tx.webhook.updateMany({ where: { id: claimed.webhookId, failingSince: { not: null } }, data: { failingSince: null } });
          return { disabled: false };
        }
        await tx.webhook.updateMany({ where: { id: claimed.webhookId, failingSince: null }, data: { failingSince: outcome.at } });
        const { count: disabled } = await tx.webhook.updateMany({
          where: { id: claimed.webhookId, enabled: true, failingSince: { lt: disable.before } },
          data: { enabled: false, disabledReason: disable.reason, disabledAt: outcome.at },
        });
        return { disabled: disabled > 0 };
      });
    },

    async saveRendered(eventId, body) {
      // The first to render wins: a try of another endpoint of the same owner may have rendered it meanwhile.
      await db.webhookEvent.updateMany({ where: { id: eventId, rendered: false }, data: { body, rendered: true } });
      return (await db.webhookEvent.findUniqueOrThrow({ where: { id: eventId }, select: { body: true } })).body;
    },

    async dropOff(id, attempts, at) {
      await db.webhookDelivery.updateMany({
        where: { id, attempts, status: 'pending' },
        data: { status: 'failed', nextAttemptAt: null, claimedUntil: null, lastAttemptAt: at, error: 'the endpoint is turned off' },
      });
    },
  };
}

/**
 * The webhooks' sealed secrets as the key's upkeep reseals them (`deployments/sealing.ts`): two
 * values a row (`<id>:secret`, `<id>:previous`), each sealed for the row's id; a page holds both
 * of each row it holds.
 */
export function webhookSealedRows(db: Db) {
  const column = (id: string) => (id.endsWith(':previous') ? 'previousSecret' : 'secret');
  const rowOf = (id: string) => id.slice(0, id.lastIndexOf(':'));
  return {
    count: () => db.webhook.count(),
    async sealedAfter(afterId: string | null, limit: number) {
      const rows = await db.webhook.findMany({
        where: afterId ? { id: { gt: rowOf(afterId) } } : {},
        orderBy: { id: 'asc' },
        take: Math.max(1, Math.floor(limit / 2)),
        select: { id: true, secret: true, previousSecret: true },
      });
      return rows.flatMap((r) => [
        { id: `${r.id}:secret`, sealed: r.secret, boundTo: r.id },
        { id: `${r.id}:previous`, sealed: r.previousSecret, boundTo: r.id },
      ]);
    },
    async replaceSealed(id: string, from: string, to: string) {
      const { count } = await db.webhook.updateMany({ where: { id: rowOf(id), [column(id)]: from }, data: { [column(id)]: to } });
      return count > 0;
    },
  };
}
