import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { freshPostgresDatabase } from '../helpers/postgres-server.ts';
import { runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { type RedisServer, startRedis } from '../helpers/redis.ts';

/**
 * Two parley processes behind one PostgreSQL and one Redis, with one deployment between them:
 * exactly one of them reads the bot's updates (Telegram never sees two polls of the bot at once).
 * The one reading is killed (SIGKILL) while people go on writing; the other takes the lease over
 * once it has run out and answers every message written meanwhile, none twice, none skipped.
 */
describe('a deployment between two instances', () => {
  let tg: FakeTelegram;
  let llm: FakeOpenAI;
  let redis: RedisServer;
  let db: Awaited<ReturnType<typeof freshPostgresDatabase>>;
  let env: Record<string, string>;
  let key: string;
  const servers: ServerProcess[] = [];
  const taking = /reading its updates on this instance/g;

  const start = async () => {
    const server = await startServerProcess(env);
    servers.push(server);
    await server.waitFor(/parley listening on/);
    return server;
  };
  const call = async (server: ServerProcess, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { 'x-api-key': key, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const takes = (server: ServerProcess) => server.output().match(taking)?.length ?? 0;

  beforeAll(async () => {
    [tg, llm, redis, db] = await Promise.all([
      startFakeTelegram(),
      startFakeOpenAI({ tokens: ['OK'] }),
      startRedis(),
      freshPostgresDatabase(),
    ]);
    llm.choose((r) => {
      const said = String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');
      const asked = said.match(/question (\d+)/);
      return asked ? { tokens: ['Answer', ' to', ` ${asked[1]}`, '.'] } : undefined;
    });
    env = {
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      LLM_BASE_URL: llm.baseUrl,
      TELEGRAM_API_URL: tg.apiUrl,
      TELEGRAM_POLL_TIMEOUT_S: '1',
      DEPLOYMENT_LEASE_MS: '1500',
      LOG_LEVEL: 'debug',
    };
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    key = JSON.parse(created.stdout).apiKey;
  });

  afterAll(async () => {
    for (const s of servers) s.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.exited));
    await tg?.close();
    await llm?.close();
    await redis?.stop();
    await db?.drop();
  });

  let a: ServerProcess;
  let b: ServerProcess;
  let holder: ServerProcess;
  let other: ServerProcess;
  let token: string;
  const ann: TgUser = { id: 5511, first_name: 'Ann' };
  const bob: TgUser = { id: 5512, first_name: 'Bob' };
  const chatOf = (person: TgUser): TgChat => ({ id: person.id, type: 'private', first_name: person.first_name });
  /** Each question asked: who asked it in their chat, and the message's id there. */
  const asked: { person: TgUser; id: number }[] = [];
  const ask = (person: TgUser) => asked.push({ person, id: tg.message(token, chatOf(person), person, `question ${asked.length + 1}`) });
  const answered = () =>
    Promise.all(
      asked.map(({ person, id }, i) =>
        tg.until(() => tg.answersTo(person.id, id)[0]?.text === `Answer to ${i + 1}.`, 30_000, `answer ${i + 1}`),
      ),
    );

  it('is read by exactly one of the two: the other never polls the bot', async () => {
    [a, b] = await Promise.all([start(), start()]);
    const agent = await call(a, 'POST', '/graphql', {
      query: 'mutation { createAgent(input: { name: "Harbour master", key: "harbour", public: false }) { rawId } }',
    });
    const agentId = agent.body.data.createAgent.rawId;
    token = tg.addBot('harbour_bot');
    const deployed = await call(b, 'POST', `/v2/agents/${agentId}/deployments`, { platform: 'telegram', secrets: { telegram: { token } } });
    expect(deployed.status).toBe(200);

    ask(ann);
    ask(bob);
    await answered();
    // Several lease rounds have gone by since: the one not holding it has had every chance to take it too.
    expect([takes(a), takes(b)].sort()).toEqual([0, 1]);
    [holder, other] = takes(a) ? [a, b] : [b, a];
    expect(tg.polling(token)).toMatchObject({ max: 1, conflicts: 0 });
  });

  it('its reader killed, the other takes the poll over and answers what was written meanwhile, each once and in order', async () => {
    holder.child.kill('SIGKILL');
    await holder.exited;
    ask(ann);
    ask(bob);
    ask(ann);
    await answered();

    expect(takes(other)).toBe(1);
    for (const person of [ann, bob]) {
      expect(tg.sentIn(person.id).map((m) => [m.replyTo, m.text])).toEqual(
        asked.flatMap(({ person: p, id }, i) => (p === person ? [[id, `Answer to ${i + 1}.`]] : [])),
      );
    }
    // The dead poll went with its connection: never two at once, never a 409.
    expect(tg.polling(token)).toMatchObject({ max: 1, conflicts: 0 });
    // And what was read is confirmed to Telegram by the next poll's offset.
    await tg.until(() => tg.unconfirmed(token) === 0, 10_000, 'every update confirmed');
  });

  it("shows its owner, on the instance left, each chat's session with its person's questions and answers once", async () => {
    const sessions = await call(other, 'GET', '/v2/sessions?limit=10');
    for (const person of [ann, bob]) {
      const session = (sessions.body.sessions ?? sessions.body.docs).find((s: any) => s.title === `${person.first_name} (telegram)`);
      const read = await call(other, 'GET', `/v2/sessions/${session._id ?? session.id}?limit=50`);
      const mine = asked.flatMap(({ person: p }, i) => (p === person ? [i + 1] : []));
      expect(read.body.messages.filter((m: any) => m.role !== 'eden').map((m: any) => [m.role, m.status, m.content.trim()])).toEqual(
        mine.flatMap((n) => [
          ['user', 'complete', `question ${n}`],
          ['assistant', 'complete', `Answer to ${n}.`],
        ]),
      );
    }
  });

  it('never logged the token, on either instance', () => {
    const logs = a.output() + b.output();
    expect(logs).toMatch(taking);
    expect(logs).not.toContain(token.split(':')[1]);
  });
});
