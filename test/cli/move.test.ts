import { access, copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyIdOf } from '../../src/secrets/keyring.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Data moved as an operator moves it, every step a process: a service on the embedded database
 * makes an image (a task) and runs a deployment on (the fake) Telegram; it is backed up while it
 * runs, stopped, restored into a new data directory and served from another port; that directory
 * is copied to PostgreSQL and served from a third. Each command says what the data needs beside
 * it (the secrets key, the media files), and each service shows links to itself that answer with
 * the image's bytes, and its deployment as it is: not running without the key, and why. A webhook
 * made on the first moves too: its signing secret is in no backup in clear, without the key it
 * sends nothing (its log says why, rather than a try signed with something else), and with the
 * key, restored or on PostgreSQL, it signs with the secret its owner was shown, as a receiver
 * using the specification's library checks.
 */
describe('moving data: backup, restore and db copy, then serving from elsewhere', () => {
  let root: string;
  let tg: FakeTelegram;
  let first: ServerProcess;
  /** The restored service and the one on PostgreSQL, each kept for the step after the one that starts it. */
  let second: ServerProcess;
  let third: ServerProcess;
  let alice: string;
  let made: { creationId: string; taskId: string; file: string; bytes: Buffer };
  let token: string;
  let keyId: string;
  let receiver: Receiver;
  let hook: { id: string; secret: string };
  const backupFile = () => join(root, 'moved.backup');
  const dirs = () => ({ first: join(root, 'first'), restored: join(root, 'restored') });
  /** The fake Telegram, and a webhook receiver on loopback over http, which the operator allows. */
  const telegram = () => ({
    TELEGRAM_API_URL: tg.apiUrl,
    TELEGRAM_POLL_TIMEOUT_S: '1',
    OUTBOUND_ALLOW_HTTP: 'true',
    OUTBOUND_ALLOW_PRIVATE: 'true',
  });
  /** The PostgreSQL database `db copy` moves to; on the embedded lane, its cluster starts with the first service. */
  let target: { url: string; drop(): Promise<void> };

  const stop = async (server: ServerProcess) => {
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  };
  const api = async (url: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { 'x-api-key': alice, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const cli = async (args: string[], env: Record<string, string>) => {
    const result = await runCli(args, env);
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };

  /** Every link to the image a service shows (REST and GraphQL), each fetched from where it points. */
  async function expectLinksTo(url: string) {
    const creation = (await api(url, 'GET', `/v2/creations/${made.creationId}`)).body.creation;
    const task = (await api(url, 'GET', `/v2/tasks/${made.taskId}`)).body.task;
    const gql = await api(url, 'POST', '/graphql', {
      query: 'query($id: ID!, $task: ID!) { creation(id: $id) { url thumbnail } task(id: $task) { result } }',
      variables: { id: made.creationId, task: made.taskId },
    });
    const links = [
      creation.url,
      creation.thumbnail,
      task.result[0].output[0].url,
      task.result[0].data.images[0].url,
      gql.body.data.creation.url,
      gql.body.data.creation.thumbnail,
      gql.body.data.task.result.images[0].url,
    ];
    for (const link of links) {
      expect(link).toMatch(new RegExp(`^${url}/media/[\\w-]+\\.png$`));
      const res = await fetch(link);
      expect(res.status, link).toBe(200);
    }
    expect(Buffer.from(await (await fetch(creation.url)).arrayBuffer())).toEqual(made.bytes);
  }

  /** The webhook's delivery of `eventId` as its log shows it, once it has had a try. */
  const triedOnce = async (url: string, eventId: string) => {
    for (;;) {
      const log = (await api(url, 'GET', `/v2/webhooks/${hook.id}/deliveries`)).body.deliveries as Record<string, any>[];
      const delivery = log.find((d) => d.event_id === eventId);
      if (delivery?.attempts) return delivery;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  /** A test event sent from the service at `url`; its id. */
  const testEvent = async (url: string) => {
    const sent = await api(url, 'POST', `/v2/webhooks/${hook.id}/test`);
    expect(sent.status).toBe(200);
    return sent.body.delivery.event_id as string;
  };
  /** The event reaches the receiver signed with the secret its owner was shown at creation. */
  const expectSignedArrival = async (eventId: string) => {
    while (!receiver.received.some((r) => r.id === eventId)) await new Promise((r) => setTimeout(r, 100));
    const arrived = receiver.received.filter((r) => r.id === eventId);
    expect(arrived).toHaveLength(1);
    expect(receiver.verify(arrived[0]!, hook.secret)).toMatchObject({ type: 'webhook.test' });
  };
  /** Without the key: the try sends nothing, and the log says why. */
  const expectUnsigned = async (url: string) => {
    const eventId = await testEvent(url);
    expect(await triedOnce(url, eventId)).toMatchObject({
      status: 'pending',
      status_code: null,
      error: 'the signing secret cannot be opened here',
    });
    expect(receiver.received.filter((r) => r.id === eventId)).toEqual([]);
  };

  /** The deployment as operation 15 shows it. */
  const deployment = async (url: string) => {
    const [d] = (await api(url, 'GET', '/v2/agents/deployments')).body.deployments;
    return { state: d.state, valid: d.valid, last_error: d.last_error };
  };

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'parley-move-'));
    tg = await startFakeTelegram();
    receiver = await startReceiver();
    [target, first] = await Promise.all([freshPostgresDatabase(), startServerProcess({ DATA_DIR: dirs().first, ...telegram() })]);
    await first.waitFor(/parley listening on/);
  });
  afterAll(async () => {
    for (const server of [first, second, third]) server?.child.kill('SIGKILL');
    await tg?.close();
    await receiver?.stop();
    await target?.drop();
    await rm(root, { recursive: true, force: true });
  });

  it('the first service makes an image, runs a deployment and signs a webhook', async () => {
    alice = JSON.parse(await cli(['keys', 'create', 'alice', '--json'], { DATA_DIR: dirs().first })).apiKey;
    await cli(['manna', 'grant', 'alice', '20'], { DATA_DIR: dirs().first });
    const agent = await api(first.url, 'POST', '/v2/agents', { name: 'Muse', key: 'muse' });
    expect(agent.status).toBe(201);
    token = tg.addBot();
    const deployed = await api(first.url, 'POST', `/v2/agents/${agent.body.agentId}/deployments`, {
      platform: 'telegram',
      secrets: { telegram: { token } },
    });
    expect(deployed.status).toBe(200);
    const task = await api(first.url, 'POST', '/v2/tasks/create', { tool: 'flux_dev', args: { prompt: 'a heron at a lock' } });
    expect(task.status).toBe(200);
    const taskId = task.body.task._id as string;
    let done: any;
    while ((done = (await api(first.url, 'GET', `/v2/tasks/${taskId}`)).body.task).status !== 'completed') {
      expect(['pending', 'running']).toContain(done.status);
      await new Promise((r) => setTimeout(r, 50));
    }
    const creationId = done.result[0].output[0].creationId as string;
    const file = new URL(done.result[0].output[0].url).pathname.split('/').pop()!;
    made = { creationId, taskId, file, bytes: await readFile(join(dirs().first, 'media', file)) };
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
    expect(await deployment(first.url)).toEqual({ state: 'running', valid: true, last_error: null });
    await expectLinksTo(first.url);
    const webhook = await api(first.url, 'POST', '/v2/webhooks', { url: receiver.url, event_types: ['webhook.test'] });
    expect(webhook.status).toBe(201);
    hook = { id: webhook.body.webhook.id, secret: webhook.body.secret };
    await expectSignedArrival(await testEvent(first.url));
  });

  it('backup names the key it leaves out, and holds the sealed secrets, never one in clear', async () => {
    const out = await cli(['backup', backupFile()], { DATA_DIR: dirs().first });
    keyId = keyIdOf(Buffer.from((await readFile(join(dirs().first, 'secrets.key'), 'utf8')).split('\n')[0]!, 'base64'));
    expect(out).toMatch(
      new RegExp(
        `Not in it: the key the secrets of 1 deployment and 1 webhook endpoint are sealed with \\(key id ${keyId}, in .*first/secrets\\.key\\)`,
      ),
    );
    await stop(first);
    const file = await readFile(backupFile());
    const lines = gunzipSync(file);
    // The rows are there (the endpoint, the deployment), their secrets only sealed.
    expect(lines.includes(hook.id)).toBe(true);
    const encoded = hook.secret.slice('whsec_'.length);
    for (const bytes of [file, lines]) {
      expect(bytes.includes(hook.secret)).toBe(false);
      expect(bytes.includes(encoded)).toBe(false);
      expect(bytes.includes(Buffer.from(encoded, 'base64'))).toBe(false);
      expect(bytes.includes(token)).toBe(false);
    }
  });

  it('restore into a new data directory says the key is missing; served from another port, links are its own and the deployment says why it does not run', async () => {
    const restored = await cli(['restore', backupFile()], { DATA_DIR: dirs().restored });
    expect(restored).toMatch(
      new RegExp(
        `The secrets of 1 deployment and 1 webhook endpoint are sealed with key id ${keyId}, and there is no .*restored/secrets\\.key with that key: before starting, copy the secrets\\.key`,
      ),
    );
    second = await startServerProcess({ DATA_DIR: dirs().restored, ...telegram() });
    await second.waitFor(/parley listening on/);
    expect(second.url).not.toBe(first.url);
    await expectLinksTo(second.url);
    expect(await deployment(second.url)).toEqual({
      state: 'stopped',
      valid: true,
      last_error: expect.stringMatching(
        /^Not running: .*restored\/secrets\.key is missing, and the secrets of 1 deployment and 1 webhook endpoint with key id/,
      ),
    });
    expect(second.output()).toMatch(/deployments do not run on this instance: .*restored\/secrets\.key is missing/);
  });

  it('restored without its key, the webhook sends nothing rather than a try signed otherwise, and its log says why', async () => {
    await expectUnsigned(second.url);
    await stop(second);
    // No key was made beside secrets sealed with another.
    await expect(access(join(dirs().restored, 'secrets.key'))).rejects.toThrow(/ENOENT/);
  });

  it('db copy names SECRETS_KEY and MEDIA_DIR; on PostgreSQL, links are its own and the deployment says which key to set', async () => {
    const copied = await runCli(['db', 'copy', '--to', target.url, '--without-pgvector'], { DATA_DIR: dirs().restored });
    expect(copied.code, copied.stderr).toBe(0);
    expect(copied.stdout).toMatch(
      new RegExp(
        `The secrets of 1 deployment and 1 webhook endpoint are sealed with key id ${keyId}, which .*restored/secrets\\.key does not hold: start PostgreSQL's instances with SECRETS_KEY`,
      ),
    );
    const mediaDir = join(dirs().restored, 'media');
    expect(copied.stdout).toContain(
      `${(await readdir(mediaDir)).length} media files stay in ${mediaDir}: give the service on PostgreSQL that MEDIA_DIR`,
    );
    const redis: Record<string, string> = process.env.TEST_REDIS_URL
      ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `move-${process.pid}:` }
      : {};
    third = await startServerProcess({ DATABASE_URL: target.url, MEDIA_DIR: mediaDir, ...redis, ...telegram() });
    await third.waitFor(/parley listening on/);
    await expectLinksTo(third.url);
    expect(await deployment(third.url)).toEqual({
      state: 'stopped',
      valid: true,
      last_error: expect.stringMatching(
        new RegExp(
          `^Not running: SECRETS_KEY is not set, and the secrets of 1 deployment and 1 webhook endpoint with key id ${keyId} are sealed with a key`,
        ),
      ),
    });
  });

  it('copied to PostgreSQL without SECRETS_KEY, the webhook sends nothing, and its log says why', async () => {
    await expectUnsigned(third.url);
    await stop(third);
  });

  it('given the key, the restored directory and PostgreSQL sign with the secret the webhook was made with', async () => {
    await copyFile(join(dirs().first, 'secrets.key'), join(dirs().restored, 'secrets.key'));
    const restored = await startServerProcess({ DATA_DIR: dirs().restored, ...telegram() });
    try {
      await restored.waitFor(/parley listening on/);
      await expectSignedArrival(await testEvent(restored.url));
    } finally {
      await stop(restored);
    }
    const key = (await readFile(join(dirs().first, 'secrets.key'), 'utf8')).split('\n')[0]!;
    const redis: Record<string, string> = process.env.TEST_REDIS_URL
      ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `move-keyed-${process.pid}:` }
      : {};
    const copied = await startServerProcess({ DATABASE_URL: target.url, SECRETS_KEY: key, ...redis, ...telegram() });
    try {
      await copied.waitFor(/parley listening on/);
      await expectSignedArrival(await testEvent(copied.url));
    } finally {
      await stop(copied);
    }
  });
});
