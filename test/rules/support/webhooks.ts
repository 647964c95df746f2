import type { WebhookEventInput } from '../../../src/domain/webhooks/index.ts';
import type { Sealer } from '../../../src/domain/webhooks/ports.ts';
import type { DeliveryView, SealedSecrets, WebhookStore, WebhookView } from '../../../src/domain/webhooks/store.ts';

/** An endpoint as the in-memory store keeps it: the view and its sealed secrets. */
interface Row extends WebhookView {
  sealed: SealedSecrets;
}

/** Endpoints and their deliveries in memory, for the rules test; `rows` shows what was stored. */
export function memoryWebhookStore() {
  const rows = new Map<string, Row>();
  const deliveries: DeliveryView[] = [];
  let seq = 0;
  const view = ({ sealed: _sealed, ...row }: Row): WebhookView => ({ ...row, eventTypes: [...row.eventTypes] });
  const must = (id: string) => {
    const row = rows.get(id);
    if (!row) throw new Error(`no webhook ${id}`);
    return row;
  };
  const deliver = (webhookId: string, eventId: string, eventType: string, at: Date): DeliveryView => {
    const delivery: DeliveryView = {
      id: `delivery-${String(++seq).padStart(4, '0')}`,
      webhookId,
      eventId,
      eventType,
      status: 'pending',
      attempts: 0,
      lastAttemptAt: null,
      statusCode: null,
      durationMs: null,
      answer: null,
      error: null,
      nextAttemptAt: at,
      createdAt: at,
      tries: [],
    };
    deliveries.push(delivery);
    return { ...delivery };
  };

  const store: WebhookStore = {
    count: async (userId) => [...rows.values()].filter((r) => r.userId === userId).length,
    async create({ secret, ...row }) {
      const at = new Date();
      const stored: Row = {
        ...row,
        disabledReason: null,
        disabledAt: null,
        failingSince: null,
        previousSecretUntil: null,
        createdAt: at,
        updatedAt: at,
        sealed: { secret, previousSecret: null, previousUntil: null },
      };
      rows.set(row.id, stored);
      return view(stored);
    },
    list: async (userId) => [...rows.values()].filter((r) => r.userId === userId).map(view),
    byId: async (id) => {
      const row = rows.get(id);
      return row ? view(row) : null;
    },
    async update(id, changes) {
      const row = must(id);
      for (const [key, value] of Object.entries(changes)) if (value !== undefined) Object.assign(row, { [key]: value });
      if (changes.enabled) Object.assign(row, { disabledReason: null, disabledAt: null, failingSince: null });
      row.updatedAt = new Date();
      return view(row);
    },
    async remove(id) {
      rows.delete(id);
    },
    sealedSecret: async (id) => rows.get(id)?.sealed.secret ?? null,
    async rotate(id, secrets) {
      const row = must(id);
      row.sealed = secrets;
      row.previousSecretUntil = secrets.previousUntil;
      return view(row);
    },
    async deliveries(webhookId, page) {
      const mine = deliveries.filter((d) => d.webhookId === webhookId).reverse();
      const from = page.before === undefined ? 0 : mine.findIndex((d) => d.id === page.before) + 1;
      return (from === 0 && page.before !== undefined ? [] : mine.slice(from, from + page.limit)).map((d) => ({ ...d }));
    },
    delivery: async (webhookId, deliveryId) => {
      const found = deliveries.find((d) => d.id === deliveryId && d.webhookId === webhookId);
      return found ? { ...found } : null;
    },
    async redeliver(webhookId, eventId, at) {
      const first = deliveries.find((d) => d.eventId === eventId);
      return deliver(webhookId, eventId, first?.eventType ?? 'unknown', at);
    },
    recordFor: async (webhookId, event: WebhookEventInput, at) => deliver(webhookId, `event-${++seq}`, event.type, at),
  };
  return { store, rows, deliveries };
}

/** Seals by wrapping with what it is bound to, so a test sees a sealed value is not the secret and which row it is for. */
export function memoryWebhookSealer(problem: string | null = null): Sealer & { sealed: string[] } {
  const sealed: string[] = [];
  return {
    problem,
    sealed,
    seal(plain, boundTo) {
      const value = `sealed(${boundTo}):${Buffer.from(plain).toString('base64')}`;
      sealed.push(value);
      return value;
    },
    open(value, boundTo) {
      const prefix = `sealed(${boundTo}):`;
      if (!value.startsWith(prefix)) throw new Error('sealed for another row');
      return Buffer.from(value.slice(prefix.length), 'base64').toString();
    },
  };
}
