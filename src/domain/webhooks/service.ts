import { badInput, notFound, unavailable, unprocessable } from '../core/errors.ts';
import { canNameARow, newId } from '../core/ids.ts';
import type { AddressGuard } from '../core/outbound.ts';
import { parseInput } from '../core/validation.ts';
import type { Viewer } from '../core/viewer.ts';
import {
  createWebhookInput,
  type CreateWebhookInput,
  rotateWebhookInput,
  type RotateWebhookInput,
  updateWebhookInput,
  type UpdateWebhookInput,
} from './inputs.ts';
import type { Sealer } from './ports.ts';
import { newSecret } from './signing.ts';
import type { DeliveryView, WebhookStore, WebhookView } from './store.ts';

export const WEBHOOK_NOT_FOUND = 'Webhook not found';
export const DELIVERY_NOT_FOUND = 'Delivery not found';
/** How long the secret before a rotation signs beside the new one, unless the owner says. */
export const DEFAULT_OVERLAP_S = 24 * 3600;
/** Deliveries a page of the log holds at most. */
export const MOST_DELIVERIES = 100;

export interface WebhookLimits {
  perUser: number;
}

/** An endpoint and its secret in clear: what making one or rotating its secret answers, once. */
export interface WebhookWithSecret {
  webhook: WebhookView;
  secret: string;
}

/**
 * Endpoints a user owns (`docs/webhooks.md`): each one's address is checked by the shared guard
 * when given, its secret sealed for its row and shown once; only its owner sees or changes it
 * (another user's is "not found", as if it were not there).
 */
export function webhookService(deps: { store: WebhookStore; sealer: Sealer; guard: AddressGuard; limits: WebhookLimits }) {
  const { store, sealer, guard } = deps;

  async function own(viewer: Viewer, id: string): Promise<WebhookView> {
    const row = canNameARow(id) ? await store.byId(id) : null;
    if (!row || row.userId !== viewer.id) throw notFound(WEBHOOK_NOT_FOUND);
    return row;
  }

  async function checkUrl(url: string) {
    const refusal = await guard.refusal(url);
    if (refusal) throw badInput(refusal, ['url']);
  }

  const needSealer = () => {
    if (sealer.problem) throw unavailable(sealer.problem);
  };

  return {
    async create(viewer: Viewer, raw: CreateWebhookInput): Promise<WebhookWithSecret> {
      const input = parseInput(createWebhookInput, raw);
      needSealer();
      await checkUrl(input.url);
      if ((await store.count(viewer.id)) >= deps.limits.perUser)
        throw unprocessable(`Webhook limit reached: a user may have at most ${deps.limits.perUser} endpoints`);
      const id = newId();
      const secret = newSecret();
      const webhook = await store.create({
        id,
        userId: viewer.id,
        url: input.url,
        description: input.description ?? '',
        eventTypes: input.eventTypes,
        enabled: input.enabled ?? true,
        secret: sealer.seal(secret, id),
      });
      return { webhook, secret };
    },

    list: (viewer: Viewer) => store.list(viewer.id),

    get: own,

    async update(viewer: Viewer, id: string, raw: UpdateWebhookInput): Promise<WebhookView> {
      const input = parseInput(updateWebhookInput, raw);
      await own(viewer, id);
      if (input.url !== undefined) await checkUrl(input.url);
      return store.update(id, input);
    },

    async remove(viewer: Viewer, id: string): Promise<string> {
      await own(viewer, id);
      await store.remove(id);
      return id;
    },

    /** A new secret, shown once; the one before signs beside it for `overlapSeconds` (a day unless given). */
    async rotate(viewer: Viewer, id: string, raw: RotateWebhookInput = {}): Promise<WebhookWithSecret> {
      const input = parseInput(rotateWebhookInput, raw);
      await own(viewer, id);
      needSealer();
      const overlap = input.overlapSeconds ?? DEFAULT_OVERLAP_S;
      const secret = newSecret();
      const kept = overlap > 0 ? await store.sealedSecret(id) : null;
      const webhook = await store.rotate(id, {
        secret: sealer.seal(secret, id),
        previousSecret: kept,
        previousUntil: kept ? new Date(Date.now() + overlap * 1000) : null,
      });
      return { webhook, secret };
    },

    /** Sends `webhook.test` to this endpoint alone (whatever types it lists, on or off); the delivery. */
    async test(viewer: Viewer, id: string): Promise<DeliveryView> {
      const webhook = await own(viewer, id);
      const at = new Date();
      return store.recordFor(
        id,
        { userId: viewer.id, type: 'webhook.test', data: { webhook_id: id, url: webhook.url, sent_at: at.toISOString() } },
        at,
      );
    },

    async deliveries(viewer: Viewer, id: string, page: { limit?: number; before?: string } = {}): Promise<DeliveryView[]> {
      await own(viewer, id);
      const limit = page.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > MOST_DELIVERIES)
        throw badInput(`must be a whole number from 1 to ${MOST_DELIVERIES}`, ['limit']);
      // An id that names no row pages from nothing: an empty page, as a cursor past the end.
      if (page.before !== undefined && !canNameARow(page.before)) return [];
      return store.deliveries(id, { limit, before: page.before });
    },

    /** The delivery's event sent again to the endpoint, as a new delivery with the same `webhook-id`. */
    async redeliver(viewer: Viewer, id: string, deliveryId: string): Promise<DeliveryView> {
      await own(viewer, id);
      const delivery = canNameARow(deliveryId) ? await store.delivery(id, deliveryId) : null;
      if (!delivery) throw notFound(DELIVERY_NOT_FOUND);
      return store.redeliver(id, delivery.eventId, new Date());
    },
  };
}

export type WebhookService = ReturnType<typeof webhookService>;
