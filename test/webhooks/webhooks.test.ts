import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts';

// Webhooks over REST against a real receiver on loopback that verifies every request with the
// Standard Webhooks library (`standardwebhooks`): the secret shown once, a test event signed
// and delivered, tries again after a 500, a timeout and a receiver down for a while (each event
// with one webhook-id), rotation with both secrets signing, the log and redelivery, refusals.

let t: TestApp;
let alice: TestUser;
let bob: TestUser;
let receiver: Receiver;

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  t = await start.app({
    // The receivers here are on loopback, over http: what an operator allows for tests and private networks.
    outbound: { allowHttp: true, allowPrivate: true },
    webhooks: { timeoutMs: 1_000, retryDelaysS: [1, 1, 1, 1, 1], sweepMs: 100 },
    jobs: { pollMs: 500 },
  });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

const create = (user: TestUser, body: Record<string, unknown>) => t.rest('POST', '/v2/webhooks', { key: user.apiKey, body });
const deliveries = async (user: TestUser, id: string) =>
  (await t.rest('GET', `/v2/webhooks/${id}/deliveries`, { key: user.apiKey })).body.deliveries as Record<string, any>[];
/** The requests the receiver got for one event, in order. */
const tries = (eventId: string) => receiver.received.filter((r) => r.id === eventId);

async function endpoint(user: TestUser, types = ['webhook.test']) {
  const made = await create(user, { url: receiver.url, event_types: types, description: 'ci' });
  expect(made.status).toBe(201);
  return { id: made.body.webhook.id as string, secret: made.body.secret as string };
}

describe('endpoints', () => {
  it('shows the secret once, at creation, and never in a read, a list or a change', async () => {
    const made = await create(alice, { url: receiver.url, event_types: ['task.completed', 'webhook.test'], description: 'mine' });
    expect(made.status).toBe(201);
    expect(made.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(made.body.webhook).toMatchObject({
      url: receiver.url,
      event_types: ['task.completed', 'webhook.test'],
      enabled: true,
      description: 'mine',
    });
    const id = made.body.webhook.id;
    const reads = [
      await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey }),
      await t.rest('GET', '/v2/webhooks', { key: alice.apiKey }),
      await t.rest('PATCH', `/v2/webhooks/${id}`, { key: alice.apiKey, body: { description: 'changed' } }),
    ];
    for (const read of reads) {
      expect(read.status).toBe(200);
      expect(JSON.stringify(read.body)).not.toContain(made.body.secret.slice(6));
      expect(JSON.stringify(read.body)).not.toContain('whsec_');
    }
    expect(reads[2]!.body.webhook.description).toBe('changed');
  });

  it("is its owner's alone: another user reads, changes, tests and deletes nothing of it (404)", async () => {
    const { id } = await endpoint(alice);
    for (const [method, path, body] of [
      ['GET', `/v2/webhooks/${id}`],
      ['PATCH', `/v2/webhooks/${id}`, { description: 'x' }],
      ['DELETE', `/v2/webhooks/${id}`],
      ['POST', `/v2/webhooks/${id}/rotate`, {}],
      ['POST', `/v2/webhooks/${id}/test`],
      ['GET', `/v2/webhooks/${id}/deliveries`],
    ] as const) {
      const answer = await t.rest(method, path, { key: bob.apiKey, body });
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body).toEqual({ error: 'Webhook not found' });
    }
    expect((await t.rest('GET', '/v2/webhooks', { key: bob.apiKey })).body.webhooks.map((w: { id: string }) => w.id)).not.toContain(id);
    expect((await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey })).status).toBe(200);
  });

  it('refuses event types outside the list naming them, a body with nothing to change, and a URL that is none, changing nothing', async () => {
    const before = (await t.rest('GET', '/v2/webhooks', { key: bob.apiKey })).body.webhooks.length;
    const unknown = await create(bob, { url: receiver.url, event_types: ['task.completed', 'task.exploded', 'nope'] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toContain('event_types');
    expect(unknown.body.error).toContain('"task.exploded", "nope" are not event types');
    const none = await create(bob, { url: receiver.url, event_types: [] });
    expect(none.status).toBe(400);
    const notUrl = await create(bob, { url: 'not a url', event_types: ['webhook.test'] });
    expect(notUrl.status).toBe(400);
    expect(notUrl.body.error).toMatch(/^url: is not a URL/);
    expect((await t.rest('GET', '/v2/webhooks', { key: bob.apiKey })).body.webhooks.length).toBe(before);
    const { id } = await endpoint(bob);
    const empty = await t.rest('PATCH', `/v2/webhooks/${id}`, { key: bob.apiKey, body: { colour: 'red' } });
    expect(empty.status).toBe(400);
    expect(empty.body.error).toContain('names nothing to change');
  });
});

describe('deliveries', () => {
  it('sends webhook.test signed so that standardwebhooks verifies it, and logs it delivered with the answer', async () => {
    const { id, secret } = await endpoint(alice);
    const sent = await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey });
    expect(sent.status).toBe(200);
    const eventId = sent.body.delivery.event_id;
    await expect.poll(() => tries(eventId).length).toBe(1);
    const request = tries(eventId)[0]!;
    const event = receiver.verify(request, secret);
    expect(event).toMatchObject({ type: 'webhook.test', data: { webhook_id: id, url: receiver.url } });
    // The endpoint as REST's GET shows it, made by REST's own mapping.
    expect(event.data.webhook).toEqual((await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey })).body.webhook);
    expect(request.headers['content-type']).toBe('application/json');
    expect(() => receiver.verify(request, `whsec_${Buffer.alloc(32, 7).toString('base64')}`)).toThrow();
    await expect.poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status).toBe('delivered');
    const logged = (await deliveries(alice, id)).find((d) => d.event_id === eventId)!;
    expect(logged).toMatchObject({
      event_type: 'webhook.test',
      attempts: 1,
      status_code: 200,
      response: 'ok',
      error: null,
      next_attempt_at: null,
    });
  });

  it('tries again after 500s with the same webhook-id, until the receiver takes it', async () => {
    const { id, secret } = await endpoint(alice);
    receiver.answer({ status: 500, body: 'down for maintenance' }, { status: 503 });
    const eventId = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(() => tries(eventId).length, { timeout: 20_000 }).toBe(3);
    for (const request of tries(eventId)) expect(receiver.verify(request, secret).type).toBe('webhook.test');
    expect(new Set(tries(eventId).map((r) => r.body)).size).toBe(1);
    await expect.poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status).toBe('delivered');
    expect((await deliveries(alice, id)).find((d) => d.event_id === eventId)).toMatchObject({ attempts: 3, status_code: 200 });
  });

  it('renders the object once, before the first try: a retry and a redelivery send the same bytes, though the object changed since', async () => {
    const { id, secret } = await endpoint(alice);
    // As GET shows it at the event: the failed first try marks it failing_since.
    const shown = (await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey })).body.webhook;
    receiver.answer({ status: 500 });
    const eventId = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(() => tries(eventId).length).toBe(1);
    expect(receiver.verify(tries(eventId)[0]!, secret).data.webhook).toEqual(shown);
    const changed = await t.rest('PATCH', `/v2/webhooks/${id}`, { key: alice.apiKey, body: { description: 'changed since the event' } });
    expect(changed.status).toBe(200);
    await expect
      .poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status, { timeout: 20_000 })
      .toBe('delivered');
    const delivery = (await deliveries(alice, id)).find((d) => d.event_id === eventId)!;
    const again = await t.rest('POST', `/v2/webhooks/${id}/deliveries/${delivery.id}/redeliver`, { key: alice.apiKey });
    expect(again.status).toBe(200);
    await expect.poll(() => tries(eventId).length).toBe(3);
    expect(tries(eventId).map((r) => r.body)).toEqual(Array(3).fill(tries(eventId)[0]!.body));
    expect(receiver.verify(tries(eventId)[2]!, secret).data.webhook).toEqual(shown);
  });

  it('logs every try of a delivery: its number, time, status code, duration, the first bytes of the answer and the next try', async () => {
    const { id } = await endpoint(alice);
    receiver.answer({ status: 500, body: 'down for maintenance' }, { status: 503, body: 'x'.repeat(10_000) });
    const eventId = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect
      .poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status, { timeout: 20_000 })
      .toBe('delivered');
    const { tries: log } = (await deliveries(alice, id)).find((d) => d.event_id === eventId)!;
    expect(log.map((a: Record<string, unknown>) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, 500, null],
      [2, 503, null],
      [3, 200, null],
    ]);
    expect(log[0].response).toBe('down for maintenance');
    expect(log[1].response).toHaveLength(4096);
    expect(log[2].response).toBe('ok');
    for (const [i, a] of log.entries()) {
      expect(a.duration_ms).toBeGreaterThanOrEqual(0);
      // Each try was made when the one before said the next was due, or after.
      if (i > 0) expect(Date.parse(a.at)).toBeGreaterThanOrEqual(Date.parse(log[i - 1].next_attempt_at));
      // The try the receiver got, by its webhook-timestamp (seconds).
      expect(Math.floor(Date.parse(a.at) / 1000)).toBe(Number(tries(eventId)[i]!.timestamp));
    }
    expect(log[0].next_attempt_at).not.toBeNull();
    expect(log[2].next_attempt_at).toBeNull();
  });

  it('cuts a receiver that does not answer at the timeout, and tries again', async () => {
    const { id } = await endpoint(alice);
    receiver.answer('hang');
    const eventId = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect
      .poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status, { timeout: 20_000 })
      .toBe('delivered');
    expect(tries(eventId).map((r) => r.cut)).toEqual([true, false]);
    expect((await deliveries(alice, id)).find((d) => d.event_id === eventId)).toMatchObject({ attempts: 2, status_code: 200 });
  });

  it('holds no more tries in flight to one receiver than WEBHOOK_IN_FLIGHT (4), however many are due, and delivers them all', async () => {
    const slow = await startReceiver();
    try {
      const made = await create(alice, { url: slow.url, event_types: ['webhook.test'] });
      const id = made.body.webhook.id;
      // Ten tries held unanswered until the timeout cuts each: ten events due at once.
      slow.answer(...Array.from({ length: 10 }, () => 'hang' as const));
      const events: string[] = [];
      for (let i = 0; i < 10; i++)
        events.push((await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id);
      await expect
        .poll(async () => (await deliveries(alice, id)).filter((d) => d.status === 'delivered').length, { timeout: 30_000 })
        .toBe(10);
      expect(new Set(slow.received.filter((r) => !r.cut).map((r) => r.id))).toEqual(new Set(events));
      expect(slow.mostAtOnce()).toBeLessThanOrEqual(4);
      expect(slow.mostAtOnce()).toBeGreaterThan(1);
    } finally {
      await slow.close();
    }
  });

  it('delivers everything, each event under one id, once a receiver that was down is back', async () => {
    const down = await startReceiver();
    const made = await create(alice, { url: down.url, event_types: ['webhook.test'] });
    const id = made.body.webhook.id;
    await down.stop();
    const events: string[] = [];
    for (let i = 0; i < 3; i++)
      events.push((await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id);
    await expect
      .poll(async () => (await deliveries(alice, id)).filter((d) => d.error === 'the connection was refused').length, { timeout: 20_000 })
      .toBe(3);
    await down.restart();
    try {
      await expect.poll(() => new Set(down.received.map((r) => r.id)), { timeout: 20_000 }).toEqual(new Set(events));
      for (const request of down.received) expect(events).toContain(down.verify(request, made.body.secret) && request.id);
      await expect.poll(async () => (await deliveries(alice, id)).every((d) => d.status === 'delivered')).toBe(true);
    } finally {
      await down.close();
    }
  });

  it('gives a delivery up after its last try, and redelivers it on request with the same webhook-id', async () => {
    const { id, secret } = await endpoint(alice);
    receiver.answer(...Array.from({ length: 6 }, () => ({ status: 500 })));
    const eventId = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect
      .poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === eventId)?.status, { timeout: 30_000 })
      .toBe('failed');
    const failed = (await deliveries(alice, id)).find((d) => d.event_id === eventId)!;
    expect(failed).toMatchObject({ attempts: 6, status_code: 500, next_attempt_at: null });
    const again = await t.rest('POST', `/v2/webhooks/${id}/deliveries/${failed.id}/redeliver`, { key: alice.apiKey });
    expect(again.status).toBe(200);
    expect(again.body.delivery).toMatchObject({ event_id: eventId, status: 'pending', attempts: 0 });
    await expect.poll(async () => (await deliveries(alice, id)).find((d) => d.id === again.body.delivery.id)?.status).toBe('delivered');
    expect(tries(eventId).length).toBe(7);
    expect(receiver.verify(tries(eventId).at(-1)!, secret).type).toBe('webhook.test');
    const stranger = await t.rest('POST', `/v2/webhooks/${id}/deliveries/${failed.id}/redeliver`, { key: bob.apiKey });
    expect(stranger.status).toBe(404);
    const unknown = await t.rest('POST', `/v2/webhooks/${id}/deliveries/nope/redeliver`, { key: alice.apiKey });
    expect(unknown).toMatchObject({ status: 404, body: { error: 'Delivery not found' } });
  });

  it('signs with both secrets while a rotation overlaps, and with the new one alone after an overlap of 0', async () => {
    const { id, secret: old } = await endpoint(alice);
    const rotated = await t.rest('POST', `/v2/webhooks/${id}/rotate`, { key: alice.apiKey, body: { overlap_seconds: 3600 } });
    expect(rotated.status).toBe(200);
    const fresh = rotated.body.secret;
    expect(fresh).not.toBe(old);
    expect(rotated.body.webhook.previous_secret_until).not.toBeNull();
    const during = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(() => tries(during).length).toBe(1);
    expect(tries(during)[0]!.signature.split(' ')).toHaveLength(2);
    expect(receiver.verify(tries(during)[0]!, old).type).toBe('webhook.test');
    expect(receiver.verify(tries(during)[0]!, fresh).type).toBe('webhook.test');

    const last = (await t.rest('POST', `/v2/webhooks/${id}/rotate`, { key: alice.apiKey, body: { overlap_seconds: 0 } })).body.secret;
    const after = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(() => tries(after).length).toBe(1);
    expect(tries(after)[0]!.signature.split(' ')).toHaveLength(1);
    expect(receiver.verify(tries(after)[0]!, last).type).toBe('webhook.test');
    expect(() => receiver.verify(tries(after)[0]!, fresh)).toThrow();
    const bad = await t.rest('POST', `/v2/webhooks/${id}/rotate`, { key: alice.apiKey, body: { overlap_seconds: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^overlap_seconds: /);
  });
});

describe('an endpoint failing for days', () => {
  it('is turned off, says why, sends nothing more until its owner turns it on again', async () => {
    const { id } = await endpoint(alice);
    const feed = await openSse(`${t.url}/v2/webhooks/events`, { headers: { 'x-api-key': alice.apiKey } });
    const strangers = await openSse(`${t.url}/v2/webhooks/events`, { headers: { 'x-api-key': bob.apiKey } });
    // Days of failures, without waiting days: the endpoint has failed since six days ago.
    await t.db.webhook.update({ where: { id }, data: { failingSince: new Date(Date.now() - 6 * 86_400_000) } });
    receiver.answer({ status: 500 });
    const first = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(async () => (await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey })).body.webhook.enabled).toBe(false);
    const off = (await t.rest('GET', `/v2/webhooks/${id}`, { key: alice.apiKey })).body.webhook;
    expect(off.disabled_reason).toMatch(/every delivery failed for 120 hours/);
    expect(Date.parse(off.disabled_at)).toBeGreaterThan(Date.parse(off.failing_since));
    // Its owner is told on their feed, with what the endpoint now says; no one else is.
    await feed.waitFor((f) => f.event === 'update');
    expect(updates(feed.frames).map(({ _id, ...e }) => e)).toEqual([
      { type: 'webhook_disabled', webhook_id: id, url: receiver.url, reason: off.disabled_reason, disabled_at: off.disabled_at },
    ]);
    feed.close();
    strangers.close();
    expect(updates(strangers.frames)).toEqual([]);
    // Its next try (due a second after the first) finds the endpoint off and gives the delivery up untried.
    await expect
      .poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === first)?.status, { timeout: 20_000 })
      .toBe('failed');
    expect((await deliveries(alice, id)).find((d) => d.event_id === first)?.error).toBe('the endpoint is turned off');
    expect(tries(first)).toHaveLength(1);

    const on = await t.rest('PATCH', `/v2/webhooks/${id}`, { key: alice.apiKey, body: { enabled: true } });
    expect(on.body.webhook).toMatchObject({ enabled: true, disabled_reason: null, disabled_at: null, failing_since: null });
    const next = (await t.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id;
    await expect.poll(async () => (await deliveries(alice, id)).find((d) => d.event_id === next)?.status).toBe('delivered');
  });
});

describe('where the operator allows no private address', () => {
  let strict: TestApp;
  let owner: TestUser;
  setUp(async (start) => {
    strict = await start.app({ outbound: { allowHttp: false, allowPrivate: false } });
    owner = await strict.createUser('dora');
  });

  it('refuses http, loopback, private, link-local and metadata URLs with a 400 naming url, and makes nothing', async () => {
    for (const [url, why] of [
      [receiver.url, 'url: must be an https URL'],
      ['https://127.0.0.1/hook', 'url: its host 127.0.0.1 resolves to 127.0.0.1'],
      ['https://localhost/hook', 'url: its host localhost resolves to'],
      ['https://169.254.169.254/latest', 'url: its host 169.254.169.254 resolves to 169.254.169.254'],
      ['https://[::1]/hook', 'url: its host ::1 resolves to ::1'],
      ['https://10.0.0.7/hook', 'url: its host 10.0.0.7 resolves to 10.0.0.7'],
    ]) {
      const refused = await strict.rest('POST', '/v2/webhooks', { key: owner.apiKey, body: { url, event_types: ['webhook.test'] } });
      expect(refused.status, url).toBe(400);
      expect(refused.body.error, url).toContain(why);
    }
    expect((await strict.rest('GET', '/v2/webhooks', { key: owner.apiKey })).body.webhooks).toEqual([]);
  });

  it('refuses a change of url to such an address, keeping the one it had', async () => {
    const made = await strict.rest('POST', '/v2/webhooks', {
      key: owner.apiKey,
      body: { url: 'https://93.184.215.14/hook', event_types: ['webhook.test'] },
    });
    expect(made.status).toBe(201);
    const id = made.body.webhook.id;
    const moved = await strict.rest('PATCH', `/v2/webhooks/${id}`, { key: owner.apiKey, body: { url: 'https://192.168.0.1/hook' } });
    expect(moved.status).toBe(400);
    expect((await strict.rest('GET', `/v2/webhooks/${id}`, { key: owner.apiKey })).body.webhook.url).toBe('https://93.184.215.14/hook');
  });

  it('bounds the endpoints of a user, saying how many', async () => {
    const user = await strict.createUser('erin');
    const made = [];
    for (let i = 0; i < 21; i++)
      made.push(
        await strict.rest('POST', '/v2/webhooks', {
          key: user.apiKey,
          body: { url: `https://93.184.215.14/${i}`, event_types: ['task.failed'] },
        }),
      );
    expect(made.slice(0, 20).every((m) => m.status === 201)).toBe(true);
    expect(made[20]).toMatchObject({ status: 422, body: { error: 'Webhook limit reached: a user may have at most 20 endpoints' } });
  });
});

describe('the sealing key rotated', () => {
  let keyed: TestApp;
  let owner: TestUser;
  let keyFile: string;
  setUp(async (start) => {
    const dir = await start.service(mkdtemp(join(tmpdir(), 'parley-keys-')), (d) => rm(d, { recursive: true, force: true }));
    keyFile = join(dir, 'secrets.key');
    keyed = await start.app({
      secrets: { key: undefined, previous: [], keyFile, shared: false },
      outbound: { allowHttp: true, allowPrivate: true },
      webhooks: { sweepMs: 100 },
      jobs: { pollMs: 500 },
    });
    owner = await keyed.createUser('frank');
  });

  it("reseals webhooks' secrets with the deployments', so an endpoint still signs once the old key is forgotten", async () => {
    const made = await keyed.rest('POST', '/v2/webhooks', {
      key: owner.apiKey,
      body: { url: receiver.url, event_types: ['webhook.test'] },
    });
    const id = made.body.webhook.id;
    const before = (await readFile(keyFile, 'utf8')).trim();
    const rotated = await keyed.services.deployments.rotateKey();
    expect(rotated).toMatchObject({ resealed: 1, unreadable: [] });
    // The old key is gone from the file: only the new one opens anything now.
    expect((await readFile(keyFile, 'utf8')).trim().split('\n')).toHaveLength(1);
    expect((await readFile(keyFile, 'utf8')).trim()).not.toBe(before);
    const eventId = (await keyed.rest('POST', `/v2/webhooks/${id}/test`, { key: owner.apiKey })).body.delivery.event_id;
    await expect.poll(() => tries(eventId).length).toBe(1);
    expect(receiver.verify(tries(eventId)[0]!, made.body.secret).type).toBe('webhook.test');
  });
});

describe('events', () => {
  it("tells the owner's endpoint of a reply, a trigger's run and a task that ended, and another user's endpoint of none", async () => {
    const carol = await t.createUser('carol');
    await t.services.manna.grant('carol', '100', 'subscription');
    const mine = await endpoint(carol, ['reply.completed', 'trigger.run.completed', 'task.completed']);
    const theirs = await endpoint(bob, ['reply.completed', 'trigger.run.completed', 'task.completed']);
    const agent = await fixtures(t).agent(carol);
    const session = await t.rest('POST', '/v2/sessions', { key: carol.apiKey, body: { agent_ids: [agent.id], content: 'Hello' } });
    expect(session.status).toBe(200);
    const trigger = await t.rest('POST', `/v2/agents/${agent.id}/triggers`, {
      key: carol.apiKey,
      body: { name: 'Daily', prompt: 'Say hi', schedule: null },
    });
    const run = await t.rest('POST', `/v2/agents/${agent.id}/triggers/${trigger.body.triggerId}/run`, { key: carol.apiKey });
    expect(run.status).toBe(200);
    const task = await t.rest('POST', '/v2/tasks/create', {
      key: carol.apiKey,
      body: { tool: 'flux_schnell', args: { prompt: 'a lighthouse', n_samples: 1 } },
    });
    expect(task.status).toBe(200);

    const mineOnly = () => receiver.received.filter((r) => deliveredTo(r, mine.secret)).map((r) => receiver.verify(r, mine.secret));
    // Two replies end: the prompt's, and the trigger run's in a session of its own, in either order.
    const promptReply = (e: { type: string; data: { session_id?: string } }) =>
      e.type === 'reply.completed' && e.data.session_id === session.body.session_id;
    await expect
      .poll(() => [...new Set(mineOnly().map((e) => e.type))].sort().concat(mineOnly().some(promptReply) ? ['the prompt'] : []), {
        timeout: 30_000,
      })
      .toEqual(['reply.completed', 'task.completed', 'trigger.run.completed', 'the prompt']);
    const events = mineOnly();
    expect(events.find(promptReply)!.data).toMatchObject({ message: { role: 'assistant', status: 'complete' } });
    // Each object as its GET shows it right after (made by REST's own mapping), beside the ids.
    for (const e of events.filter((r) => r.type === 'reply.completed')) {
      const shown = (await t.rest('GET', `/v2/sessions/${e.data.session_id}`, { key: carol.apiKey })).body.messages;
      expect(e.data.message).toEqual(shown.find((m: { _id: string }) => m._id === e.data.message_id));
    }
    const ran = events.find((e) => e.type === 'trigger.run.completed')!;
    expect(ran.data).toMatchObject({ trigger_id: trigger.body.triggerId, run_id: run.body.run.id });
    const shownTrigger = (await t.rest('GET', `/v2/agents/${agent.id}/triggers/${trigger.body.triggerId}`, { key: carol.apiKey })).body
      .trigger;
    expect(ran.data.run).toEqual(shownTrigger.runs.find((r: { id: string }) => r.id === run.body.run.id));
    expect(ran.data.trigger).toEqual(shownTrigger);
    const done = events.find((e) => e.type === 'task.completed')!;
    expect(done.data).toMatchObject({ task_id: task.body.task._id, task: { status: 'completed' } });
    expect(done.data.task).toEqual((await t.rest('GET', `/v2/tasks/${task.body.task._id}`, { key: carol.apiKey })).body.task);
    // Bob's endpoint wants the same types and heard nothing of carol's.
    expect(receiver.received.filter((r) => deliveredTo(r, theirs.secret))).toEqual([]);
  });
});

/** Whether a request was signed with `secret` (sent to that secret's endpoint). */
function deliveredTo(request: { body: string; id: string; timestamp: string; signature: string }, secret: string) {
  try {
    receiver.verify(request as never, secret);
    return true;
  } catch {
    return false;
  }
}

describe('GraphQL', () => {
  const gql = <T = any>(query: string, variables: Record<string, unknown>, key: string) =>
    t.gql(parse(query) as TypedDocumentNode<T, Record<string, unknown>>, variables, key);

  it('makes, lists, reads as a node, tests, rotates and deletes an endpoint; a stranger reads nothing of it', async () => {
    const made = await gql(
      `mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { id rawId url eventTypes enabled } } }`,
      { input: { url: receiver.url, eventTypes: ['WEBHOOK_TEST', 'TASK_FAILED'] } },
      alice.apiKey,
    );
    expect(made.errors).toBeUndefined();
    const { secret, webhook } = made.data.createWebhook;
    expect(secret).toMatch(/^whsec_/);
    expect(webhook).toMatchObject({ url: receiver.url, eventTypes: ['WEBHOOK_TEST', 'TASK_FAILED'], enabled: true });

    const listed = await gql(`{ me { webhooks { id url } } }`, {}, alice.apiKey);
    expect(listed.data.me.webhooks.map((w: { id: string }) => w.id)).toContain(webhook.id);
    expect(JSON.stringify(listed)).not.toContain('whsec_');
    const node = await gql(`query($id: ID!) { node(id: $id) { id ... on Webhook { rawId url } } }`, { id: webhook.id }, alice.apiKey);
    expect(node.data.node).toEqual({ id: webhook.id, rawId: webhook.rawId, url: receiver.url });
    const stranger = await gql(`query($id: ID!) { node(id: $id) { id } }`, { id: webhook.id }, bob.apiKey);
    expect(stranger.data?.node).toBeNull();
    expect(stranger.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');

    const tested = await gql(
      `mutation($id: ID!) { testWebhook(id: $id) { rawId eventId eventType status } }`,
      { id: webhook.id },
      alice.apiKey,
    );
    const eventId = tested.data.testWebhook.eventId;
    await expect.poll(() => tries(eventId).length).toBe(1);
    expect(receiver.verify(tries(eventId)[0]!, secret).type).toBe('webhook.test');
    await expect
      .poll(
        async () =>
          (
            await gql(
              `query($id: ID!) { node(id: $id) { ... on Webhook { disabledAt deliveries(first: 5) { eventId status statusCode tries { attempt statusCode response nextAttemptAt } } } } }`,
              { id: webhook.id },
              alice.apiKey,
            )
          ).data.node,
      )
      .toEqual({
        disabledAt: null,
        deliveries: [
          { eventId, status: 'delivered', statusCode: 200, tries: [{ attempt: 1, statusCode: 200, response: 'ok', nextAttemptAt: null }] },
        ],
      });
    const redelivered = await gql(
      `mutation($id: ID!, $d: ID!) { redeliverWebhook(id: $id, deliveryId: $d) { eventId status } }`,
      { id: webhook.id, d: tested.data.testWebhook.rawId },
      alice.apiKey,
    );
    expect(redelivered.data.redeliverWebhook).toEqual({ eventId, status: 'pending' });

    const rotated = await gql(
      `mutation($id: ID!) { rotateWebhookSecret(id: $id, overlapSeconds: 0) { secret } }`,
      { id: webhook.id },
      alice.apiKey,
    );
    expect(rotated.data.rotateWebhookSecret.secret).not.toBe(secret);
    const unknown = await gql(
      `mutation($id: ID!) { updateWebhook(id: $id, input: { eventTypes: [TASK_EXPLODED] }) { id } }`,
      { id: webhook.id },
      alice.apiKey,
    );
    expect(unknown.errors?.[0]?.message).toContain('TASK_EXPLODED');
    const refused = await gql(`mutation($id: ID!) { deleteWebhook(id: $id) }`, { id: webhook.id }, bob.apiKey);
    expect(refused.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const deleted = await gql(`mutation($id: ID!) { deleteWebhook(id: $id) }`, { id: webhook.id }, alice.apiKey);
    expect(deleted.data.deleteWebhook).toBe(webhook.id);
    expect((await t.rest('GET', `/v2/webhooks/${webhook.rawId}`, { key: alice.apiKey })).status).toBe(404);
  });
});
