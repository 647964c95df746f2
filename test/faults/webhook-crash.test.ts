import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { apiClient } from '../helpers/api-client.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A server process killed with SIGKILL while it waits for a receiver's answer, then started
 * again on the same data: the delivery is tried again by the new process, with the same
 * webhook-id, and the receiver verifies it with standardwebhooks.
 */
let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
let env: Record<string, string>;
let server: ServerProcess;
let receiver: Receiver;
let alice: ReturnType<typeof apiClient>;

beforeAll(async () => {
  db = await freshDatabaseEnv();
  receiver = await startReceiver();
  env = {
    ...db.env,
    // Every instance (and the restarted one) seals and opens with the same key.
    SECRETS_KEY: randomBytes(32).toString('base64'),
    OUTBOUND_ALLOW_HTTP: 'true',
    OUTBOUND_ALLOW_PRIVATE: 'true',
    WEBHOOK_TIMEOUT_MS: '3000',
    WEBHOOK_RETRY_DELAYS_S: '1',
    WEBHOOK_SWEEP_MS: '100',
    JOBS_POLL_MS: '500',
  };
  const key = await runCli(['keys', 'create', 'alice', '--json'], env);
  alice = apiClient(() => server.url, JSON.parse(key.stdout).apiKey);
  server = await startServerProcess(env);
  await server.waitFor(/listening on/);
});
afterAll(async () => {
  server?.child.kill('SIGKILL');
  await receiver?.close();
  await db?.drop();
});

it('a try cut by SIGKILL is made again after a restart, with the same webhook-id', async () => {
  const made = await alice.rest('POST', '/v2/webhooks', { url: receiver.url, event_types: ['webhook.test'] });
  expect(made.status).toBe(201);
  const { webhook, secret } = made.body as { webhook: { id: string }; secret: string };
  receiver.answer('hang');
  const sent = await alice.rest('POST', `/v2/webhooks/${webhook.id}/test`);
  const eventId = (sent.body as { delivery: { event_id: string } }).delivery.event_id;
  await expect.poll(() => receiver.received.filter((r) => r.id === eventId).length, { timeout: 20_000 }).toBe(1);
  server.child.kill('SIGKILL');
  await server.exited;

  server = await startServerProcess(env);
  await server.waitFor(/listening on/);
  await expect.poll(() => receiver.received.filter((r) => r.id === eventId).length, { timeout: 60_000 }).toBe(2);
  const [cut, again] = receiver.received.filter((r) => r.id === eventId);
  expect(cut!.cut).toBe(true);
  expect(again!.body).toBe(cut!.body);
  expect(receiver.verify(again!, secret)).toMatchObject({ type: 'webhook.test', data: { webhook_id: webhook.id } });
  await expect
    .poll(
      async () =>
        ((await alice.rest('GET', `/v2/webhooks/${webhook.id}/deliveries`)).body as { deliveries: { status: string }[] }).deliveries[0]
          ?.status,
    )
    .toBe('delivered');
});
