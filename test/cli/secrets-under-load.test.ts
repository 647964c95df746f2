import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { sealerOver } from '../../src/secrets/keyring.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat } from '../helpers/fake-telegram.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startCliProcess, startServerProcess } from '../helpers/process.ts';
import { until } from '../helpers/until.ts';

/**
 * The sealing key changed while it matters: `parley secrets rotate` (the key in the data
 * directory) or `parley secrets reseal` (SECRETS_KEY) run while the service answers strangers
 * on several bots and new deployments are being made, and a reseal killed (SIGKILL) partway
 * through thousands of deployments. Afterwards every deployment opens under a key the operator
 * has, the command run again finishes the job, and the service started on the new key alone
 * runs every one of them. On the embedded database (rotate) and on PostgreSQL (reseal).
 */
let tg: FakeTelegram;
let llm: FakeOpenAI;
const servers: ServerProcess[] = [];

beforeAll(async () => {
  [tg, llm] = await Promise.all([startFakeTelegram(), startFakeOpenAI({ tokens: ['OK'] })]);
  llm.choose((r) => {
    const asked = String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '').match(/question (\d+)/);
    return asked ? { tokens: ['Answer', ' to', ` ${asked[1]}`, '.'], delayMs: 40 } : undefined;
  });
});

afterAll(async () => {
  for (const s of servers) s.child.kill('SIGKILL');
  await Promise.all(servers.map((s) => s.exited));
  await tg?.close();
  await llm?.close();
});

const key64 = () => randomBytes(32).toString('base64');
// A lease long enough that a loaded machine never lets one lapse (a runner started again would be one more reading).
const common = () => ({
  TELEGRAM_API_URL: tg.apiUrl,
  TELEGRAM_POLL_TIMEOUT_S: '1',
  DEPLOYMENT_LEASE_MS: '6000',
  LLM_BASE_URL: llm.baseUrl,
});
/** How many times the service started reading a deployment's updates (a runner started). */
const readings = (server: ServerProcess) => server.output().match(/reading its updates on this instance/g)?.length ?? 0;

async function start(env: Record<string, string>) {
  const server = await startServerProcess({ ...common(), ...env });
  servers.push(server);
  await server.waitFor(/parley listening on/);
  return server;
}

async function stop(server: ServerProcess) {
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
}

const call = async (server: ServerProcess, key: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json()) as any };
};

/** A new API key of alice's (made with her on first use). */
async function userKey(env: Record<string, string>) {
  const created = await runCli(['keys', 'create', 'alice', '--json'], env);
  expect(created.code, created.stderr).toBe(0);
  return JSON.parse(created.stdout).apiKey as string;
}

/** A new agent of the key's user, deployed to a new bot: the bot's token. */
async function deployBot(server: ServerProcess, key: string, name: string) {
  const agent = await call(server, key, 'POST', '/graphql', {
    query: `mutation { createAgent(input: { name: "${name}", key: "${name.toLowerCase()}" }) { rawId } }`,
  });
  const token = tg.addBot(`${name.toLowerCase()}_bot`);
  const deployed = await call(server, key, 'POST', `/v2/agents/${agent.body.data.createAgent.rawId}/deployments`, {
    platform: 'telegram',
    secrets: { telegram: { token } },
  });
  expect(deployed.status).toBe(200);
  return token;
}

/** Questions asked of the bots, each by someone new in a chat of their own (Telegram paces answers per chat). */
function asking() {
  const asked: { token: string; chat: TgChat; id: number; n: number }[] = [];
  let n = 0;
  const ask = (token: string) => {
    n++;
    const chat: TgChat = { id: 70_000 + n, type: 'private', first_name: 'Ann' };
    asked.push({ token, chat, id: tg.message(token, chat, { id: chat.id, first_name: 'Ann' }, `question ${n}`), n });
  };
  /** Every question answered once, with its own answer, in the message that replies to it. */
  const answered = async () => {
    for (const q of asked)
      await tg.until(() => tg.answersTo(q.chat.id, q.id)[0]?.text === `Answer to ${q.n}.`, 20_000, `the answer to question ${q.n}`);
    for (const q of asked) expect(tg.answersTo(q.chat.id, q.id).map((m) => m.text)).toEqual([`Answer to ${q.n}.`]);
  };
  return { ask, answered, asked };
}

describe('the key changed while the service answers on several bots', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let onPostgres: boolean;
  const [oldKey, newKey] = [key64(), key64()];
  let env: Record<string, string>;
  let apiKey: string;
  let server: ServerProcess;
  const bots: string[] = [];
  const questions = asking();

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    onPostgres = Boolean(db.env.DATABASE_URL);
    env = { ...db.env, ...(onPostgres ? { SECRETS_KEY: oldKey } : {}) };
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("(alice's API key made)", async () => {
    apiKey = await userKey(env);
  });

  it('(three bots deployed)', async () => {
    server = await start(env);
    for (const name of ['Harbour', 'Lighthouse', 'Ferry']) bots.push(await deployBot(server, apiKey, name));
  });

  it('(each answering; on PostgreSQL, once the service is started again with the new key and the old one as previous)', async () => {
    if (onPostgres) {
      await stop(server);
      env = { ...env, SECRETS_KEY: newKey, SECRETS_PREVIOUS_KEYS: oldKey };
      server = await start(env);
    }
    for (const token of bots) questions.ask(token);
    await questions.answered();
  });

  it('seals every deployment again while strangers write and new deployments are made, answering each message once', async () => {
    const started = readings(server);
    const writing = setInterval(() => questions.ask(bots[questions.asked.length % bots.length]!), 250);
    try {
      const command = runCli(['secrets', onPostgres ? 'reseal' : 'rotate', '--json'], env);
      const made = await Promise.all(['Pier', 'Quay'].map((name) => deployBot(server, apiKey, name)));
      const done = await command;
      expect(done.code, done.stderr).toBe(0);
      expect(JSON.parse(done.stdout)).toMatchObject({ unreadable: [] });
      bots.push(...made);
      // The two made during the change answer too, so their runners are reading by the check below.
      for (const token of made) questions.ask(token);
    } finally {
      clearInterval(writing);
    }
    await questions.answered();
    const listed = await call(server, apiKey, 'GET', '/v2/agents/deployments');
    expect(listed.body.deployments.map((d: any) => [d.state, d.last_error])).toEqual(Array(5).fill(['running', null]));
    // Sealed anew, the same tokens: each runner went on reading (only the two new deployments started one), and
    // no bot was polled twice at once. A runner's line comes over the process's output, which may trail its answer.
    await until('the two new runners to say they read', () => readings(server) - started >= 2);
    expect(readings(server) - started).toBe(2);
    for (const token of bots) expect(tg.polling(token).conflicts).toBe(0);
  });

  it('(stopped, and started again with only the new key)', async () => {
    await stop(server);
    if (onPostgres) env = { ...db.env, SECRETS_KEY: newKey };
    else expect((await readFile(join(env.DATA_DIR!, 'secrets.key'), 'utf8')).trim().split('\n')).toHaveLength(1);
    server = await start(env);
  });

  it('every deployment answers on the new key alone, those made during the change too', async () => {
    const from = questions.asked.length;
    for (const token of bots) questions.ask(token);
    await questions.answered();
    expect(questions.asked.slice(from).map((q) => q.token)).toEqual(bots);
    await stop(server);
  });
});

describe('a reseal killed partway', () => {
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let onPostgres: boolean;
  let database: DatabaseConfig;
  const [oldKey, newKey] = [key64(), key64()];
  let env: Record<string, string>;
  let apiKey: string;
  let token: string;
  const BULK = 1000;

  /** The database opened by the test itself (the service and the command stopped), for `work`. */
  async function withDatabase<T>(work: (open: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>) {
    const open = await openDatabase(database);
    try {
      return await work(open);
    } finally {
      await open.close();
    }
  }

  /** Every deployment's sealed secrets, opened with `keys`: the ids none of them opens, and how many each key sealed. */
  async function opened(open: Awaited<ReturnType<typeof openDatabase>>, keys: string[]) {
    const sealer = sealerOver({ list: keys.map((k) => Buffer.from(k, 'base64')) });
    const byKey = keys.map((k) => sealerOver({ list: [Buffer.from(k, 'base64')] }));
    const rows = await open.prisma.deployment.findMany({ select: { id: true, secrets: true } });
    const unopened: string[] = [];
    const counts = keys.map(() => 0);
    for (const { id, secrets } of rows) {
      const sealed = (secrets as { sealed: string }).sealed;
      try {
        sealer.open(sealed, id);
        counts[byKey.findIndex((s) => s.isCurrent(sealed))]!++;
      } catch {
        unopened.push(id);
      }
    }
    return { rows: rows.length, unopened, counts };
  }

  beforeAll(async () => {
    db = await freshDatabaseEnv();
    onPostgres = Boolean(db.env.DATABASE_URL);
    database = onPostgres ? { kind: 'postgres', url: db.env.DATABASE_URL! } : { kind: 'pglite', dataDir: db.env.DATA_DIR! };
    env = { ...db.env, ...(onPostgres ? { SECRETS_KEY: oldKey } : {}) };
    // The data directory's key, written before the service makes one: the test knows it.
    if (!onPostgres) await writeFile(join(env.DATA_DIR!, 'secrets.key'), `${oldKey}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("(alice's API key made)", async () => {
    apiKey = await userKey(env);
  });

  it('(one bot deployed, and the service stopped)', async () => {
    const server = await start(env);
    token = await deployBot(server, apiKey, 'Keeper');
    await stop(server);
  });

  it(`(${BULK} more deployments sealed under the same key)`, async () => {
    const sealer = sealerOver({ list: [Buffer.from(oldKey, 'base64')] });
    await withDatabase(async (open) => {
      const { id: owner } = await open.prisma.user.findUniqueOrThrow({ where: { username: 'alice' } });
      const ids = Array.from({ length: BULK }, (_, i) => `bulk-${String(i).padStart(5, '0')}`);
      await open.prisma.user.createMany({ data: ids.map((id) => ({ id, username: `bulk agent ${id}`, type: 'agent' as const })) });
      await open.prisma.agent.createMany({ data: ids.map((id) => ({ id, ownerId: owner, name: id })) });
      await open.prisma.deployment.createMany({
        data: ids.map((agentId, i) => {
          const id = `dep-${agentId}`;
          const sealed = sealer.seal(JSON.stringify({ token: `${9_000_000 + i}:${randomBytes(27).toString('base64url')}` }), id);
          return { id, agentId, userId: owner, platform: 'telegram' as const, secrets: { sealed }, running: false };
        }),
      });
      expect(await opened(open, [oldKey])).toEqual({ rows: BULK + 1, unopened: [], counts: [BULK + 1] });
    });
  });

  let keys: string[];

  it('is killed (SIGKILL) once its progress shows', async () => {
    const partway = onPostgres ? { ...db.env, SECRETS_KEY: newKey, SECRETS_PREVIOUS_KEYS: oldKey } : env;
    const command = startCliProcess(['secrets', onPostgres ? 'reseal' : 'rotate'], { ...partway, ...common() });
    await command.waitFor(/ \d+\/\d+ deployments/, { timeoutMs: 20_000 });
    command.child.kill('SIGKILL');
    await command.exited;
    keys = onPostgres
      ? [newKey, oldKey]
      : (await readFile(join(env.DATA_DIR!, 'secrets.key'), 'utf8'))
          .trim()
          .split('\n')
          .map((k) => k.trim());
    expect(keys).toHaveLength(2);
  });

  it('leaves every deployment opening under a key the operator still has', async () => {
    const state = await withDatabase((open) => opened(open, keys));
    expect(state.unopened).toEqual([]);
    // Partway indeed: some sealed again under the new key, some still under the old.
    expect(state.counts[0]).toBeGreaterThan(0);
    expect(state.counts[1]).toBeGreaterThan(0);
  });

  let current: string;

  it('run again, finishes the job, one key left', async () => {
    const again = onPostgres ? { ...db.env, SECRETS_KEY: newKey, SECRETS_PREVIOUS_KEYS: oldKey } : env;
    const done = await runCli(['secrets', onPostgres ? 'reseal' : 'rotate', '--json'], { ...again, ...common() });
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ unreadable: [] });
    current = onPostgres ? newKey : (await readFile(join(env.DATA_DIR!, 'secrets.key'), 'utf8')).trim();
    expect(current.split('\n')).toHaveLength(1);
  });

  it('leaves every deployment under the one key left', async () => {
    expect(await withDatabase((open) => opened(open, [current]))).toEqual({ rows: BULK + 1, unopened: [], counts: [BULK + 1] });
  });

  it('the service started on that key alone runs the bot', async () => {
    const server = await start(onPostgres ? { ...db.env, SECRETS_KEY: newKey } : env);
    const chat: TgChat = { id: 9901, type: 'private', first_name: 'Ann' };
    const asked = tg.message(token, chat, { id: 9901, first_name: 'Ann' }, 'question 1');
    await tg.until(() => tg.answersTo(chat.id, asked)[0]?.text === 'Answer to 1.', 20_000, 'the answer');
    await stop(server);
  });
});
