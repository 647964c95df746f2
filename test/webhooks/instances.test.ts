import { expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { setUp } from '../helpers/set-up.ts';
import { type Receiver, startReceiver, SAFETY_NET_NEVER } from '../helpers/webhook-receiver.ts';

// Two instances on one PostgreSQL, both working the deliveries' queue: each event reaches the
// receiver once (every try answered 200), whichever instance recorded it. Their safety-net sweeps
// never come within the test: the instance that records an event hands it to the shared queue
// once the transaction commits, and the queue's poller on either instance delivers it.

let a: TestApp;
let b: TestApp;
let alice: TestUser;
let receiver: Receiver;

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  const database = await start.service(freshPostgresDatabase(), (d) => d.drop());
  const config = {
    outbound: { allowHttp: true, allowPrivate: true },
    webhooks: { sweepMs: SAFETY_NET_NEVER },
    jobs: { pollMs: 500 },
    // One sealing key for both, as instances are given.
    secrets: { key: Buffer.alloc(32, 9), previous: [], keyFile: undefined, shared: true },
  };
  a = await start.app(config, { kind: 'postgres', url: database.url });
  b = await start.app(config, { kind: 'postgres', url: database.url });
  alice = await a.createUser('alice');
});

it('delivers each event exactly once with two instances, each handing over the events it records once they commit', async () => {
  const made = await a.rest('POST', '/v2/webhooks', { key: alice.apiKey, body: { url: receiver.url, event_types: ['webhook.test'] } });
  expect(made.status).toBe(201);
  const id = made.body.webhook.id;
  const events: string[] = [];
  for (let i = 0; i < 40; i++) {
    const via = i % 2 ? a : b;
    events.push((await via.rest('POST', `/v2/webhooks/${id}/test`, { key: alice.apiKey })).body.delivery.event_id);
  }
  await expect.poll(() => new Set(receiver.received.map((r) => r.id)).size, { timeout: 60_000 }).toBe(40);
  // Both instances' pollers had their chance at every one: none came twice.
  await expect
    .poll(async () =>
      (await b.rest('GET', `/v2/webhooks/${id}/deliveries?limit=100`, { key: alice.apiKey })).body.deliveries.every(
        (d: { status: string }) => d.status === 'delivered',
      ),
    )
    .toBe(true);
  expect(receiver.received.map((r) => r.id).sort()).toEqual([...events].sort());
  for (const request of receiver.received) expect(receiver.verify(request, made.body.secret).type).toBe('webhook.test');
});
