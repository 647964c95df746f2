import { describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI, RecordedRequest } from '../helpers/fake-openai.ts';
import { type FakeTelegram, startFakeTelegram, type TgChat, type TgUser } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * A deployed agent meeting the worst its platform and its owner's clients send: text and chat
 * titles the database cannot hold as they are, an update the database refuses outright, one bot
 * token deployed to two agents, a burst of identical deploys (a double click, a client's retry),
 * and strangers in several chats spending at once against a daily manna cap.
 */
let t: TestApp;
let tg: FakeTelegram;
let llm: FakeOpenAI;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;

/** What the model does, by the last thing a person said. */
const said = (r: RecordedRequest) => String(r.body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '');

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  llm = await start.fakeOpenAI({ tokens: ['OK', '.'] });
  llm.choose((r) => {
    const text = said(r);
    if (text.includes('paint')) {
      if (r.body.messages.some((m) => m.role === 'tool')) return { tokens: ['Painted', '.'] };
      const calls = [1, 2, 3].map((n) => ({ id: `call_${n}`, name: 'flux_dev', arguments: `{"prompt":"a lighthouse, take ${n}"}` }));
      return { toolCalls: calls };
    }
    return { tokens: ['Heard', ': ', text.replace(/[^\w ]/g, '')] };
  });
  t = await start.app({
    llm: { baseUrl: llm.baseUrl },
    deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
  });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

const deploy = (user: TestUser, agentId: string, body: Record<string, unknown>) =>
  t.rest('POST', `/v2/agents/${agentId}/deployments`, { key: user.apiKey, body: { platform: 'telegram', ...body } });

const listOf = async (user: TestUser, agentId: string) =>
  (await t.rest('GET', `/v2/agents/${agentId}/deployments`, { key: user.apiKey })).body.deployments as any[];

/** An agent of alice's deployed to a new bot, polled. */
async function deployed(config: Record<string, unknown> = {}, agentFields: Record<string, unknown> = {}) {
  const agent = await f.agent(alice, { public: false, ...agentFields });
  const token = tg.addBot();
  const res = await deploy(alice, agent.id, { secrets: { telegram: { token } }, config });
  expect(res.status).toBe(200);
  await tg.until(() => tg.polling(token).now === 1, 20_000, 'the deployment to poll');
  return { agent, token, deploymentId: res.body.deploymentId as string };
}

const ann: TgUser = { id: 701, first_name: 'Ann' };

describe('what strangers send', () => {
  it('answers a message holding U+0000, and one from a group whose title holds it, and goes on with the next', async () => {
    const { agent, token, deploymentId } = await deployed();
    const errors = new Set<string | null>();
    const watch = setInterval(async () => {
      for (const d of await listOf(alice, agent.id).catch(() => [])) errors.add(d.last_error);
    }, 200);
    try {
      const own: TgChat = { id: 7101, type: 'private', first_name: 'Ann' };
      const group: TgChat = { id: -1007102, type: 'supergroup', title: 'Night\u0000club' };
      const nul = tg.message(token, own, ann, 'hi \u0000 there');
      const titled = tg.message(token, group, ann, 'hello club');
      const after = tg.message(token, own, ann, 'and after');
      for (const [chat, id, text] of [
        [own, nul, 'Heard: hi  there'],
        [group, titled, 'Heard: hello club'],
        [own, after, 'Heard: and after'],
      ] as const)
        await tg.until(() => tg.answersTo(chat.id, id)[0]?.text === text, 20_000, `the answer "${text}"`);
      const chats = await t.db.deploymentChat.findMany({ where: { deploymentId }, include: { session: true }, orderBy: { title: 'asc' } });
      expect(chats.map((c) => [c.title, c.session?.title])).toEqual([
        ['Ann', 'Ann (telegram)'],
        ['Nightclub', 'Nightclub (telegram)'],
      ]);
      await expect
        .poll(async () => {
          const updates = await t.db.deploymentUpdate.findMany({ where: { deploymentId }, orderBy: { seq: 'asc' } });
          return updates.map((u) => [u.text, u.status]);
        })
        .toEqual([
          ['hi  there', 'answered'],
          ['hello club', 'answered'],
          ['and after', 'answered'],
        ]);
    } finally {
      clearInterval(watch);
    }
    expect([...errors]).toEqual([null]);
    expect((await listOf(alice, agent.id))[0]).toMatchObject({ state: 'running', last_error: null });
  });

  it('settles, unanswered and with why, a message no prompt can hold, and answers the next in that chat', async () => {
    const { token, deploymentId } = await deployed();
    const chat: TgChat = { id: 7151, type: 'private', first_name: 'Ann' };
    // More than Telegram sends, and more than a prompt may hold: however often it is tried, it is refused.
    const huge = tg.message(token, chat, ann, 'x'.repeat(100_001));
    const next = tg.message(token, chat, ann, 'a short one');
    await tg.until(() => tg.answersTo(chat.id, next)[0]?.text === 'Heard: a short one', 20_000, 'the answer to the next message');
    expect(tg.answersTo(chat.id, huge)).toEqual([]);
    const [first] = await t.db.deploymentUpdate.findMany({ where: { deploymentId }, orderBy: { seq: 'asc' }, take: 1 });
    expect([first!.status, first!.note]).toEqual(['failed', 'It could not be relayed: content: must be at most 100000 characters']);
  });

  it('skips an update the database refuses, with the reason recorded, and answers the ones after it; the owner never sees a driver’s words', async () => {
    const { agent, token, deploymentId } = await deployed();
    // Anything the database may refuse in a platform's update, which parley has not thought of.
    await t.db.$executeRawUnsafe(`
      CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW."text" LIKE '%poison%' THEN RAISE EXCEPTION 'poison refused by a constraint'; END IF;
        RETURN NEW;
      END $$`);
    await t.db.$executeRawUnsafe(
      `CREATE TRIGGER refuse_poison BEFORE INSERT ON "DeploymentUpdate" FOR EACH ROW EXECUTE FUNCTION refuse_poison()`,
    );
    const errors = new Set<string | null>();
    const watch = setInterval(async () => {
      for (const d of await listOf(alice, agent.id).catch(() => [])) errors.add(d.last_error);
    }, 100);
    try {
      const chat: TgChat = { id: 7201, type: 'private', first_name: 'Ann' };
      const before = tg.message(token, chat, ann, 'good one');
      const poison = tg.message(token, chat, ann, 'some poison');
      const after = tg.message(token, chat, ann, 'good two');
      await tg.until(() => tg.answersTo(chat.id, before)[0]?.text === 'Heard: good one', 20_000, 'the answer before');
      await tg.until(() => tg.answersTo(chat.id, after)[0]?.text === 'Heard: good two', 20_000, 'the answer after');
      expect(tg.answersTo(chat.id, poison)).toEqual([]);
      await expect
        .poll(async () => {
          const updates = await t.db.deploymentUpdate.findMany({ where: { deploymentId }, orderBy: { seq: 'asc' } });
          return updates.map((u) => [u.text, u.status, u.note]);
        })
        .toEqual([
          ['good one', 'answered', null],
          ['', 'skipped', 'The database refused to record it'],
          ['good two', 'answered', null],
        ]);
      await tg.until(() => tg.unconfirmed(token) === 0, 10_000, 'every update confirmed to Telegram');
    } finally {
      clearInterval(watch);
      await t.db.$executeRawUnsafe(`DROP TRIGGER refuse_poison ON "DeploymentUpdate"`);
    }
    for (const error of errors) expect(error ?? '').not.toMatch(/prisma|poison|invocation|constraint|raise/i);
    expect((await listOf(alice, agent.id))[0]).toMatchObject({ state: 'running', last_error: null });
  });
});

describe('one bot, one deployment', () => {
  it('refuses a bot token already deployed to another agent with 409 naming where it runs, and the first keeps polling alone', async () => {
    const { agent: first, token } = await deployed();
    const second = await f.agent(alice, { public: false, name: 'Second agent' });
    const res = await deploy(alice, second.id, { secrets: { telegram: { token } } });
    expect(res.status).toBe(409);
    expect(res.body.error).toBe(
      `@${tg.botName(token)} on telegram is already deployed to your agent "${first.name}" (${first.id}): delete that deployment first, or deploy it there`,
    );
    expect(await listOf(alice, second.id)).toEqual([]);

    // Nor through a change of another deployment's token, nor by another user (who is not told whose agent it is).
    const other = await deployed();
    const patched = await t.rest('PATCH', `/v2/agents/${other.agent.id}/deployments`, {
      key: alice.apiKey,
      body: { platform: 'telegram', secrets: { telegram: { token } } },
    });
    expect(patched.status).toBe(409);
    const bobs = await f.agent(bob, { public: false });
    const byBob = await deploy(bob, bobs.id, { secrets: { telegram: { token } } });
    expect(byBob).toMatchObject({
      status: 409,
      body: { error: `@${tg.botName(token)} on telegram is already deployed to another user's agent: it can run in one place only` },
    });
    // Deploying it again where it runs is still fine.
    expect((await deploy(alice, first.id, { secrets: { telegram: { token } } })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(tg.polling(token)).toMatchObject({ now: 1, max: 1, conflicts: 0 });

    // A new token made for the bot in BotFather is still the same bot: its id is what is held.
    const renewed = tg.renewToken(token);
    expect(await deploy(alice, second.id, { secrets: { telegram: { token: renewed } } })).toMatchObject({ status: 409, body: res.body });
  });

  it('one deployment per agent and platform however many deploys arrive at once; it runs, and opens its secrets', async () => {
    const agent = await f.agent(alice, { public: false });
    const token = tg.addBot();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => deploy(alice, agent.id, { secrets: { telegram: { token } }, config: { daily_manna_cap: 5 } })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    const ids = new Set(results.map((r) => r.body.deploymentId));
    expect(ids.size).toBe(1);
    const rows = await t.db.deployment.findMany({ where: { agentId: agent.id } });
    expect(rows.map((r) => r.id)).toEqual([...ids]);
    const chat: TgChat = { id: 7301, type: 'private', first_name: 'Ann' };
    const asked = tg.message(token, chat, ann, 'anyone home');
    await tg.until(() => tg.answersTo(chat.id, asked)[0]?.text === 'Heard: anyone home', 20_000, 'the answer');
    expect((await listOf(alice, agent.id)).map((d) => [d.state, d.last_error])).toEqual([['running', null]]);
    expect(tg.polling(token).conflicts).toBe(0);

    // Two tokens raced onto one agent: one wins, whole, and its bot is the one polled.
    const [x, y] = [tg.addBot(), tg.addBot()];
    const raced = await Promise.all([x, y, x, y].map((token) => deploy(alice, agent.id, { secrets: { telegram: { token } } })));
    expect(raced.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const [row] = await t.db.deployment.findMany({ where: { agentId: agent.id } });
    const winner = row!.account === `@${tg.botName(x)}` ? x : y;
    await tg.until(() => tg.polling(winner).now === 1, 20_000, 'the winning bot to be polled');
    const again = tg.message(winner, chat, ann, 'still here');
    await tg.until(() => tg.answersTo(chat.id, again)[0]?.text === 'Heard: still here', 20_000, 'the answer from the winner');
    expect((await listOf(alice, agent.id)).map((d) => [d.state, d.last_error])).toEqual([['running', null]]);
  });
});

describe('the daily manna cap', () => {
  it('holds when several chats spend at once, each reply asking for several paid calls', async () => {
    await t.db.$transaction((tx) => credit(tx, { userId: alice.id, kind: 'forever', amount: '200', reason: 'purchase' }));
    const { token, deploymentId } = await deployed({ daily_manna_cap: 1 }, { tools: { flux_dev: true } });
    const balance = async () => Number((await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance);
    const before = await balance();
    const chats = [7401, 7402, 7403, 7404].map((id): TgChat => ({ id, type: 'private', first_name: `Stranger ${id}` }));
    for (const chat of chats) tg.message(token, chat, { id: chat.id, first_name: chat.first_name! }, 'please paint');
    await expect
      .poll(
        async () => {
          const rows = await t.db.deploymentUpdate.findMany({ where: { deploymentId }, select: { status: true } });
          return rows.length === 4 && rows.every((r) => r.status !== 'received');
        },
        { timeout: 30_000 },
      )
      .toBe(true);
    // Settled: no call is still running, so what is spent is what stays spent.
    await expect.poll(() => t.db.task.count({ where: { userId: alice.id, status: { in: ['pending', 'running'] } } })).toBe(0);
    expect(before - (await balance())).toBe(1);
    const refused = await t.db.task.findMany({ where: { userId: alice.id, status: 'failed' }, select: { error: true } });
    expect(refused.length).toBeGreaterThan(0);
    for (const call of refused) expect(call.error).toBe("The deployment's daily manna cap is reached");
  });
});
