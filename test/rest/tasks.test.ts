import { PNG } from 'pngjs';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

// Tools at work over REST, on the real app, the fake model and a real HTTP tool service: tasks a
// user runs (POST /v2/tasks/create, reading, listing, cancelling, manna under concurrency), and
// the tool calls of agents' replies, which are tasks too, held, charged and given back the same way.

let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let bob: TestUser;

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({
    remote: httpTool('remote', svc.url),
    pricey: httpTool('pricey', svc.url, '200 * n'),
    remote_maker: httpTool('remote_maker', svc.url),
    pricey_tool: httpTool('pricey_tool', svc.url, '200 * n'),
    quick_giveup: httpTool('quick_giveup', svc.url, 'n', { timeoutMs: 300, retries: 0 }),
  });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir, work: { tasksPerUser: 40 } });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  await t.services.manna.grant('alice', '100', 'subscription');
  await t.services.manna.grant('alice', '50', 'forever');
});
beforeEach(() => {
  llm.reset();
  svc.reset();
});

const balances = async (user: TestUser) => {
  const { balance, subscriptionBalance, foreverBalance } = (await t.rest('GET', '/v2/creators/me', { key: user.apiKey })).body;
  return { balance, subscriptionBalance, foreverBalance };
};
const ledgerOf = (user: TestUser) =>
  t.db.mannaLedger.findMany({ where: { userId: user.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
const create = (user: TestUser, body: unknown) => t.rest('POST', '/v2/tasks/create', { key: user.apiKey, body });

/** The task once it is in one of `statuses`, as GET /v2/tasks/{id} shows it. */
async function settled(user: TestUser, id: string, statuses = ['completed', 'failed', 'cancelled']) {
  for (;;) {
    const { body } = await t.rest('GET', `/v2/tasks/${id}`, { key: user.apiKey });
    if (statuses.includes(body.task.status)) return body.task;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Everything a refused request could have changed. */
const footprint = async (user: TestUser) => ({
  tasks: await t.db.task.count({ where: { userId: user.id } }),
  ledger: (await ledgerOf(user)).length,
  balance: (await balances(user)).balance,
});

describe('POST /v2/tasks/create', () => {
  it('runs a tool: held at once with its ledger row, then completed with a PNG the user owns, the hold its charge', async () => {
    const before = await balances(alice);
    const res = await create(alice, { tool: 'flux_dev', args: { prompt: 'a lighthouse in fog', n_samples: 2 }, makePublic: true });
    expect(res.status).toBe(200);
    const task = res.body.task;
    expect(task).toMatchObject({
      _id: expect.any(String),
      user: { _id: alice.id, username: 'alice' },
      agent: null,
      session: null,
      tool: 'flux_dev',
      output_type: 'image',
      args: { prompt: 'a lighthouse in fog', n_samples: 2 },
      cost: 2,
      status: 'pending',
      result: [],
      error: null,
      public: true,
    });
    // The hold is taken as the task is created: subscription manna first, one row naming the task.
    expect((await balances(alice)).subscriptionBalance).toBe(before.subscriptionBalance - 2);
    expect((await ledgerOf(alice)).at(-1)).toMatchObject({ taskId: task._id, reason: 'task: flux_dev', sessionId: null });

    const done = await settled(alice, task._id);
    expect(done).toMatchObject({ status: 'completed', progress: 1, error: null, cost: 2 });
    const outputs = done.result[0].output;
    expect(outputs).toHaveLength(2);
    for (const o of outputs) {
      expect(o).toMatchObject({ url: expect.stringMatching(/\.png$/), filename: expect.stringMatching(/\.png$/) });
      expect(o.mediaAttributes).toMatchObject({ type: 'image', mimeType: 'image/png', width: 1024, height: 1024 });
      const png = PNG.sync.read(Buffer.from(await (await fetch(o.url)).arrayBuffer()));
      expect([png.width, png.height]).toEqual([1024, 1024]);
      // A creation of the user, public as the task asked, naming its task.
      expect(await t.db.creation.findUniqueOrThrow({ where: { id: o.creationId } })).toMatchObject({
        userId: alice.id,
        taskId: task._id,
        public: true,
        tool: 'flux_dev',
      });
    }
    expect(done.result[0].data.images).toHaveLength(2);
    // Completed: the hold stays as the charge, nothing given back.
    expect((await balances(alice)).balance).toBe(before.balance - 2);
    expect((await ledgerOf(alice)).filter((r) => r.taskId === task._id)).toHaveLength(1);
  });

  it('costs what POST /v2/tasks/cost said it would', async () => {
    const args = { prompt: 'x', n_samples: 3, num_inference_steps: 42 };
    const estimate = await t.rest('POST', '/v2/tasks/cost', { key: alice.apiKey, body: { tool: 'flux_dev', args } });
    expect(estimate).toMatchObject({ status: 200, body: { cost: 4.5 } });
    svc.enqueue({ answer: { result: { ok: 1 } } });
    const remoteCost = await t.rest('POST', '/v2/tasks/cost', { key: alice.apiKey, body: { tool: 'remote', args: { prompt: 'x', n: 3 } } });
    const before = (await balances(alice)).balance;
    const res = await create(alice, { tool: 'remote', args: { prompt: 'x', n: 3 } });
    expect(res.body.task.cost).toBe(remoteCost.body.cost);
    expect((await balances(alice)).balance).toBe(before - remoteCost.body.cost);
    expect(await settled(alice, res.body.task._id)).toMatchObject({ status: 'completed', result: [{ output: [], data: { ok: 1 } }] });
  });

  it("refuses what the balance cannot cover with the original's message, taking nothing", async () => {
    const before = await footprint(alice);
    const res = await create(alice, { tool: 'pricey', args: { prompt: 'x', n: 1 } });
    expect(res.status).toBe(402);
    expect(res.body.error).toBe(`Insufficient manna balance. Need 200 but only have ${before.balance}`);
    expect(res.body.message).toBe(res.body.error);
    expect(await footprint(alice)).toEqual(before);
    expect(svc.calls).toHaveLength(0);
  });

  it('validates at the edge: a 400 naming the field, and nothing changes', async () => {
    const before = await footprint(alice);
    // Which input is refused, and why, is the tasks' rule (test/rules/tasks.test.ts, "names the field
    // at fault", "what a task’s input may be"); here, the 400 {error, message} naming the field as REST does.
    const cases: [unknown, string][] = [
      [{}, 'tool: is required'],
      [{ tool: 'wan_t2v', args: { prompt: 'x' } }, 'tool: wan_t2v cannot run on this server (it has no handler here)'],
      [{ tool: 'flux_dev', args: { prompt: 'x', n_samples: 9 } }, 'args.n_samples: must be at most 4'],
      [{ tool: 'flux_dev', args: { prompt: 'x' }, makePublic: 'yes' }, 'makePublic: must be true or false'],
    ];
    for (const [body, message] of cases) {
      const res = await create(alice, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body, JSON.stringify(body).slice(0, 80)).toEqual({ error: message, message });
    }
    const estimate = await t.rest('POST', '/v2/tasks/cost', {
      key: alice.apiKey,
      body: { tool: 'flux_dev', args: { prompt: 'x', n_samples: 'two' } },
    });
    expect(estimate).toMatchObject({ status: 400, body: { error: 'args.n_samples: must be a number' } });
    expect(await footprint(alice)).toEqual(before);
  });
});

describe('GET /v2/tasks/{taskId} and GET /v2/tasks', () => {
  it("shows one's own tasks and public ones; another's private task is not found, as an unknown id is", async () => {
    svc.enqueue({ answer: { result: 1 } }, { answer: { result: 2 } });
    const own = (await create(alice, { tool: 'remote', args: { prompt: 'mine' } })).body.task;
    const shown = (await create(alice, { tool: 'remote', args: { prompt: 'shown' }, makePublic: true })).body.task;
    await settled(alice, own._id);
    await settled(alice, shown._id);
    expect((await t.rest('GET', `/v2/tasks/${own._id}`, { key: alice.apiKey })).body.task).toMatchObject({
      _id: own._id,
      status: 'completed',
    });
    expect(await t.rest('GET', `/v2/tasks/${own._id}`, { key: bob.apiKey })).toMatchObject({
      status: 404,
      body: { error: 'Task not found', message: 'Task not found' },
    });
    expect((await t.rest('GET', '/v2/tasks/no-such-task', { key: alice.apiKey })).status).toBe(404);
    expect((await t.rest('GET', '/v2/tasks/a%00b', { key: alice.apiKey })).status).toBe(404);
    expect((await t.rest('GET', `/v2/tasks/${shown._id}`, { key: bob.apiKey })).body.task).toMatchObject({
      _id: shown._id,
      user: { _id: alice.id },
    });
    // Lists are one's own: bob's is empty.
    expect((await t.rest('GET', '/v2/tasks', { key: bob.apiKey })).body).toMatchObject({ docs: [], total: 0, pages: 1 });
  });

  it('lists every task the manna paid for, the tool calls of replies among them, with their session', async () => {
    const carol = await t.createUser('carol');
    await t.services.manna.grant('carol', '20', 'forever');
    const agent = await fixtures(t).agent(carol, { tools: { remote: true } });
    llm.enqueue(
      { toolCalls: [{ id: 'c1', name: 'remote', arguments: JSON.stringify({ prompt: 'from a reply' }) }] },
      { tokens: ['Made.'] },
    );
    svc.enqueue({ answer: { result: 'reply' } }, { answer: { result: 'own' } });
    const sent = await t.rest('POST', '/v2/sessions', { key: carol.apiKey, body: { agent_ids: [agent.id], content: 'make one' } });
    const session = await settledSession(t, carol, sent.body.session_id);
    const own = (await create(carol, { tool: 'remote', args: { prompt: 'by itself' } })).body.task;
    await settled(carol, own._id);

    const page = (await t.rest('GET', '/v2/tasks', { key: carol.apiKey })).body;
    expect(page).toMatchObject({ total: 2, limit: 20, page: 1, pages: 1, pagingCounter: 1, hasNextPage: false });
    const [latest, call] = page.docs;
    expect(latest).toMatchObject({ _id: own._id, session: null, agent: null, message: null });
    const replyMessage = session.messages.find((m: any) => m.role === 'assistant' && m.tool_calls?.length);
    expect(call).toMatchObject({
      _id: replyMessage.tool_calls[0].id,
      tool: 'remote',
      session: sent.body.session_id,
      agent: agent.id,
      message: replyMessage.id,
      status: 'completed',
      // Completed is done, whichever way the tool was called.
      progress: 1,
      cost: 1,
      args: { prompt: 'from a reply' },
      result: [{ output: [], data: 'reply' }],
    });
    expect(latest.progress).toBe(1);
    // Both charges are in the ledger, each naming its task; the ledger adds up to the balance.
    const ledger = await ledgerOf(carol);
    expect(ledger.filter((r) => r.amount.isNegative()).map((r) => r.taskId)).toEqual([call._id, own._id]);
    expect(ledger.reduce((sum, r) => sum + r.amount.toNumber(), 0)).toBe((await balances(carol)).balance);
    // The session's own view of the call is as it was.
    expect(replyMessage.tool_calls[0]).toEqual({
      id: call._id,
      tool: 'remote',
      args: { prompt: 'from a reply' },
      status: 'completed',
      result: 'reply',
      cost: 1,
      error: null,
      approval: null,
    });
    const bySession = (await t.rest('GET', `/v2/tasks?session_id=${sent.body.session_id}`, { key: carol.apiKey })).body;
    expect(bySession.docs.map((d: any) => d._id)).toEqual([call._id]);
  });

  it('filters as the original did, pages by number, and refuses a bad filter naming it', async () => {
    const dave = await t.createUser('dave');
    await t.services.manna.grant('dave', '50', 'forever');
    svc.enqueue({ answer: { result: 0 } }, { status: 400, answer: {} }, { answer: { result: 2 } });
    const ids: string[] = [];
    for (const prompt of ['a', 'b', 'c']) {
      const made = (await create(dave, { tool: 'remote', args: { prompt } })).body.task;
      await settled(dave, made._id);
      ids.push(made._id);
    }
    const get = async (query: string) => (await t.rest('GET', `/v2/tasks?${query}`, { key: dave.apiKey })).body;
    expect((await get('')).docs.map((d: any) => d._id)).toEqual([...ids].reverse());
    expect((await get('direction=asc')).docs.map((d: any) => d._id)).toEqual(ids);
    expect((await get('orderBy=updatedAt&direction=-1')).total).toBe(3);
    expect((await get('status=failed')).docs.map((d: any) => d._id)).toEqual([ids[1]]);
    expect((await get('status=failed&status=completed')).total).toBe(3);
    expect((await get(`taskId=${ids[0]},${ids[2]}`)).docs.map((d: any) => d._id)).toEqual([ids[2], ids[0]]);
    expect((await get(`taskId=${ids[0]}&taskId=${ids[1]}`)).total).toBe(2);
    expect((await get('tool=remote')).total).toBe(3);
    expect((await get('tool=flux_dev')).total).toBe(0);
    expect((await get('output_type=image')).total).toBe(3);
    expect((await get('output_type=audio')).total).toBe(0);
    expect((await get('type=creations')).total).toBe(3);
    expect((await get('type=concepts')).total).toBe(0);
    expect((await get(`minDate=${new Date(Date.now() + 60_000).toISOString()}`)).total).toBe(0);
    expect((await get('minDate=2020-01-01T00:00:00Z')).total).toBe(3);
    expect(await get('page=2&limit=2')).toMatchObject({
      docs: [{ _id: ids[0] }],
      total: 3,
      limit: 2,
      page: 2,
      pages: 2,
      pagingCounter: 3,
      hasPrevPage: true,
      hasNextPage: false,
      prevPage: 1,
    });
    // The SDK types the page pointers as numbers or absent: no next page, no field.
    expect(await get('page=2&limit=2')).not.toHaveProperty('nextPage');
    expect(await get('page=1&limit=2')).toMatchObject({ nextPage: 2 });
    expect(await get('page=1&limit=2')).not.toHaveProperty('prevPage');

    for (const [query, field] of [
      ['status=done', 'status'],
      ['limit=101', 'limit'],
      ['limit=0', 'limit'],
      ['page=x', 'page'],
      ['minDate=true', 'minDate'],
      ['output_type=hologram', 'output_type'],
      ['type=models', 'type'],
      ['orderBy=cost', 'orderBy'],
      ['direction=sideways', 'direction'],
    ]) {
      const res = await t.rest('GET', `/v2/tasks?${query}`, { key: dave.apiKey });
      expect(res.status, query).toBe(400);
      expect(res.body.error, query).toMatch(new RegExp(`^${field}(\\[\\d+\\])?: `));
    }
  });

  it('keeps a page small: arguments and answers over 4 KiB are left out of lists, whole by id', async () => {
    const erin = await t.createUser('erin');
    await t.services.manna.grant('erin', '10', 'forever');
    const big = 'z'.repeat(6000);
    svc.enqueue({ answer: { result: { text: big } } });
    const made = (await create(erin, { tool: 'remote', args: { prompt: big } })).body.task;
    await settled(erin, made._id);
    const res = await t.rest('GET', '/v2/tasks', { key: erin.apiKey });
    expect(res.body.docs[0]).toMatchObject({ args: {}, truncated: ['args', 'result'], result: [{ data: null }] });
    expect(Buffer.byteLength(JSON.stringify(res.body))).toBeLessThan(4000);
    const whole = (await t.rest('GET', `/v2/tasks/${made._id}`, { key: erin.apiKey })).body.task;
    expect(whole.args.prompt).toBe(big);
    expect(whole.result[0].data.text).toBe(big);
    expect(whole).not.toHaveProperty('truncated');
  });
});

describe('POST /v2/tasks/cancel, progress and failures', () => {
  it('cancels a running task: the tool service is let go, the hold comes back once, and cancelling again changes nothing', async () => {
    const before = await balances(alice);
    svc.enqueue({ hang: true });
    const task = (await create(alice, { tool: 'remote', args: { prompt: 'forever', n: 2 } })).body.task;
    await settled(alice, task._id, ['running']);
    while (svc.calls.length === 0) await new Promise((r) => setTimeout(r, 10));
    expect((await balances(alice)).balance).toBe(before.balance - 2);

    const res = await t.rest('POST', '/v2/tasks/cancel', { key: alice.apiKey, body: { taskId: task._id } });
    expect(res).toMatchObject({ status: 200, body: { taskStatus: 'cancelled' } });
    await svc.calls[0]!.abandoned;
    expect(await settled(alice, task._id)).toMatchObject({ status: 'cancelled', error: 'Cancelled by its owner', result: [] });
    expect(await balances(alice)).toEqual(before);
    const rows = (await ledgerOf(alice)).filter((r) => r.taskId === task._id);
    expect(rows.map((r) => [r.amount.toNumber(), r.reason])).toEqual([
      [-2, 'task: remote'],
      [2, 'refund: remote cancelled'],
    ]);
    const again = await t.rest('POST', '/v2/tasks/cancel', { key: alice.apiKey, body: { taskId: task._id } });
    expect(again).toMatchObject({ status: 200, body: { taskStatus: 'cancelled' } });
    expect((await ledgerOf(alice)).filter((r) => r.taskId === task._id)).toHaveLength(2);
  });

  it('leaves an ended task as it is, and refuses what is not the caller’s to cancel, changing nothing', async () => {
    svc.enqueue({ answer: { result: 'done' } });
    const done = (await create(alice, { tool: 'remote', args: { prompt: 'quick' }, makePublic: true })).body.task;
    await settled(alice, done._id);
    const before = await footprint(alice);
    const cancel = (user: TestUser, body: unknown) => t.rest('POST', '/v2/tasks/cancel', { key: user.apiKey, body });
    expect((await cancel(alice, { taskId: done._id })).body).toEqual({ taskStatus: 'completed' });
    expect(await cancel(bob, { taskId: done._id })).toMatchObject({ status: 403, body: { error: 'Only the task’s owner may cancel it' } });
    expect(await cancel(alice, { taskId: 'nope' })).toMatchObject({ status: 404, body: { error: 'Task not found' } });
    expect(await cancel(alice, {})).toMatchObject({ status: 400, body: { error: 'taskId: is required' } });
    expect(await cancel(alice, { taskId: 5 })).toMatchObject({ status: 400, body: { error: 'taskId: must be a string' } });
    expect(await footprint(alice)).toEqual(before);
    expect(await settled(alice, done._id)).toMatchObject({ status: 'completed' });
  });

  it('a tool call of a reply stops with its reply, not on its own', async () => {
    const frank = await t.createUser('frank');
    await t.services.manna.grant('frank', '5', 'forever');
    const agent = await fixtures(t).agent(frank, { tools: { remote: true } });
    llm.enqueue({ toolCalls: [{ id: 'c1', name: 'remote', arguments: JSON.stringify({ prompt: 'x' }) }] }, { tokens: ['ok'] });
    svc.enqueue({ answer: { result: 1 } });
    const sent = await t.rest('POST', '/v2/sessions', { key: frank.apiKey, body: { agent_ids: [agent.id], content: 'go' } });
    await settledSession(t, frank, sent.body.session_id);
    const [call] = (await t.rest('GET', '/v2/tasks', { key: frank.apiKey })).body.docs;
    const res = await t.rest('POST', '/v2/tasks/cancel', { key: frank.apiKey, body: { taskId: call._id } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/^taskId: is a tool call of a reply/);
  });

  it('cancels a task still waiting for its turn, before anything ran', async () => {
    const gina = await t.createUser('gina');
    await t.services.manna.grant('gina', '20', 'forever');
    const gates = [deferred(), deferred(), deferred(), deferred()];
    // Four long tasks take gina's four turns (TOOL_RUNS_PER_USER); the fifth waits.
    for (const gate of gates) svc.enqueue({ answer: { result: 'slow' }, gate: gate.promise });
    const long = [];
    for (let i = 0; i < 4; i++) long.push((await create(gina, { tool: 'remote', args: { prompt: `long ${i}` } })).body.task);
    for (const task of long) await settled(gina, task._id, ['running']);
    const waiting = (await create(gina, { tool: 'remote', args: { prompt: 'waiting' } })).body.task;
    await new Promise((r) => setTimeout(r, 100));
    expect((await t.rest('GET', `/v2/tasks/${waiting._id}`, { key: gina.apiKey })).body.task.status).toBe('pending');
    const res = await t.rest('POST', '/v2/tasks/cancel', { key: gina.apiKey, body: { taskId: waiting._id } });
    expect(res.body).toEqual({ taskStatus: 'cancelled' });
    for (const gate of gates) gate.resolve();
    for (const task of long) expect(await settled(gina, task._id)).toMatchObject({ status: 'completed' });
    // The cancelled one never reached the tool service.
    expect(svc.calls.map((c) => c.body.arguments.prompt)).not.toContain('waiting');
    expect((await balances(gina)).balance).toBe(16);
  });

  it('follows the progress a tool service streams, in order, then its answer', async () => {
    const steps = [deferred(), deferred(), deferred()];
    svc.enqueue({
      lines: [{ progress: 0.25, message: 'sketching' }, { progress: 0.75 }, { result: { ok: true } }],
      before: (i) => (i === 0 ? Promise.resolve() : steps[i - 1]!.promise),
    });
    const task = (await create(alice, { tool: 'remote', args: { prompt: 'slowly' } })).body.task;
    const progressOf = async () => (await t.rest('GET', `/v2/tasks/${task._id}`, { key: alice.apiKey })).body.task.progress;
    while ((await progressOf()) !== 0.25) await new Promise((r) => setTimeout(r, 10));
    steps[0]!.resolve();
    while ((await progressOf()) !== 0.75) await new Promise((r) => setTimeout(r, 10));
    steps[1]!.resolve();
    expect(await settled(alice, task._id)).toMatchObject({ status: 'completed', progress: 1, result: [{ data: { ok: true } }] });
  });

  it('a tool that fails gives the hold back, with its own ledger row', async () => {
    const before = await balances(alice);
    svc.enqueue({ status: 422, answer: { error: 'no' } });
    const task = (await create(alice, { tool: 'remote', args: { prompt: 'refused' } })).body.task;
    expect(await settled(alice, task._id)).toMatchObject({ status: 'failed', error: 'The tool service answered HTTP 422', result: [] });
    expect(await balances(alice)).toEqual(before);
    expect((await ledgerOf(alice)).filter((r) => r.taskId === task._id).map((r) => r.reason)).toEqual([
      'task: remote',
      'refund: remote failed',
    ]);
  });

  it('refuses a task past the tasks a user may have waiting, with 429, taking nothing', async () => {
    const hank = await t.createUser('hank');
    await t.services.manna.grant('hank', '100', 'forever');
    const gate = deferred();
    for (let i = 0; i < 40; i++) svc.enqueue({ answer: { result: i }, gate: gate.promise });
    const made = [];
    for (let i = 0; i < 40; i++) made.push((await create(hank, { tool: 'remote', args: { prompt: `n${i}` } })).body.task);
    const before = await footprint(hank);
    const refused = await create(hank, { tool: 'remote', args: { prompt: 'one too many' } });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe('Too many tasks waiting: at most 40 of yours may be pending or running at once');
    expect(await footprint(hank)).toEqual(before);
    gate.resolve();
    for (const task of made) await settled(hank, task._id);
  });
});

describe('manna under concurrency', () => {
  it('creations and cancels at once against a balance for ten: none overdraws, each hold settles once, the ledger equals the balances', async () => {
    const ivy = await t.createUser('ivy');
    await t.services.manna.grant('ivy', '6', 'subscription');
    await t.services.manna.grant('ivy', '4', 'forever');
    const gate = deferred();
    svc.reset();
    for (let i = 0; i < 40; i++) svc.enqueue({ answer: { result: i }, gate: gate.promise });
    const attempts = await Promise.all(Array.from({ length: 40 }, (_, i) => create(ivy, { tool: 'remote', args: { prompt: `p${i}` } })));
    const made = attempts.filter((r) => r.status === 200).map((r) => r.body.task);
    expect(made).toHaveLength(10);
    expect(attempts.filter((r) => r.status === 402)).toHaveLength(30);
    // Cancel half of them, each twice at once, while the others run.
    const cancels = made.filter((_, i) => i % 2 === 0);
    const answers = await Promise.all(
      cancels.flatMap((task) => [0, 1].map(() => t.rest('POST', '/v2/tasks/cancel', { key: ivy.apiKey, body: { taskId: task._id } }))),
    );
    expect(answers.every((a) => a.status === 200 && a.body.taskStatus === 'cancelled')).toBe(true);
    gate.resolve();
    const ended = await Promise.all(made.map((task) => settled(ivy, task._id)));
    expect(ended.filter((e) => e.status === 'cancelled')).toHaveLength(5);
    expect(ended.filter((e) => e.status === 'completed')).toHaveLength(5);

    const user = await t.db.user.findUniqueOrThrow({ where: { id: ivy.id } });
    const ledger = await ledgerOf(ivy);
    const sumOf = (kind: string) => ledger.filter((r) => r.kind === kind).reduce((s, r) => s + r.amount.toNumber(), 0);
    expect(sumOf('subscription')).toBe(user.subscriptionBalance.toNumber());
    expect(sumOf('forever')).toBe(user.foreverBalance.toNumber());
    expect(user.subscriptionBalance.plus(user.foreverBalance).toNumber()).toBe(5);
    for (const task of ended) {
      const rows = ledger.filter((r) => r.taskId === task._id);
      expect(rows.reduce((s, r) => s + r.amount.toNumber(), 0)).toBe(task.status === 'completed' ? -1 : 0);
    }
  });
});

describe('a task list from a date outside the years 1970–9999', () => {
  it('selects as from the nearest end of them: a year before 1 failed the query with a 500', async () => {
    const kim = await t.createUser('kim');
    await t.services.manna.grant('kim', '5', 'forever');
    const made = (await create(kim, { tool: 'remote', args: { prompt: 'dated' } })).body.task;
    await settled(kim, made._id);
    for (const [minDate, total] of [
      ['-000100-01-01T00:00:00Z', 1],
      ['1900-01-01T00:00:00Z', 1],
      ['+010000-01-01T00:00:00Z', 0],
      ['+275760-09-13T00:00:00Z', 0],
    ] as const) {
      const res = await t.rest('GET', `/v2/tasks?minDate=${encodeURIComponent(minDate)}`, { key: kim.apiKey });
      expect({ minDate, status: res.status, total: res.body.total }).toEqual({ minDate, status: 200, total });
    }
  });
});

// Tool calls of replies: tasks too, run by the same host and paid the same way.
const call = (name: string, args: unknown, id = `call_${name}`) => ({
  id,
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
});

async function stream(user: TestUser, body: Record<string, unknown>) {
  const s = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': user.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, ...body }),
  });
  return s;
}

describe('tools in replies', () => {
  // Users of their own: the tests of tasks above count what theirs hold and spend.
  let alice: TestUser;
  let muse: { id: string };
  beforeAll(async () => {
    alice = await t.createUser('alma');
    await t.services.manna.grant('alma', '100', 'subscription');
    await t.services.manna.grant('alma', '50', 'forever');
    muse = await fixtures(t).agent(alice, {
      name: 'Muse',
      key: 'muse',
      tools: {
        flux_dev: true,
        remote_maker: true,
        pricey_tool: true,
        quick_giveup: true,
        creations_search: true,
        image_caption: true,
        kokoro_tts: true,
      },
    });
  });
  /** The whole of GET /v2/creators/me. */
  const balances = async (user: TestUser) => (await t.rest('GET', '/v2/creators/me', { key: user.apiKey })).body;

  it('an agent makes an image: a real PNG served by the service, a creation of the user, a charge with its ledger row, and the events in order', async () => {
    llm.enqueue(
      { tokens: ['Painting it now.'], toolCalls: [call('flux_dev', { prompt: 'a fox reading in a lighthouse', n_samples: 1 })] },
      { tokens: ['Here', ' it', ' is.'] },
    );
    const before = await balances(alice);
    const s = await stream(alice, { agent_ids: [muse.id], content: 'Please paint a fox reading in a lighthouse' });
    const events = updates(await s.done);

    expect(events.map((e) => e.type)).toEqual([
      'start_prompt',
      'assistant_token',
      'assistant_message',
      'tool_progress',
      'tool_complete',
      'assistant_token',
      'assistant_token',
      'assistant_token',
      'assistant_message',
      'end_prompt',
    ]);
    const asking = events[2];
    expect(asking.message).toMatchObject({ status: 'streaming', content: 'Painting it now.' });
    expect(asking.tool_calls).toEqual([
      {
        id: expect.any(String),
        tool: 'flux_dev',
        args: { prompt: 'a fox reading in a lighthouse', n_samples: 1 },
        status: 'pending',
        result: null,
        cost: null,
        error: null,
        approval: null,
      },
    ]);
    // The painter's progress, live on the stream as the call runs (one image: painted 1 of 1).
    expect(events[3]).toMatchObject({ tool_call_id: asking.tool_calls[0].id, tool: 'flux_dev', progress: 1, message: 'Painted 1 of 1' });
    const done = events[4].tool_call;
    expect(done).toMatchObject({ id: asking.tool_calls[0].id, tool: 'flux_dev', status: 'completed', cost: 1, error: null });
    const image = done.result.images[0];
    expect(image).toEqual({
      creationId: expect.any(String),
      url: expect.stringMatching(new RegExp(`^${t.url}/media/.+\\.png$`)),
      width: 1024,
      height: 1024,
    });
    const final = events.at(-2);
    expect(final.message).toMatchObject({ status: 'complete', content: 'Painting it now.Here it is.' });
    expect(final.tool_calls).toEqual([{ ...done }]);

    // The file: a PNG of the asked size, with the headers a CDN would send, and byte ranges.
    const file = await fetch(image.url);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect(file.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const png = PNG.sync.read(Buffer.from(await file.arrayBuffer()));
    expect([png.width, png.height]).toEqual([1024, 1024]);
    const part = await fetch(image.url, { headers: { range: 'bytes=0-7' } });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer())).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));

    // The creation: the user's, by the agent and tool, with its thumbnail, searchable.
    const creation = await t.db.creation.findUniqueOrThrow({ where: { id: image.creationId } });
    expect(creation).toMatchObject({
      userId: alice.id,
      agentId: muse.id,
      tool: 'flux_dev',
      // Stored relative to the service, shown where it is served from (docs/operations.md).
      url: new URL(image.url).pathname,
      thumbnail: expect.stringMatching(/^\/media\/[\w-]+-thumb\.png$/),
      public: false,
      embeddingProvider: expect.any(String),
    });
    expect(creation.mediaAttributes).toEqual({ mimeType: 'image/png', width: 1024, height: 1024, aspectRatio: 1 });
    expect((await fetch(`${t.url}${creation.thumbnail}`)).status).toBe(200);
    const found = await t.rest('GET', '/v2/creations/search?query=fox%20reading%20lighthouse', { key: alice.apiKey });
    expect(found.body.docs.map((d: any) => d.id)).toContain(creation.id);

    // The charge: one manna, subscription first, a ledger row naming the session, reply and call.
    const after = await balances(alice);
    expect(after.balance).toBe(before.balance - 1);
    expect(after.subscriptionBalance).toBe(before.subscriptionBalance - 1);
    const row = (await ledgerOf(alice)).at(-1)!;
    expect(row).toMatchObject({
      kind: 'subscription',
      sessionId: events[0].session_id,
      messageId: final.message.id,
      taskId: done.id,
      reason: 'tool: flux_dev',
    });
    expect(row.amount.toNumber()).toBe(-1);
    expect((await settledSession(t, alice, events[0].session_id)).session.spent.manna).toBe(1);

    // What the model was offered, and what it was told about the call.
    const [first, second] = llm.replyRequests();
    const offered = first!.body.tools!.map((tool) => tool.function.name).sort();
    // prompt_enhance, a hidden paid helper, is not offered: Muse's owner never turned it on.
    expect(offered).toEqual(['creations_search', 'flux_dev', 'pricey_tool', 'quick_giveup', 'remote_maker']);
    const flux = first!.body.tools!.find((tool) => tool.function.name === 'flux_dev') as unknown as { function: { parameters: any } };
    expect(flux.function.parameters).toMatchObject({
      type: 'object',
      required: ['prompt'],
      additionalProperties: false,
      properties: { n_samples: { type: 'integer', minimum: 1, maximum: 4, default: 1 } },
    });
    const told = second!.body.messages.slice(-2);
    expect(told[0]).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_flux_dev', function: { name: 'flux_dev' } }] });
    expect(told[1]).toMatchObject({ role: 'tool', tool_call_id: 'call_flux_dev' });
    expect(JSON.parse(told[1]!.content!).images[0].url).toBe(image.url);
  });

  it('runs the calls of one model call in parallel', async () => {
    // The first call to arrive (either one) is held until the second arrives: only calls made in
    // parallel can both reach the service. Each answer echoes its call's prompt.
    const secondArrived = deferred();
    const echo = (body: { arguments: { prompt: string } }) => ({ result: { made: body.arguments.prompt } });
    svc.enqueue({ answer: echo, gate: secondArrived.promise }, { answer: echo });
    llm.enqueue(
      { toolCalls: [call('remote_maker', { prompt: 'one' }, 'c1'), call('remote_maker', { prompt: 'two' }, 'c2')] },
      { tokens: ['Both done.'] },
    );
    const s = await stream(alice, { agent_ids: [muse.id], content: 'make two things' });
    const watch = (async () => {
      await expect.poll(() => svc.calls.length).toBe(2);
      secondArrived.resolve();
    })();
    const events = updates(await s.done);
    await watch;
    const completed = events.filter((e) => e.type === 'tool_complete').map((e) => e.tool_call);
    expect(completed.map((c) => [c.args.prompt, c.status, c.result])).toEqual(
      expect.arrayContaining([
        ['one', 'completed', { made: 'one' }],
        ['two', 'completed', { made: 'two' }],
      ]),
    );
    expect(events.at(-2).message.content).toBe('Both done.');
  });

  it('turns bad arguments and unknown tools into error results for the model, charging nothing', async () => {
    llm.enqueue(
      {
        toolCalls: [
          call('flux_dev', { prompt: 5 }, 'bad_type'),
          call('flux_dev', { prompt: 'ok', n_samples: 9 }, 'too_many'),
          call('flux_dev', { prompt: 'ok', colour: 'red' }, 'extra'),
          call('flux_dev', '{not json', 'broken'),
          call('no_such_tool', {}, 'unknown'),
          call('kokoro_tts', { text: 'hi' }, 'no_handler'),
        ],
      },
      { tokens: ['Sorry about that.'] },
    );
    const rowsBefore = (await ledgerOf(alice)).length;
    const events = updates(await (await stream(alice, { agent_ids: [muse.id], content: 'try things' })).done);
    const failed = events.filter((e) => e.type === 'tool_complete').map((e) => e.tool_call);
    // Arguments come back from the database with their keys in its order: compare them sorted.
    const sorted = (args: Record<string, unknown>) =>
      JSON.stringify(Object.fromEntries(Object.entries(args).sort(([a], [b]) => a.localeCompare(b))));
    expect(Object.fromEntries(failed.map((c) => [`${c.tool}:${sorted(c.args)}`, [c.status, c.error, c.cost]]))).toEqual({
      'flux_dev:{"prompt":5}': ['failed', 'prompt: must be text', null],
      'flux_dev:{"n_samples":9,"prompt":"ok"}': ['failed', 'n_samples: must be at most 4', null],
      'flux_dev:{"colour":"red","prompt":"ok"}': ['failed', 'unknown argument "colour"', null],
      'flux_dev:{"raw":"{not json"}': ['failed', 'The arguments are not valid JSON', null],
      'no_such_tool:{}': ['failed', 'There is no tool named "no_such_tool" for this agent', null],
      'kokoro_tts:{"text":"hi"}': ['failed', 'There is no tool named "kokoro_tts" for this agent', null],
    });
    expect(events.at(-2).message).toMatchObject({ status: 'complete', content: 'Sorry about that.' });
    const told = llm.replyRequests()[1]!.body.messages.filter((m) => m.role === 'tool');
    expect(told.map((m) => [m.tool_call_id, JSON.parse(m.content!).error])).toEqual([
      ['bad_type', 'prompt: must be text'],
      ['too_many', 'n_samples: must be at most 4'],
      ['extra', 'unknown argument "colour"'],
      ['broken', 'The arguments are not valid JSON'],
      ['unknown', 'There is no tool named "no_such_tool" for this agent'],
      ['no_handler', 'There is no tool named "kokoro_tts" for this agent'],
    ]);
    expect((await ledgerOf(alice)).length).toBe(rowsBefore);
  });

  it('a call the payer cannot afford, or past the session manna budget, is an error result and runs nothing', async () => {
    const bob = await t.createUser('bert');
    llm.enqueue({ toolCalls: [call('remote_maker', { prompt: 'x' })] }, { tokens: ['No manna.'] });
    const poor = updates(await (await stream(bob, { agent_ids: [muse.id], content: 'make it' })).done);
    expect(poor.find((e) => e.type === 'tool_complete').tool_call).toMatchObject({
      status: 'failed',
      error: 'Not enough manna: this call costs 1, the balance is 0',
    });
    expect(await ledgerOf(bob)).toEqual([]);

    llm.enqueue({ toolCalls: [call('pricey_tool', { prompt: 'x' })] }, { tokens: ['Too dear.'] });
    const capped = updates(
      await (await stream(alice, { agent_ids: [muse.id], content: 'the expensive one', budget: { manna_budget: 100 } })).done,
    );
    expect(capped.find((e) => e.type === 'tool_complete').tool_call).toMatchObject({
      status: 'failed',
      error: 'Session manna budget exceeded',
    });
    expect(svc.calls).toEqual([]);
  });

  it('the agent owner pays when owner_pays is full', async () => {
    const dora = await t.createUser('dina');
    const patron = await fixtures(t).agent(alice, { name: 'Patron', key: 'patron', ownerPays: 'full', tools: { remote_maker: true } });
    llm.enqueue({ toolCalls: [call('remote_maker', { prompt: 'gift' })] }, { tokens: ['On me.'] });
    const before = await balances(alice);
    await (await stream(dora, { agent_ids: [patron.id], content: 'make me something' })).done;
    expect((await balances(alice)).balance).toBe(before.balance - 1);
    expect(await ledgerOf(dora)).toEqual([]);
  });

  it('HTTP tools: retried on 5xx, their media becomes creations; a 4xx or a timeout fails the call and refunds it', async () => {
    svc.enqueue(
      { answer: { error: 'busy' }, status: 503 },
      {
        answer: { result: { made: 1 }, media: [{ url: 'https://cdn.example.com/made.png', mimeType: 'image/png', width: 64, height: 32 }] },
      },
    );
    llm.enqueue({ toolCalls: [call('remote_maker', { prompt: 'a kite' })] }, { tokens: ['Made.'] });
    const ok = updates(await (await stream(alice, { agent_ids: [muse.id], content: 'a kite please' })).done);
    expect(ok.find((e) => e.type === 'tool_complete').tool_call).toMatchObject({ status: 'completed', result: { made: 1 }, cost: 1 });
    expect(svc.calls).toHaveLength(2);
    expect(svc.calls[0]!.body).toEqual({ tool: 'remote_maker', arguments: { prompt: 'a kite', n: 1 }, session_id: ok[0].session_id });
    const made = await t.db.creation.findFirstOrThrow({ where: { url: 'https://cdn.example.com/made.png' } });
    expect(made).toMatchObject({
      userId: alice.id,
      tool: 'remote_maker',
      name: 'a kite',
      mediaAttributes: { mimeType: 'image/png', width: 64, height: 32, aspectRatio: 2 },
    });

    const before = await balances(alice);
    svc.enqueue({ answer: { error: 'bad prompt' }, status: 400 });
    llm.enqueue({ toolCalls: [call('remote_maker', { prompt: 'refused' })] }, { tokens: ['It refused.'] });
    const refused = updates(await (await stream(alice, { agent_ids: [muse.id], content: 'try' })).done);
    const failedCall = refused.find((e) => e.type === 'tool_complete').tool_call;
    expect(failedCall).toMatchObject({ status: 'failed', error: 'The tool service answered HTTP 400', cost: 1 });
    expect(svc.calls).toHaveLength(3);

    svc.enqueue({ hang: true });
    llm.enqueue({ toolCalls: [call('quick_giveup', { prompt: 'slow' })] }, { tokens: ['Too slow.'] });
    const slow = updates(await (await stream(alice, { agent_ids: [muse.id], content: 'try slow' })).done);
    expect(slow.find((e) => e.type === 'tool_complete').tool_call).toMatchObject({
      status: 'failed',
      error: 'The tool service did not answer within 300 ms',
    });

    // Both were held and given back: the balance is where it was, with a refund row for each.
    expect(await balances(alice)).toMatchObject({ balance: before.balance, subscriptionBalance: before.subscriptionBalance });
    const rows = await t.db.mannaLedger.findMany({ where: { taskId: failedCall.id }, orderBy: { createdAt: 'asc' } });
    expect(rows.map((r) => [r.amount.toNumber(), r.reason])).toEqual([
      [-1, 'tool: remote_maker'],
      [1, 'refund: remote_maker failed'],
    ]);
  });

  it('a slow tool then a cancel: the call is cancelled and refunded, the reply saved as cancelled, the tool service let go', async () => {
    svc.enqueue({ hang: true });
    llm.enqueue({ tokens: ['Working on it…'], toolCalls: [call('remote_maker', { prompt: 'forever' })] });
    const before = await balances(alice);
    const s = await stream(alice, { agent_ids: [muse.id], content: 'take your time' });
    const asking = await s.waitFor((f) => f.data?.data?.type === 'assistant_message');
    const sessionId = asking.data.data.session_id;
    await expect.poll(() => svc.calls.length).toBe(1);
    const cancelled = await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey });
    expect(cancelled).toMatchObject({ status: 200, body: { success: true, cancelled: 1 } });
    const events = updates(await s.done);
    expect(events.slice(-3).map((e) => e.type)).toEqual(['tool_cancelled', 'error', 'end_prompt']);
    expect(events.at(-3).tool_call).toMatchObject({ status: 'cancelled', cost: 1 });
    expect(events.at(-2)).toMatchObject({ error: 'The reply was cancelled', message: { status: 'cancelled', content: 'Working on it…' } });
    await svc.calls[0]!.abandoned;
    expect(await balances(alice)).toMatchObject({ balance: before.balance });
    expect((await settledSession(t, alice, sessionId)).session.spent.manna).toBe(0);
    expect(await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey })).toMatchObject({ body: { cancelled: 0 } });
  });

  it('deleting the session while a paid tool runs lets the tool service go and refunds the hold', async () => {
    svc.enqueue({ hang: true });
    llm.enqueue({ toolCalls: [call('remote_maker', { prompt: 'until deleted' })] });
    const before = await balances(alice);
    const s = await stream(alice, { agent_ids: [muse.id], content: 'make something slowly' });
    const sessionId = (await s.waitFor((f) => f.data?.data?.type === 'assistant_message')).data.data.session_id;
    await expect.poll(() => svc.calls.length).toBe(1);
    expect((await balances(alice)).balance).toBe(before.balance - 1);

    expect(await t.rest('DELETE', `/v2/sessions/${sessionId}`, { key: alice.apiKey })).toMatchObject({
      status: 200,
      body: { success: true },
    });
    await svc.calls[0]!.abandoned;
    await s.done;
    expect(await balances(alice)).toMatchObject({ balance: before.balance, subscriptionBalance: before.subscriptionBalance });
    // The rows outlive the session (their links to it cleared): the hold and its refund.
    const rows = (await ledgerOf(alice)).slice(-2);
    expect(rows.map((r) => [r.amount.toNumber(), r.reason, r.sessionId])).toEqual([
      [-1, 'tool: remote_maker', null],
      [1, 'refund: remote_maker cancelled', null],
    ]);
  });

  // Twenty, four times what the balance covers, race as fifty did: fifty replies of two model turns
  // each took more than a test's time on a loaded machine, with nothing more to show.
  it('twenty prompts at once, each calling a paid tool, against a balance for five: five run, the balance never goes negative, the ledger adds up', async () => {
    const carol = await t.createUser('cleo');
    await t.services.manna.grant('cleo', '5', 'forever');
    const agent = await fixtures(t).agent(carol, { name: 'Busy', key: 'busy-agent', tools: { remote_maker: true } });
    llm.choose((r) =>
      r.body.messages.some((m) => m.role === 'tool') ? { tokens: ['ok'] } : { toolCalls: [call('remote_maker', { prompt: 'x' })] },
    );
    const started = await Promise.all(
      Array.from({ length: 20 }, () =>
        t.rest('POST', '/v2/sessions', { key: carol.apiKey, body: { agent_ids: [agent.id], content: 'go' } }),
      ),
    );
    expect(started.every((r) => r.status === 200)).toBe(true);
    for (const r of started) await settledSession(t, carol, r.body.session_id);
    const calls = await t.db.task.findMany({ where: { message: { session: { ownerId: carol.id } } } });
    expect(calls).toHaveLength(20);
    expect(calls.filter((c) => c.status === 'completed')).toHaveLength(5);
    expect(calls.filter((c) => c.status === 'failed').every((c) => c.error?.startsWith('Not enough manna'))).toBe(true);
    expect(await balances(carol)).toMatchObject({ balance: 0, foreverBalance: 0, subscriptionBalance: 0 });
    const ledger = await ledgerOf(carol);
    expect(ledger.reduce((sum, r) => sum + r.amount.toNumber(), 0)).toBe(0);
    expect(ledger.filter((r) => r.amount.isNegative())).toHaveLength(5);
  });

  it('balances always equal the sums of their ledger rows', async () => {
    for (const user of await t.db.user.findMany({ where: { type: 'user' } })) {
      const rows = await t.db.mannaLedger.findMany({ where: { userId: user.id } });
      const sum = (kind: string) => rows.filter((r) => r.kind === kind).reduce((s, r) => s + r.amount.toNumber(), 0);
      expect([user.username, user.subscriptionBalance.toNumber(), user.foreverBalance.toNumber()]).toEqual([
        user.username,
        sum('subscription'),
        sum('forever'),
      ]);
    }
  });

  it('refuses media names that could reach outside the media folder', async () => {
    for (const path of ['/media/..%2F..%2Fetc%2Fpasswd', '/media/.env', '/media/a%00b.png']) {
      expect((await fetch(`${t.url}${path}`)).status, path).toBe(403);
    }
    expect((await fetch(`${t.url}/media/nothing-here.png`)).status).toBe(404);
  });
});
