import { afterEach, describe, expect, it } from 'vitest';
import { mediaLinks } from '../../src/domain/core/media-links.ts';
import { recordable, SKIPPED } from '../../src/domain/deployments/inbound.ts';
import type { InboundMessage } from '../../src/domain/deployments/ports.ts';
import { type DeploymentRun, LeftForLater, relayRules } from '../../src/domain/deployments/relay.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { listeningPlatform, Relayed, type Said } from './support/deployments.ts';

/**
 * What the relay decides for a message someone wrote to a deployed agent, over its stores in
 * memory: which chats it answers in, each chat's pace and the deployment's daily cap (refused
 * with a notice told once per period, nothing relayed), the person's prompt saved once in the
 * chat's own session and the agent's reply carried back; and what of a stranger's message is kept.
 */
const buses: EventBus[] = [];
afterEach(async () => {
  await Promise.all(buses.splice(0).map((b) => b.close()));
});

function world(defaults = { dailyMannaCap: 100, chatMessagesPerMinute: 3 }) {
  const r = new Relayed();
  const said: Said[] = [];
  const bus = createMemoryBus({
    replayLimit: 100,
    replayBytes: 1 << 16,
    idleTtlMs: 60_000,
    streamBufferBytes: 1 << 16,
    slowClientMs: 10_000,
    heartbeatMs: 10_000,
    accessRecheckMs: 10_000,
  });
  buses.push(bus);
  const relay = relayRules({
    store: r.store(),
    conversations: r.conversations(),
    answers: r.answers(),
    defaults,
    links: mediaLinks(() => 'https://parley.example'),
    approvals: { settle: () => Promise.reject(new Error('no call waits for approval in these rules')) },
  });
  const controller = new AbortController();
  const run: DeploymentRun = {
    deployment: { id: 'deployment', platform: 'telegram', agentId: 'agent', userId: 'owner', sealed: null, cursor: null, version: 'v' },
    secrets: { token: '7:a' },
    connector: listeningPlatform(said),
    signal: controller.signal,
    holds: () => true,
    accepting: () => true,
    revoked: async () => {},
  };
  const answer = (update: ReturnType<Relayed['update']>, saved?: () => void) => relay.answer(run, update, async () => {}, saved);
  return { r, said, answer, run };
}

describe('a message in a chat the deployment answers', () => {
  it('is relayed as its sender’s prompt in the chat’s own session, and the reply carried back to it', async () => {
    const { r, said, answer } = world();
    const first = r.update({ id: '-100', title: 'Book club' }, 'hello');
    await answer(first);
    const second = r.update({ id: '-100', title: 'Book club' }, 'and again', { ref: '43', name: 'Ada' });
    await answer(second);

    expect([...r.sessions.values()]).toEqual([{ ownerId: 'owner', agentId: 'agent', title: 'Book club (telegram)' }]);
    const prompts = [...r.prompts.values()];
    expect(prompts.map((p) => p.text)).toEqual(['hello', 'and again']);
    expect(new Set(prompts.map((p) => p.sessionId)).size).toBe(1);
    // Each person writes as a user of their own, made on first sight.
    expect(prompts[0]!.sender).not.toBe(prompts[1]!.sender);
    expect(said).toEqual([
      { conversation: '-100', kind: 'answer', text: 'You said: hello', replyTo: first.messageRef },
      { conversation: '-100', kind: 'answer', text: 'You said: and again', replyTo: second.messageRef },
    ]);
    expect([r.settled.get(first.id), r.settled.get(second.id)]).toEqual(['answered', 'answered']);
  });

  it('keeps each chat in a session of its own', async () => {
    const { r, answer } = world();
    await answer(r.update({ id: '1' }, 'one'));
    await answer(r.update({ id: '2' }, 'two'));
    expect(r.sessions.size).toBe(2);
    expect(r.chatOf('1')!.sessionId).not.toBe(r.chatOf('2')!.sessionId);
  });

  it('saves the prompt once when the same update is answered again (a restart, another instance)', async () => {
    const { r, said, answer } = world();
    const update = r.update({ id: '1' }, 'hello');
    await answer(update);
    await answer(update);
    expect(r.prompts.size).toBe(1);
    // Answered again is not counted again against the chat's pace.
    expect(r.chatOf('1')!.windowCount).toBe(1);
    expect(said.filter((s) => s.kind === 'answer')).toHaveLength(2);
  });

  it('asks again a prompt whose reply a stop cut, before the chat’s next message may be saved', async () => {
    const { r, said, answer } = world();
    const cut = { status: 'failed' as const, content: 'Once upon a', error: 'The server stopped', toolCalls: [], interrupted: true };
    r.reply = () => cut;
    const story = r.update({ id: '1' }, 'Tell me a story');
    // The process that saved the prompt stopped in its reply, before it could ask again.
    await expect(answer(story)).rejects.toBeInstanceOf(LeftForLater);
    r.reply = (text) => ({ status: 'complete', content: `Told: ${text}`, error: null, toolCalls: [], interrupted: false });
    r.retries = true;
    const promptsWhenSaved: string[][] = [];
    await answer(story, () => promptsWhenSaved.push([...r.prompts.values()].map((p) => p.reply.content)));
    expect(promptsWhenSaved[0]).toEqual(['Once upon a', 'Told: Tell me a story']);
    expect(said.map((s) => s.text)).toEqual(['Told: Tell me a story']);
    expect(r.settled.get(story.id)).toBe('answered');
  });

  it('goes on in a new session when the owner deleted the chat’s', async () => {
    const { r, answer } = world();
    await answer(r.update({ id: '1' }, 'one'));
    const gone = r.chatOf('1')!.sessionId!;
    r.sessions.delete(gone);
    await answer(r.update({ id: '1' }, 'two'));
    expect(r.chatOf('1')!.sessionId).not.toBe(gone);
    expect(r.prompts.get('prompt-2')!.sessionId).toBe(r.chatOf('1')!.sessionId);
  });

  it('shows why a reply failed, and the links to what its tools made', async () => {
    const { r, said, answer } = world();
    r.reply = () => ({ status: 'failed', content: '', error: 'the model is unavailable', toolCalls: [], interrupted: false });
    await answer(r.update({ id: '1' }, 'one'));
    r.reply = () => ({
      status: 'complete',
      content: 'Here it is.',
      error: null,
      toolCalls: [{ status: 'completed', result: { url: '/media/fox.png' } }],
      interrupted: false,
    });
    await answer(r.update({ id: '1' }, 'a fox'));
    expect(said.map((s) => s.text)).toEqual([
      'Sorry, I could not answer: the model is unavailable',
      'Here it is.\n\nhttps://parley.example/media/fox.png',
    ]);
    expect([...r.settled.values()]).toEqual(['failed', 'answered']);
  });

  it('leaves the message for later while the deployment is stopped or its secrets refused', async () => {
    const { r, said, answer } = world();
    r.context.running = false;
    await expect(answer(r.update({ id: '1' }, 'one'))).rejects.toBeInstanceOf(LeftForLater);
    r.context.running = true;
    r.context.valid = false;
    await expect(answer(r.update({ id: '1' }, 'two'))).rejects.toBeInstanceOf(LeftForLater);
    expect([r.prompts.size, said.length, r.settled.size]).toEqual([0, 0, 0]);
  });
});

describe('who may write', () => {
  it('answers only in the chats the allowlist names, telling another chat once a day and relaying nothing from it', async () => {
    const { r, said, answer } = world();
    r.context.config = { telegram: { topic_allowlist: [{ id: '-100' }] } };
    const outside = [r.update({ id: '-200' }, 'hi'), r.update({ id: '-200' }, 'hi again')];
    for (const update of outside) await answer(update);
    await answer(r.update({ id: '-100' }, 'hello'));

    expect(said.map((s) => [s.conversation, s.kind, s.text])).toEqual([
      ['-200', 'notice', 'This bot does not answer in this chat.'],
      ['-100', 'answer', 'You said: hello'],
    ]);
    expect(outside.map((u) => r.settled.get(u.id))).toEqual(['refused', 'refused']);
    expect([...r.prompts.values()].map((p) => p.text)).toEqual(['hello']);
  });

  it('answers in every chat when the allowlist is empty', async () => {
    const { r, said, answer } = world();
    r.context.config = { telegram: { topic_allowlist: [] } };
    await answer(r.update({ id: '-300' }, 'hello'));
    expect(said.map((s) => s.kind)).toEqual(['answer']);
  });
});

describe('the pace of a chat', () => {
  it('answers at most the deployment’s rate a minute in one chat, telling it once, while other chats go on', async () => {
    const { r, said, answer } = world();
    r.context.config = { chat_messages_per_minute: 2 };
    const busy = Array.from({ length: 4 }, (_, i) => r.update({ id: '1' }, `m${i}`));
    for (const update of busy) await answer(update);
    await answer(r.update({ id: '2' }, 'meanwhile'));

    expect(busy.map((u) => r.settled.get(u.id))).toEqual(['answered', 'answered', 'refused', 'refused']);
    expect(said.filter((s) => s.kind === 'notice')).toEqual([
      {
        conversation: '1',
        kind: 'notice',
        text: 'Too many messages: I answer at most 2 a minute in this chat. Please wait a moment.',
        replyTo: busy[2]!.messageRef,
      },
    ]);
    expect([...r.prompts.values()].map((p) => p.text)).toEqual(['m0', 'm1', 'meanwhile']);
  });

  it('takes the service’s rate when the deployment sets none', async () => {
    const { r, answer } = world({ dailyMannaCap: 100, chatMessagesPerMinute: 1 });
    const updates = [r.update({ id: '1' }, 'a'), r.update({ id: '1' }, 'b')];
    for (const update of updates) await answer(update);
    expect(updates.map((u) => r.settled.get(u.id))).toEqual(['answered', 'refused']);
  });
});

describe('the daily cap', () => {
  it('refuses every chat once the day’s manna reached the cap, telling each once, until midnight (UTC)', async () => {
    const { r, said, answer } = world();
    r.context.config = { daily_manna_cap: 10 };
    r.spent = 9.5;
    await answer(r.update({ id: '1' }, 'under the cap'));
    r.spent = 10;
    const over = [r.update({ id: '1' }, 'a'), r.update({ id: '1' }, 'b'), r.update({ id: '2' }, 'c')];
    for (const update of over) await answer(update);

    expect(over.map((u) => r.settled.get(u.id))).toEqual(['refused', 'refused', 'refused']);
    const cap = "I have reached today's limit here and will answer again after midnight (UTC).";
    expect(said.map((s) => [s.conversation, s.kind, s.text])).toEqual([
      ['1', 'answer', 'You said: under the cap'],
      ['1', 'notice', cap],
      ['2', 'notice', cap],
    ]);
    expect(r.prompts.size).toBe(1);
    // Refused before counting: the chat's pace is not spent on messages the cap turned away.
    expect(r.chatOf('1')!.windowCount).toBe(1);
    const until = r.chatOf('1')!.notices.get('cap')!;
    expect(new Date(until).toISOString()).toMatch(/T00:00:00\.000Z$/);
    expect(until - Date.now()).toBeLessThanOrEqual(24 * 60 * 60 * 1000);
  });

  it('takes the service’s cap when the deployment sets none, and none is no answer at all', async () => {
    const { r, answer } = world({ dailyMannaCap: 0, chatMessagesPerMinute: 3 });
    const update = r.update({ id: '1' }, 'a');
    await answer(update);
    expect(r.settled.get(update.id)).toBe('refused');
  });
});

describe('what of a stranger’s message is kept', () => {
  const message = (text: string, title = 'Club', name = 'Grace'): InboundMessage => ({
    eventId: '1',
    conversation: { id: '-1', title, kind: 'group' },
    messageRef: '10',
    sender: { ref: '42', name },
    text,
  });

  it('drops NUL from the text and keeps the rest as written', () => {
    expect(recordable(message('a\u0000b\n\tc 🦊'))).toEqual(message('ab\n\tc 🦊'));
  });

  it('skips, with why, a message with no text left to answer', () => {
    expect(recordable(message('\u0000 \n'))).toMatchObject({ skipped: SKIPPED.empty });
    expect(recordable(message(''))).toMatchObject({ skipped: SKIPPED.empty });
  });

  it('makes titles and names one line without control characters, bounded, or a stand-in when nothing is left', () => {
    const made = recordable(message('hi', `Book\u0000\nclub${'!'.repeat(200)}`, '\u0007Ada\r\n'));
    expect(made.conversation.title).toBe(`Bookclub${'!'.repeat(120)}`);
    expect(made.sender.name).toBe('Ada');
    expect(made.skipped).toBeUndefined();
    const blank = recordable(message('hi', '\u0000\u0001', '  '));
    expect([blank.conversation.title, blank.sender.name]).toEqual(['Untitled chat', 'Someone']);
  });
});
