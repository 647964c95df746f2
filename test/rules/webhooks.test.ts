import { describe, expect, it } from 'vitest';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import { DELIVERY_NOT_FOUND, WEBHOOK_NOT_FOUND, webhookService } from '../../src/domain/webhooks/service.ts';
import { signedHeaders } from '../../src/domain/webhooks/signing.ts';
import { memoryWebhookSealer, memoryWebhookStore } from './support/webhooks.ts';

/**
 * The endpoints' rules over a store in memory: an address the guard refuses is never saved, the
 * secret is shown once and stored only sealed for its row, an endpoint is its owner's alone (a
 * stranger's request names nothing), a user has a bounded number, a rotation keeps the secret
 * before it for the overlap asked, and the log's pages are checked before anything is read.
 * Delivering (the queue, the receiver, the database's claim) is tested on both databases in
 * test/webhooks/.
 */
const owner: Viewer = { id: 'owner' };
const stranger: Viewer = { id: 'stranger' };

function world(options: { refuse?: string; problem?: string; perUser?: number } = {}) {
  const { store, rows, deliveries } = memoryWebhookStore();
  const sealer = memoryWebhookSealer(options.problem ?? null);
  const checked: string[] = [];
  const guard = {
    async refusal(url: string) {
      checked.push(url);
      return options.refuse && url.includes('inside') ? options.refuse : null;
    },
  };
  const webhooks = webhookService({ store, sealer, guard, limits: { perUser: options.perUser ?? 3 } });
  return { webhooks, rows, deliveries, sealer, checked };
}

const refusal = (code: string, message: string | RegExp, fieldPath?: (string | number)[]) =>
  expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message), fieldPath });
const input = { url: 'https://receiver.example/hooks', eventTypes: ['reply.completed'] };

describe('making an endpoint', () => {
  it('shows its whsec_ secret once and stores it only sealed for its row', async () => {
    const { webhooks, rows, sealer } = world();
    const { webhook, secret } = await webhooks.create(owner, { ...input, description: 'CRM' });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhook).toMatchObject({ userId: owner.id, url: input.url, description: 'CRM', eventTypes: ['reply.completed'], enabled: true });
    expect(JSON.stringify(webhook)).not.toContain(secret.slice(6));
    const stored = rows.get(webhook.id)!.sealed.secret;
    expect(stored).toBe(sealer.sealed[0]);
    expect(stored).not.toContain(secret);
    expect(sealer.open(stored, webhook.id)).toBe(secret);
    // Read back, it never carries the secret again.
    expect(JSON.stringify(await webhooks.get(owner, webhook.id))).not.toContain(secret.slice(6));
    expect(JSON.stringify(await webhooks.list(owner))).not.toContain(secret.slice(6));
  });

  it('gives each endpoint a secret of its own', async () => {
    const { webhooks } = world();
    const a = await webhooks.create(owner, input);
    const b = await webhooks.create(owner, input);
    expect(a.secret).not.toBe(b.secret);
  });

  it('refuses an address the guard refuses, naming the url, and saves nothing', async () => {
    const { webhooks, rows, checked } = world({ refuse: 'resolves to a private address' });
    await expect(webhooks.create(owner, { ...input, url: 'https://inside.example/' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'resolves to a private address', ['url']),
    );
    expect(checked).toEqual(['https://inside.example/']);
    expect(rows.size).toBe(0);
  });

  it('names every unknown event type in one answer, and saves nothing', async () => {
    const { webhooks, rows } = world();
    await expect(webhooks.create(owner, { ...input, eventTypes: ['reply.completed', 'reply.done', 'task.exploded'] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /^"reply\.done", "task\.exploded" are not event types: use reply\.completed, /, ['eventTypes']),
    );
    await expect(webhooks.create(owner, { ...input, eventTypes: [] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must name at least one event type', ['eventTypes']),
    );
    expect(rows.size).toBe(0);
  });

  it('keeps each listed type once', async () => {
    const { webhooks } = world();
    const { webhook } = await webhooks.create(owner, { ...input, eventTypes: ['task.failed', 'task.failed', 'reply.failed'] });
    expect(webhook.eventTypes).toEqual(['task.failed', 'reply.failed']);
  });

  it('allows a user a bounded number of endpoints, others unaffected', async () => {
    const { webhooks, rows } = world({ perUser: 2 });
    await webhooks.create(owner, input);
    await webhooks.create(owner, input);
    await expect(webhooks.create(owner, input)).rejects.toEqual(refusal('UNPROCESSABLE', /at most 2 endpoints/));
    expect(rows.size).toBe(2);
    await expect(webhooks.create(stranger, input)).resolves.toMatchObject({ webhook: { userId: stranger.id } });
  });

  it('is unavailable, saving nothing, when secrets cannot be sealed here', async () => {
    const { webhooks, rows } = world({ problem: 'SECRETS_KEY is not set' });
    await expect(webhooks.create(owner, input)).rejects.toEqual(refusal('UNAVAILABLE', 'SECRETS_KEY is not set'));
    expect(rows.size).toBe(0);
  });
});

describe("someone else's endpoint", () => {
  it('is not found for every operation, as one that does not exist, and is left as it was', async () => {
    const { webhooks, rows, deliveries } = world();
    const { webhook } = await webhooks.create(owner, input);
    const before = structuredClone(rows.get(webhook.id));
    const attempts = [
      webhooks.get(stranger, webhook.id),
      webhooks.update(stranger, webhook.id, { enabled: false }),
      webhooks.remove(stranger, webhook.id),
      webhooks.rotate(stranger, webhook.id),
      webhooks.test(stranger, webhook.id),
      webhooks.deliveries(stranger, webhook.id),
      webhooks.redeliver(stranger, webhook.id, 'delivery-0001'),
      webhooks.get(owner, 'no-such-webhook'),
      webhooks.get(owner, 'bad\u0000id'),
    ];
    for (const attempt of attempts) await expect(attempt).rejects.toEqual(refusal('NOT_FOUND', WEBHOOK_NOT_FOUND));
    expect(rows.get(webhook.id)).toEqual(before);
    expect(deliveries).toEqual([]);
    expect(await webhooks.list(stranger)).toEqual([]);
  });
});

describe('changing an endpoint', () => {
  it('checks a new address with the guard and keeps the old one when refused', async () => {
    const { webhooks } = world({ refuse: 'is on loopback' });
    const { webhook } = await webhooks.create(owner, input);
    await expect(webhooks.update(owner, webhook.id, { url: 'https://inside.example/' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'is on loopback', ['url']),
    );
    expect((await webhooks.get(owner, webhook.id)).url).toBe(input.url);
  });

  it('refuses a change that names nothing', async () => {
    const { webhooks } = world();
    const { webhook } = await webhooks.create(owner, input);
    await expect(webhooks.update(owner, webhook.id, {})).rejects.toEqual(refusal('BAD_USER_INPUT', /names nothing to change/, []));
  });

  it('removed, is gone for its owner', async () => {
    const { webhooks } = world();
    const { webhook } = await webhooks.create(owner, input);
    expect(await webhooks.remove(owner, webhook.id)).toBe(webhook.id);
    await expect(webhooks.get(owner, webhook.id)).rejects.toEqual(refusal('NOT_FOUND', WEBHOOK_NOT_FOUND));
  });
});

describe('rotating the secret', () => {
  it('shows the new secret once and keeps the one before signing for the overlap asked', async () => {
    const { webhooks, rows, sealer } = world();
    const made = await webhooks.create(owner, input);
    const asked = Date.now();
    const rotated = await webhooks.rotate(owner, made.webhook.id, { overlapSeconds: 3600 });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(made.secret);
    const { sealed } = rows.get(made.webhook.id)!;
    expect(sealer.open(sealed.secret, made.webhook.id)).toBe(rotated.secret);
    expect(sealer.open(sealed.previousSecret!, made.webhook.id)).toBe(made.secret);
    const until = rotated.webhook.previousSecretUntil!.getTime();
    expect(until).toBeGreaterThanOrEqual(asked + 3_600_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 3_600_000);
    // A receiver holding either secret verifies a delivery made during the overlap.
    const headers = signedHeaders([rotated.secret, made.secret], 'msg_1', new Date(), '{}');
    expect(headers['webhook-signature']?.split(' ')).toHaveLength(2);
  });

  it('keeps the secret before for a day unless told, and drops it at once for an overlap of 0', async () => {
    const { webhooks, rows } = world();
    const { webhook } = await webhooks.create(owner, input);
    const day = await webhooks.rotate(owner, webhook.id);
    expect(day.webhook.previousSecretUntil!.getTime() - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
    const none = await webhooks.rotate(owner, webhook.id, { overlapSeconds: 0 });
    expect(none.webhook.previousSecretUntil).toBeNull();
    expect(rows.get(webhook.id)!.sealed.previousSecret).toBeNull();
  });

  it('refuses an overlap past a week and changes nothing', async () => {
    const { webhooks, rows } = world();
    const { webhook } = await webhooks.create(owner, input);
    const before = structuredClone(rows.get(webhook.id));
    await expect(webhooks.rotate(owner, webhook.id, { overlapSeconds: 8 * 86_400 })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /at most a week/, ['overlapSeconds']),
    );
    expect(rows.get(webhook.id)).toEqual(before);
  });
});

describe('the delivery log', () => {
  it('records a test event for this endpoint alone, whatever types it lists, and redelivers it with the same event id', async () => {
    const { webhooks } = world();
    const { webhook } = await webhooks.create(owner, { ...input, enabled: false });
    const other = await webhooks.create(owner, input);
    const sent = await webhooks.test(owner, webhook.id);
    expect(sent).toMatchObject({ webhookId: webhook.id, eventType: 'webhook.test', status: 'pending', attempts: 0 });
    const again = await webhooks.redeliver(owner, webhook.id, sent.id);
    expect(again).toMatchObject({ webhookId: webhook.id, eventId: sent.eventId, eventType: 'webhook.test' });
    expect(again.id).not.toBe(sent.id);
    expect((await webhooks.deliveries(owner, webhook.id)).map((d) => d.id)).toEqual([again.id, sent.id]);
    expect(await webhooks.deliveries(owner, other.webhook.id)).toEqual([]);
    // A delivery of another endpoint is not one of this one's.
    await expect(webhooks.redeliver(owner, other.webhook.id, sent.id)).rejects.toEqual(refusal('NOT_FOUND', DELIVERY_NOT_FOUND));
  });

  it('pages newest first, refuses a page size out of range and reads nothing for a cursor that names no row', async () => {
    const { webhooks } = world();
    const { webhook } = await webhooks.create(owner, input);
    const sent = [];
    for (let i = 0; i < 3; i++) sent.push(await webhooks.test(owner, webhook.id));
    expect((await webhooks.deliveries(owner, webhook.id, { limit: 2 })).map((d) => d.id)).toEqual([sent[2]!.id, sent[1]!.id]);
    expect((await webhooks.deliveries(owner, webhook.id, { limit: 2, before: sent[1]!.id })).map((d) => d.id)).toEqual([sent[0]!.id]);
    for (const limit of [0, 101, 1.5])
      await expect(webhooks.deliveries(owner, webhook.id, { limit })).rejects.toEqual(
        refusal('BAD_USER_INPUT', 'must be a whole number from 1 to 100', ['limit']),
      );
    expect(await webhooks.deliveries(owner, webhook.id, { before: 'bad\u0000cursor' })).toEqual([]);
  });
});
