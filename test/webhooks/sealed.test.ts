import { stat } from 'node:fs/promises';
import { expect, it } from 'vitest';
import type { DatabaseConfig, SecretsConfig } from '../../src/config.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { literally, movedKeys, secrets, startedOn } from '../helpers/moved-keys.ts';
import { setUp } from '../helpers/set-up.ts';
import { type Receiver, SAFETY_NET_NEVER, startReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A webhook's secret is sealed with the key deployments' tokens are: moved without that key (a
 * restore into a new data directory, a start with another key), the service makes no new key
 * beside it and says which secrets need it, an endpoint whose secret cannot be opened sends
 * nothing and its log says why, and once the key is back it signs again. The apps are the real
 * one, one after the other on one database, each with the key it is given.
 */
let database: DatabaseConfig;
let receiver: Receiver;
let alice: TestUser;
let hook: { id: string; secret: string };
let sealedIn: string;
let elsewhere: string;
/** Runs `check` on an app started with `s`, then closes it (also when `check` fails). */
const startedWith = <T>(s: SecretsConfig, check: (t: TestApp) => Promise<T>) =>
  startedOn(
    database,
    {
      secrets: s,
      outbound: { allowHttp: true, allowPrivate: true },
      webhooks: { sweepMs: SAFETY_NET_NEVER, retryDelaysS: [60] },
      jobs: { pollMs: 500 },
    },
    check,
  );

const log = async (t: TestApp, eventId: string) =>
  ((await t.rest('GET', `/v2/webhooks/${hook.id}/deliveries`, { key: alice.apiKey })).body.deliveries as Record<string, any>[]).find(
    (d) => d.event_id === eventId,
  );

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  ({ database, sealedIn, elsewhere } = await movedKeys(start));
  // Made where the key was made (no deployment: the webhook's is the only sealed secret).
  await startedWith(secrets({ keyFile: sealedIn }), async (t) => {
    alice = await t.createUser('alice');
    const made = await t.rest('POST', '/v2/webhooks', { key: alice.apiKey, body: { url: receiver.url, event_types: ['webhook.test'] } });
    expect(made.status).toBe(201);
    hook = { id: made.body.webhook.id, secret: made.body.secret };
  });
});

it("moved into a data directory without its key: no new key is made, and what needs one says the webhook's secret is sealed with the key it held", async () => {
  await startedWith(secrets({ keyFile: elsewhere }), async (t) => {
    const refused = await t.rest('POST', `/v2/webhooks/${hook.id}/rotate`, { key: alice.apiKey, body: {} });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatch(
      new RegExp(`^${literally(elsewhere)} is missing, and the secrets of 1 webhook endpoint with key id [\\w-]{12} are sealed`),
    );
  });
  await expect(stat(elsewhere)).rejects.toThrow(/ENOENT/);
});

it('started with another key: an endpoint whose secret cannot be opened sends nothing, its log saying why; with its key back it signs again', async () => {
  const eventId = await startedWith(secrets({ key: Buffer.alloc(32, 7) }), async (t) => {
    const sent = await t.rest('POST', `/v2/webhooks/${hook.id}/test`, { key: alice.apiKey });
    expect(sent.status).toBe(200);
    const id = sent.body.delivery.event_id as string;
    await expect.poll(async () => (await log(t, id))?.attempts, { timeout: 20_000 }).toBe(1);
    expect(await log(t, id)).toMatchObject({ status: 'pending', error: 'the signing secret cannot be opened here', status_code: null });
    expect(receiver.received).toEqual([]);
    expect(JSON.stringify(await log(t, id))).not.toContain(hook.secret.slice(6));
    return id;
  });
  await startedWith(secrets({ keyFile: sealedIn }), async (t) => {
    const again = await t.rest('POST', `/v2/webhooks/${hook.id}/deliveries/${(await log(t, eventId))!.id}/redeliver`, {
      key: alice.apiKey,
    });
    expect(again.status).toBe(200);
    await expect.poll(() => receiver.received.filter((r) => r.id === eventId).length, { timeout: 20_000 }).toBe(1);
    expect(receiver.verify(receiver.received[0]!, hook.secret).type).toBe('webhook.test');
  });
});
