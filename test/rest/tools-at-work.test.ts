import { PNG } from 'pngjs';
import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import type { FakeOpenAI } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';

let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let muse: { id: string };

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({
    remote_maker: httpTool('remote_maker', svc.url),
    pricey_tool: httpTool('pricey_tool', svc.url, '200 * n'),
    quick_giveup: httpTool('quick_giveup', svc.url, 'n', { timeoutMs: 300, retries: 0 }),
  });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '100', 'subscription');
  await t.services.manna.grant('alice', '50', 'forever');
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
beforeEach(() => {
  llm.reset();
  svc.reset();
});

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

const balances = async (user: TestUser) => (await t.rest('GET', '/v2/creators/me', { key: user.apiKey })).body;
const ledgerOf = (user: TestUser) =>
  t.db.mannaLedger.findMany({ where: { userId: user.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });

describe('tools in replies', () => {
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
      },
    ]);
    const done = events[3].tool_call;
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
    const bob = await t.createUser('bob');
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
    const dora = await t.createUser('dora');
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
    const carol = await t.createUser('carol');
    await t.services.manna.grant('carol', '5', 'forever');
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
