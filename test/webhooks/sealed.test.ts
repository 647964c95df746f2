import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { DatabaseConfig, SecretsConfig } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.ts';
import { freshDatabase, onRealPostgres } from '../helpers/database.ts';
import { setUp } from '../helpers/set-up.ts';
import { type Receiver, startReceiver, SAFETY_NET_NEVER } from '../helpers/webhook-receiver.ts';

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
const secrets = (s: Partial<SecretsConfig>): SecretsConfig => ({ key: undefined, previous: [], keyFile: undefined, shared: false, ...s });

async function sharedDatabase(): Promise<{ config: DatabaseConfig; drop(): Promise<void> }> {
  if (onRealPostgres()) return freshDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), 'parley-hooks-moved-'));
  return { config: { kind: 'pglite', dataDir }, drop: () => rm(dataDir, { recursive: true, force: true }) };
}

/** Runs `check` on an app started with `s`, then closes it (also when `check` fails). */
async function startedWith<T>(s: SecretsConfig, check: (t: TestApp) => Promise<T>): Promise<T> {
  const t = await startTestApp(
    {
      secrets: s,
      outbound: { allowHttp: true, allowPrivate: true },
      webhooks: { sweepMs: SAFETY_NET_NEVER, retryDelaysS: [60] },
      jobs: { pollMs: 500 },
    },
    database,
  );
  try {
    return await check(t);
  } finally {
    await t.close();
  }
}

const log = async (t: TestApp, eventId: string) =>
  ((await t.rest('GET', `/v2/webhooks/${hook.id}/deliveries`, { key: alice.apiKey })).body.deliveries as Record<string, any>[]).find(
    (d) => d.event_id === eventId,
  );

setUp(async (start) => {
  receiver = await start.service(startReceiver());
  const db = await start.service(sharedDatabase(), (d) => d.drop());
  database = db.config;
  const dirs = await start.service(Promise.all([mkdtemp(join(tmpdir(), 'parley-key-')), mkdtemp(join(tmpdir(), 'parley-key-'))]), (made) =>
    Promise.all(made.map((d) => rm(d, { recursive: true, force: true }))),
  );
  sealedIn = join(dirs[0], 'secrets.key');
  elsewhere = join(dirs[1], 'secrets.key');
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
      new RegExp(
        `^${elsewhere.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is missing, and the secrets of 1 webhook endpoint with key id [\\w-]{12} are sealed`,
      ),
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
