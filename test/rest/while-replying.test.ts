import { beforeEach, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeOpenAI, isMemoryRequest, isTitleRequest, type RecordedRequest } from '../helpers/fake-openai.ts';
import { startFakeToolService } from '../helpers/fake-tool-service.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';
import { openSse, updates } from '../helpers/sse.ts';
import { httpTool, toolRegistryWith } from '../helpers/tool-registry.ts';
import { until } from '../helpers/until.ts';

/**
 * A prompt sent while an agent of the session is still replying (`docs/sessions.md`, "A prompt
 * while an agent replies"): `reject`, `enqueue` (the default), `interrupt` and `rollback`, each
 * while a reply streams, over REST, with the ledger adding up to the balance after each.
 */
let t: TestApp;
let llm: FakeOpenAI;
let svc: Awaited<ReturnType<typeof startFakeToolService>>;
let alice: TestUser;
let muse: { id: string };

setUp(async (start) => {
  llm = await start.fakeOpenAI({ tokens: ['Done.'] });
  svc = await start.service(startFakeToolService());
  const toolsDir = await toolRegistryWith({ remote_maker: httpTool('remote_maker', svc.url) });
  t = await start.app({ llm: { baseUrl: llm.baseUrl }, toolsDir });
  alice = await t.createUser('alice');
  await t.services.manna.grant('alice', '100', 'forever');
  muse = await fixtures(t).agent(alice, { name: 'Muse', key: 'muse', tools: { remote_maker: true } });
});
beforeEach(() => {
  llm.reset();
  svc.reset();
});

const call = (name: string, args: unknown, id = `call_${name}`) => ({ id, name, arguments: JSON.stringify(args) });
const asks = (r: RecordedRequest, text: string) => r.body.messages.at(-1)?.content === text;
const said = (r: RecordedRequest, text: string) => r.body.messages.some((m) => m.content?.includes(text));

async function send(body: Record<string, unknown>) {
  return t.rest('POST', '/v2/sessions', { key: alice.apiKey, body });
}

/** A session whose first reply has streamed "Partial" and waits, held open by the model. */
async function replyUnderWay() {
  llm.choose((r) => (asks(r, 'first') ? { tokens: ['Partial', ' rest'], stallAfter: 1 } : undefined));
  const s = await openSse(`${t.url}/v2/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': alice.apiKey, 'content-type': 'application/json' },
    body: JSON.stringify({ stream: true, agent_ids: [muse.id], content: 'first' }),
  });
  const token = await s.waitFor((f) => f.data?.data?.type === 'assistant_token');
  const { session_id: sessionId, message_id: replyId, prompt_id: promptId } = token.data.data;
  return { s, sessionId: sessionId as string, replyId: replyId as string, promptId: promptId as string };
}

async function ledgerAddsUp(user: TestUser) {
  const row = await t.db.user.findUniqueOrThrow({ where: { id: user.id } });
  const rows = await t.db.mannaLedger.findMany({ where: { userId: user.id } });
  const sum = rows.reduce((s, r) => s + r.amount.toNumber(), 0);
  expect(sum).toBe(row.subscriptionBalance.toNumber() + row.foreverBalance.toNumber());
  return sum;
}

describe('a prompt while an agent replies', () => {
  it('reject: 409 naming the reply under way, nothing saved; the reply goes on', async () => {
    const { s, sessionId, replyId } = await replyUnderWay();
    const before = await t.db.message.count({ where: { sessionId } });
    const refused = await send({ session_id: sessionId, content: 'second', while_replying: 'reject' });
    expect(refused.status).toBe(409);
    expect(refused.body.message).toContain(replyId);
    expect(await t.db.message.count({ where: { sessionId } })).toBe(before);
    const session = await t.db.session.findUniqueOrThrow({ where: { id: sessionId } });
    expect(session.turnsSpent).toBe(1);
    expect((await send({ session_id: sessionId, content: 'x', while_replying: 'sometimes' })).status).toBe(400);
    // Stopped by hand: the first reply was never touched by the refused prompt.
    await t.rest('POST', `/v2/sessions/${sessionId}/cancel`, { key: alice.apiKey });
    const events = updates(await s.done);
    expect(events.at(-2)).toMatchObject({ type: 'error', message: { status: 'cancelled', content: 'Partial' } });
  });

  it('enqueue (the default): answered after the reply under way, with it in context, in order', async () => {
    let open!: () => void;
    const gate = { promise: new Promise<void>((r) => (open = r)), resolve: () => open() };
    llm.choose((r) => (asks(r, 'first') ? { tokens: ['One', ' two'], gate: (i) => (i === 1 ? gate.promise : undefined) } : undefined));
    const first = await send({ agent_ids: [muse.id], content: 'first' });
    const sessionId = first.body.session_id as string;
    await until('the first reply to stream', async () => (await t.db.message.findFirst({ where: { sessionId, content: 'One' } })) !== null);
    const second = await send({ session_id: sessionId, content: 'second' });
    expect(second.status).toBe(200);
    const third = await send({ session_id: sessionId, content: 'third', while_replying: 'enqueue' });
    expect(third.status).toBe(200);
    // Neither starts while the first is held: the model has been asked once.
    expect(llm.replyRequests()).toHaveLength(1);
    gate.resolve();
    const body = await settledSession(t, alice, sessionId);
    const replies = body.messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual([
      ['complete', 'One two'],
      ['complete', 'Done.'],
      ['complete', 'Done.'],
    ]);
    const requests = llm.replyRequests();
    expect(requests.map((r) => r.body.messages.at(-1)?.content)).toEqual(['first', 'second', 'third']);
    expect(said(requests[1]!, 'One two')).toBe(true);
    expect(said(requests[2]!, 'second')).toBe(true);
  });

  it('interrupt: the reply stops at once, keeps its text marked interrupted, keeps what it was charged for; the new prompt sees it', async () => {
    // The first reply calls a paid tool (charged, completed), then streams and is held.
    llm.choose((r) => {
      if (asks(r, 'first')) return { tokens: ['Making it.'], toolCalls: [call('remote_maker', { prompt: 'a fox' })] };
      if (r.body.messages.at(-1)?.role === 'tool') return { tokens: ['Here', ' it is'], stallAfter: 1 };
      return undefined;
    });
    const before = (await t.db.user.findUniqueOrThrow({ where: { id: alice.id } })).foreverBalance.toNumber();
    const first = await send({ agent_ids: [muse.id], content: 'first' });
    const sessionId = first.body.session_id as string;
    await until('the reply to stream after its tool', () => llm.replyRequests().length === 2);
    const watch = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    const second = await send({ session_id: sessionId, content: 'second', while_replying: 'interrupt' });
    expect(second.status).toBe(200);
    const body = await settledSession(t, alice, sessionId);
    const replies = body.messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual([
      ['interrupted', 'Making it.Here'],
      ['complete', 'Done.'],
    ]);
    expect(replies[0].error).toBe('Interrupted by a newer prompt');
    expect(replies[0].tool_calls).toMatchObject([{ status: 'completed', cost: 1 }]);
    const answering = llm.replyRequests().at(-1)!;
    expect(asks(answering, 'second')).toBe(true);
    expect(said(answering, 'Making it.Here [interrupted]')).toBe(true);
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt' && f.data.data.prompt_id === second.body.message_id);
    watch.close();
    const seen = updates(watch.frames);
    expect(seen.find((e) => e.type === 'error')).toMatchObject({ message: { status: 'interrupted' } });
    // Charged for the call it completed; nothing else moved.
    expect(await ledgerAddsUp(alice)).toBe(before - 1);
  });

  it('rollback: the reply is removed, its running tool let go and refunded; the new prompt is answered as if it never ran', async () => {
    svc.enqueue({ hang: true });
    llm.choose((r) =>
      asks(r, 'first') ? { tokens: ['Working on it'], toolCalls: [call('remote_maker', { prompt: 'slow' })] } : undefined,
    );
    const before = await ledgerAddsUp(alice);
    const first = await send({ agent_ids: [muse.id], content: 'first' });
    const sessionId = first.body.session_id as string;
    await until('the tool to be called', () => svc.calls.length === 1);
    const held = await t.db.user.findUniqueOrThrow({ where: { id: alice.id } });
    expect(held.foreverBalance.toNumber()).toBe(before - 1);
    const replyId = (await t.db.message.findFirstOrThrow({ where: { sessionId, role: 'assistant' } })).id;
    const watch = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': alice.apiKey } });
    const second = await send({ session_id: sessionId, content: 'second', while_replying: 'rollback' });
    expect(second.status).toBe(200);
    await svc.calls[0]!.abandoned;
    const body = await settledSession(t, alice, sessionId);
    expect(body.messages.map((m: { role: string; content: string }) => [m.role, m.content]).slice(1)).toEqual([
      ['user', 'first'],
      ['user', 'second'],
      ['assistant', 'Done.'],
    ]);
    expect(await t.db.message.findUnique({ where: { id: replyId } })).toBeNull();
    const answering = llm.replyRequests().at(-1)!;
    expect(said(answering, 'Working on it')).toBe(false);
    await watch.waitFor((f) => f.data?.data?.type === 'end_prompt' && f.data.data.prompt_id === second.body.message_id);
    watch.close();
    expect(updates(watch.frames).find((e) => e.type === 'reply_removed')).toMatchObject({ message_id: replyId });
    // The hold came back: the balance is where it started, and the rows say so.
    expect(await ledgerAddsUp(alice)).toBe(before);
    const rows = await t.db.mannaLedger.findMany({ where: { userId: alice.id }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    expect(rows.slice(-2).map((r) => [r.amount.toNumber(), r.reason])).toEqual([
      [-1, 'tool: remote_maker'],
      [1, 'refund: remote_maker cancelled'],
    ]);
    expect((await settledSession(t, alice, sessionId)).session.spent.manna).toBe(0);
  });

  it('twenty interrupts at once while a reply streams: exactly one reply survives, the rest are interrupted, the ledger adds up', async () => {
    const { s, sessionId } = await replyUnderWay();
    const before = await ledgerAddsUp(alice);
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => send({ session_id: sessionId, content: `burst ${i}`, while_replying: 'interrupt' })),
    );
    expect(sent.map((r) => r.status)).toEqual(Array(20).fill(200));
    const body = await settledSession(t, alice, sessionId, '?limit=100');
    const replies = body.messages.filter((m: { role: string }) => m.role === 'assistant');
    await s.done;
    expect(replies).toHaveLength(21);
    const complete = replies.filter((m: { status: string }) => m.status === 'complete');
    expect(complete).toHaveLength(1);
    expect(replies.filter((m: { status: string }) => m.status === 'interrupted')).toHaveLength(20);
    // The one that survives answers the prompt saved last.
    expect(complete[0]).toBe(replies.at(-1));
    expect(await ledgerAddsUp(alice)).toBe(before);
  });

  it("an autonomous turn is stopped by a person's interrupt, and the loop goes on", async () => {
    // The opening turn is held mid-stream; the person's message is answered at once.
    llm.choose((r) =>
      isTitleRequest(r) || isMemoryRequest(r) || r.body.messages.some((m) => m.role === 'user' && m.content === 'hello there')
        ? undefined
        : { tokens: ['Opening', ' words'], stallAfter: 1 },
    );
    const created = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: { agent_ids: [muse.id], budget: { turn_budget: 10 } },
    });
    const sessionId = created.body.session.id as string;
    const on = await t.rest('PATCH', `/v2/sessions/${sessionId}`, {
      key: alice.apiKey,
      body: { autonomy_settings: { auto_reply: true, reply_interval: 3600, actor_selection_method: 'random' } },
    });
    expect(on.status).toBe(200);
    await until('the turn to stream', async () => (await t.db.message.findFirst({ where: { sessionId, content: 'Opening' } })) !== null);
    expect((await send({ session_id: sessionId, content: 'hello there', while_replying: 'interrupt' })).status).toBe(200);
    const body = await settledSession(t, alice, sessionId);
    const replies = body.messages.filter((m: { role: string }) => m.role === 'assistant');
    expect(replies.map((m: { status: string; content: string }) => [m.status, m.content])).toEqual([
      ['interrupted', 'Opening'],
      ['complete', 'Done.'],
    ]);
    // An interrupted turn is not a failed one: auto-reply stays on, its next turn an hour away.
    expect(body.session.autonomy_settings).toMatchObject({ auto_reply: true });
    await t.rest('PATCH', `/v2/sessions/${sessionId}`, {
      key: alice.apiKey,
      body: { autonomy_settings: { auto_reply: false, reply_interval: 3600, actor_selection_method: 'random' } },
    });
  });

  it("a session's default: set on creation and by PATCH, shown on the session, used by prompts that do not say", async () => {
    const created = await t.rest('POST', '/v2/sessions/create', {
      key: alice.apiKey,
      body: { agent_ids: [muse.id], while_replying: 'reject' },
    });
    expect(created.status).toBe(201);
    expect(created.body.session.while_replying).toBe('reject');
    const sessionId = created.body.session.id as string;
    llm.choose((r) => (asks(r, 'first') ? { tokens: ['Partial', ' rest'], stallAfter: 1 } : undefined));
    expect((await send({ session_id: sessionId, content: 'first' })).status).toBe(200);
    await until('the reply to stream', async () => (await t.db.message.findFirst({ where: { sessionId, content: 'Partial' } })) !== null);
    const refused = await send({ session_id: sessionId, content: 'second' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    const patched = await t.rest('PATCH', `/v2/sessions/${sessionId}`, { key: alice.apiKey, body: { while_replying: 'interrupt' } });
    expect(patched).toMatchObject({ status: 200, body: { success: true } });
    expect((await send({ session_id: sessionId, content: 'second' })).status).toBe(200);
    const body = await settledSession(t, alice, sessionId);
    expect(body.session.while_replying).toBe('interrupt');
    expect(body.messages.filter((m: { role: string }) => m.role === 'assistant').map((m: { status: string }) => m.status)).toEqual([
      'interrupted',
      'complete',
    ]);
    const bad = await t.rest('PATCH', `/v2/sessions/${sessionId}`, { key: alice.apiKey, body: { while_replying: 'later' } });
    expect(bad.status).toBe(400);
    const unchanged = await t.db.session.findUniqueOrThrow({ where: { id: sessionId } });
    expect(unchanged.whileReplying).toBe('interrupt');
    expect(
      (await t.rest('GET', `/v2/sessions/${(await send({ agent_ids: [muse.id] })).body.session_id}`, { key: alice.apiKey })).body.session
        .while_replying,
    ).toBe('enqueue');
  });
});
