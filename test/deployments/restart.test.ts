import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAI, startFakeOpenAI } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { freshDatabaseEnv, runCli, type ServerProcess, startServerProcess } from '../helpers/process.ts';

/**
 * A deployed agent's service killed (SIGKILL) in the middle of an answer, with more messages
 * written to the bot while it is down, then started again on the same data (the embedded
 * database with its generated key, or PostgreSQL with SECRETS_KEY). Nothing is answered twice
 * (the offset and every update are in the database), nothing is skipped, and the answer cut off
 * is finished in the message already sent. Its logs, at debug, never hold the token.
 */
describe('a deployment across a restart', () => {
  let tg: FakeTelegram;
  let llm: FakeOpenAI;
  let db: Awaited<ReturnType<typeof freshDatabaseEnv>>;
  let env: Record<string, string>;
  let key: string;
  const servers: ServerProcess[] = [];
  const story = 'Once upon a time a lighthouse kept watch over the bay .'.split(' ').map((w, i) => (i ? ` ${w}` : w));
  let storyAsked = 0;
  let release: () => void = () => {};

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

  beforeAll(async () => {
    [tg, llm, db] = await Promise.all([startFakeTelegram(), startFakeOpenAI({ tokens: ['OK'] }), freshDatabaseEnv()]);
    llm.choose((r) => {
      const said = String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');
      if (said.includes('Tell me a story'))
        // The first telling stops after three words and waits there until the test lets it go (by then its process is dead).
        return ++storyAsked === 1
          ? { tokens: story, delayMs: 50, gate: (i) => (i === 3 ? new Promise<void>((resolve) => (release = resolve)) : undefined) }
          : { tokens: story, delayMs: 20 };
      if (said.includes('second')) return { tokens: ['Second', ' answer', '.'] };
      if (said.includes('third')) return { tokens: ['Third', ' answer', '.'] };
      return undefined;
    });
    env = {
      ...db.env,
      ...(db.env.DATABASE_URL ? { SECRETS_KEY: randomBytes(32).toString('base64') } : {}),
      LLM_BASE_URL: llm.baseUrl,
      TELEGRAM_API_URL: tg.apiUrl,
      TELEGRAM_POLL_TIMEOUT_S: '1',
      DEPLOYMENT_LEASE_MS: '1500',
      REPLY_CHECKPOINT_MS: '100',
      LOG_LEVEL: 'debug',
    };
    const created = await runCli(['keys', 'create', 'alice', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    key = JSON.parse(created.stdout).apiKey;
  });

  afterAll(async () => {
    release();
    for (const s of servers) s.child.kill('SIGKILL');
    await tg?.close();
    await llm?.close();
    await db?.drop();
  });

  let a: ServerProcess;
  let b: ServerProcess;
  let token: string;
  let first: number;
  let second: number;
  let third: number;
  const chat: TgChat = { id: 4401, type: 'private', first_name: 'Ann' };
  const ann: TgUser = { id: 4401, first_name: 'Ann' };
  const whole = story.join('');

  it('is killed (SIGKILL) three words into an answer, and two more messages are written while it is down', async () => {
    a = await start();
    const agent = await call(a, 'POST', '/graphql', {
      query: 'mutation { createAgent(input: { name: "Keeper", key: "keeper", public: false }) { rawId } }',
    });
    const agentId = agent.body.data.createAgent.rawId;
    token = tg.addBot('keeper_bot');
    const deployed = await call(a, 'POST', `/v2/agents/${agentId}/deployments`, { platform: 'telegram', secrets: { telegram: { token } } });
    expect(deployed.status).toBe(200);

    first = tg.message(token, chat, ann, 'Tell me a story');
    await tg.until(() => tg.answersTo(chat.id, first)[0]?.text.startsWith('Once upon a'), 20_000, 'the first words of the story');
    a.child.kill('SIGKILL');
    await a.exited;
    second = tg.message(token, chat, ann, 'second');
    third = tg.message(token, chat, ann, 'third');
    release();
  });

  it('started again, answers each message exactly once, in order, finishing the cut answer in the message already sent', async () => {
    b = await start();
    for (const [id, text] of [
      [first, whole],
      [second, 'Second answer.'],
      [third, 'Third answer.'],
    ] as const) {
      await tg.until(() => tg.answersTo(chat.id, id)[0]?.text === text, 20_000, `the answer "${text}"`);
    }
    expect(tg.sentIn(chat.id).map((m) => [m.replyTo, m.text])).toEqual([
      [first, whole],
      [second, 'Second answer.'],
      [third, 'Third answer.'],
    ]);
    // The message the first process sent, three words in, is the one that now holds the whole story.
    const texts = tg.answersTo(chat.id, first)[0]!.texts;
    expect(texts.some((text) => text.startsWith('Once upon a') && text.length < whole.length)).toBe(true);
    expect(texts.at(-1)).toBe(whole);
  });

  it("tells its owner what happened in the chat's session: the cut reply kept as failed, the question answered again", async () => {
    const sessions = await call(b, 'GET', '/v2/sessions?limit=10');
    const session = (sessions.body.sessions ?? sessions.body.docs).find((s: any) => s.title === 'Ann (telegram)');
    const read = await call(b, 'GET', `/v2/sessions/${session._id ?? session.id}?limit=20`);
    expect(
      read.body.messages.filter((m: any) => m.role !== 'eden').map((m: any) => [m.role, m.status, m.content.trim().slice(0, 16)]),
    ).toEqual([
      ['user', 'complete', 'Tell me a story'],
      ['assistant', 'failed', expect.stringMatching(/^Once upon a/)],
      ['user', 'complete', 'Tell me a story'],
      ['assistant', 'complete', 'Once upon a time'],
      ['user', 'complete', 'second'],
      ['assistant', 'complete', 'Second answer.'],
      ['user', 'complete', 'third'],
      ['assistant', 'complete', 'Third answer.'],
    ]);
    expect(read.body.messages.find((m: any) => m.status === 'failed').error).toBe('The server stopped before the reply was finished');
  });

  it('logged, at debug, that the deployment ran in both processes, and never the token', async () => {
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    const logs = a.output() + b.output();
    expect(logs.match(/reading its updates on this instance/g)).toHaveLength(2);
    expect(logs).not.toContain(token);
    expect(logs).not.toContain(token.split(':')[1]);
  });
});
