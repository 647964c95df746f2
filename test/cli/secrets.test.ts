import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgUser } from '../helpers/fake-telegram.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';

/**
 * `parley secrets rotate` and `parley secrets reseal` with the service stopped: a deployment made
 * before is sealed again under the new key, and the service started with only that key runs it
 * (answers on Telegram). What they print holds no token.
 */
let tg: FakeTelegram;
let llm: FakeOpenAI;
const servers: ServerProcess[] = [];

beforeAll(async () => {
  [tg, llm] = await Promise.all([startFakeTelegram(), startFakeOpenAI({ tokens: ['Still', ' here', '.'] })]);
});

afterAll(async () => {
  for (const s of servers) s.child.kill('SIGKILL');
  await Promise.all(servers.map((s) => s.exited));
  await tg?.close();
  await llm?.close();
});

/** Starts the service on `env`, does `work` with it and an API key, and stops it (SIGTERM). */
async function withServer(
  env: Record<string, string>,
  key: string,
  work: (call: (method: string, path: string, body?: unknown) => Promise<any>) => Promise<void>,
) {
  const server = await startServerProcess({ ...env, TELEGRAM_API_URL: tg.apiUrl, TELEGRAM_POLL_TIMEOUT_S: '1', LLM_BASE_URL: llm.baseUrl });
  servers.push(server);
  await server.waitFor(/parley listening on/);
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { 'x-api-key': key, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  await work(call);
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
  return server.output();
}

/** Makes a user, an agent and its deployment to a new bot; the bot's token and the key. */
async function deployOn(env: Record<string, string>) {
  const created = await runCli(['keys', 'create', 'alice', '--json'], env);
  expect(created.code, created.stderr).toBe(0);
  const key = JSON.parse(created.stdout).apiKey as string;
  const token = tg.addBot();
  const logs = await withServer(env, key, async (call) => {
    const agent = await call('POST', '/graphql', { query: 'mutation { createAgent(input: { name: "Keeper", key: "keeper" }) { rawId } }' });
    const deployed = await call('POST', `/v2/agents/${agent.body.data.createAgent.rawId}/deployments`, {
      platform: 'telegram',
      secrets: { telegram: { token } },
    });
    expect(deployed.status).toBe(200);
  });
  return { key, token, logs };
}

/** Starts the service again, writes to the bot, and waits for the answer: the deployment's secrets opened. */
async function answersOn(env: Record<string, string>, key: string, token: string, person: TgUser) {
  return withServer(env, key, async (call) => {
    const asked = tg.message(token, { id: person.id, type: 'private', first_name: person.first_name }, person, 'Are you there?');
    await tg.until(() => tg.answersTo(person.id, asked)[0]?.text === 'Still here.', 20_000, 'the answer');
    const listed = await call('GET', '/v2/agents/deployments');
    expect(listed.body.deployments.map((d: any) => [d.platform, d.valid])).toEqual([['telegram', true]]);
  });
}

describe('parley secrets rotate (the key in the data directory)', () => {
  let env: Record<string, string>;
  let keyFile: string;
  let deployed: Awaited<ReturnType<typeof deployOn>>;
  let before: string;
  let printed = '';

  it('(a deployment made, and the service stopped)', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'parley-data-'));
    env = { DATA_DIR: dataDir };
    keyFile = join(dataDir, 'secrets.key');
    deployed = await deployOn(env);
    before = await readFile(keyFile, 'utf8');
  });

  it('seals the deployment again under a new key and forgets the old one; run again, it has nothing to do', async () => {
    const rotated = await runCli(['secrets', 'rotate', '--json'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(JSON.parse(rotated.stdout)).toEqual({ resealed: 1, current: 0, unreadable: [] });
    const after = await readFile(keyFile, 'utf8');
    expect(after.trim().split('\n')).toHaveLength(1);
    expect(after).not.toBe(before);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);

    const again = await runCli(['secrets', 'reseal'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("Sealed 0 deployments' secrets again; 1 already were.");
    printed = rotated.stdout + rotated.stderr + again.stdout + again.stderr;
  });

  it('the service started again runs the deployment under the new key, and nothing printed or logged holds the token', async () => {
    const logs = await answersOn(env, deployed.key, deployed.token, { id: 6601, first_name: 'Ann' });
    for (const text of [printed, deployed.logs, logs]) expect(text).not.toContain(deployed.token.split(':')[1]);
  });
});

describe('parley secrets reseal (SECRETS_KEY changed)', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  const [oldKey, newKey] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
  let deployed: Awaited<ReturnType<typeof deployOn>>;

  beforeAll(async () => {
    db = await freshDatabaseEnv();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('(a deployment made under the old key, and the service stopped)', async () => {
    deployed = await deployOn({ ...db.env, SECRETS_KEY: oldKey });
  });

  it('refuses rotate, saying what to do instead', async () => {
    const refused = await runCli(['secrets', 'rotate'], { ...db.env, SECRETS_KEY: oldKey });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('SECRETS_PREVIOUS_KEYS');
  });

  it('names the deployments no key it has opens, changes nothing, and fails', async () => {
    const lost = await runCli(['secrets', 'reseal'], { ...db.env, SECRETS_KEY: randomBytes(32).toString('base64') });
    expect(lost.code).toBe(1);
    expect(lost.stdout).toMatch(/No key here opens the secrets of 1 \(deploy them again with their token\): \S+/);
  });

  it('seals under the new SECRETS_KEY what the previous one sealed', async () => {
    const resealed = await runCli(['secrets', 'reseal', '--json'], { ...db.env, SECRETS_KEY: newKey, SECRETS_PREVIOUS_KEYS: oldKey });
    expect(resealed.code, resealed.stderr).toBe(0);
    expect(JSON.parse(resealed.stdout)).toEqual({ resealed: 1, current: 0, unreadable: [] });
  });

  it('the service started with the new key alone runs the deployment', async () => {
    await answersOn({ ...db.env, SECRETS_KEY: newKey }, deployed.key, deployed.token, { id: 6602, first_name: 'Bob' });
  });
});
