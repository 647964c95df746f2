import { PNG } from 'pngjs';
import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

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
