import { describe, expect, it } from 'vitest';
import type { MessageView, SessionEventPayload } from '../../src/domain/core/events.ts';
import { promptOutcomes } from '../../src/domain/replies/outcome.ts';
import type { PromptOutcome, SavedReply } from '../../src/domain/replies/ports.ts';
import { ABANDONED_REPLY } from '../../src/domain/replies/recovery.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';

// The one wait for a prompt's replies (a deployment's chat and a trigger's run both use it), over
// the in-process bus and replies kept in a map: how each way of ending comes out, and the text
// as the watcher is shown it.

const SESSION = 'session-1';
const PROMPT = 'prompt-1';

function harness() {
  const bus = createMemoryBus({
    replayLimit: 1000,
    replayBytes: 1 << 20,
    idleTtlMs: 60_000,
    streamBufferBytes: 1 << 20,
    slowClientMs: 10_000,
    heartbeatMs: 10_000,
    accessRecheckMs: 10_000,
  });
  const saved = new Map<string, PromptOutcome>();
  const reply = (fields: Partial<SavedReply> = {}): SavedReply => ({
    messageId: 'reply-1',
    status: 'streaming',
    content: '',
    error: null,
    toolCalls: [],
    ...fields,
  });
  /** The prompt's reply as the reply engine saves it. */
  const save = (fields: Partial<SavedReply> = {}) => saved.set(PROMPT, { sessionId: SESSION, replies: [reply(fields)] });
  const outcomes = promptOutcomes({ bus, store: { promptOutcome: async (promptId) => saved.get(promptId) ?? null } });
  const publish = (event: SessionEventPayload) => bus.publish(SESSION, event);
  const token = (text: string, promptId = PROMPT): SessionEventPayload => ({
    type: 'assistant_token',
    promptId,
    messageId: 'reply-1',
    agentId: 'agent',
    text,
  });
  return { bus, saved, save, outcomes, publish, token };
}

/** Lets the wait take what was published. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('awaitOutcome: waiting for a prompt replies to end', () => {
  it('shows the text in the order it streamed, only its own prompt, and ends with the completed reply as saved', async () => {
    const t = harness();
    t.save();
    const after = await t.bus.position(SESSION);
    const shown: string[] = [];
    const waiting = t.outcomes.awaitOutcome({
      sessionId: SESSION,
      promptId: PROMPT,
      after,
      onText: (text) => shown.push(text),
      signal: new AbortController().signal,
    });
    await turn();
    await t.publish(t.token('Hel'));
    await t.publish(t.token('not mine', 'prompt-2'));
    await t.publish(t.token('lo'));
    await t.publish({ type: 'assistant_message', promptId: PROMPT, agentId: 'agent', message: { content: 'Hello.' } as MessageView });
    t.save({ status: 'complete', content: 'Hello.' });
    await t.publish({ type: 'end_prompt', promptId: PROMPT });
    const ended = await waiting;
    expect(shown).toEqual(['Hel', 'Hello', 'Hello.']);
    expect(ended).toEqual({
      sessionId: SESSION,
      replies: [expect.objectContaining({ status: 'complete', content: 'Hello.', interrupted: false })],
    });
    expect(t.bus.subscriberCount()).toBe(0);
  });

  it('ends with a failed reply, told apart from one cut off by its process stopping', async () => {
    const t = harness();
    for (const [error, interrupted] of [
      ['The model refused', false],
      [ABANDONED_REPLY, true],
    ] as const) {
      t.save();
      const waiting = t.outcomes.awaitOutcome({
        sessionId: SESSION,
        promptId: PROMPT,
        after: await t.bus.position(SESSION),
        signal: new AbortController().signal,
      });
      await turn();
      t.save({ status: 'failed', error });
      await t.publish({ type: 'end_prompt', promptId: PROMPT });
      expect(await waiting).toEqual({ sessionId: SESSION, replies: [expect.objectContaining({ status: 'failed', error, interrupted })] });
    }
  });

  it('taken over later (no start to follow from): a reply already ended is read at once, and no text is shown', async () => {
    const t = harness();
    t.save({ status: 'cancelled', content: 'Hal' });
    const shown: string[] = [];
    const ended = await t.outcomes.awaitOutcome({
      sessionId: SESSION,
      promptId: PROMPT,
      after: null,
      onText: (text) => shown.push(text),
      signal: new AbortController().signal,
    });
    expect(ended).toEqual({ sessionId: SESSION, replies: [expect.objectContaining({ status: 'cancelled', content: 'Hal' })] });
    expect(shown).toEqual([]);
    expect(t.bus.subscriberCount()).toBe(0);
  });

  it('stops when its signal aborts, with the reply still streaming, and lets go of the session', async () => {
    const t = harness();
    t.save();
    const stop = new AbortController();
    const waiting = t.outcomes.awaitOutcome({
      sessionId: SESSION,
      promptId: PROMPT,
      after: await t.bus.position(SESSION),
      signal: stop.signal,
    });
    await turn();
    expect(t.bus.subscriberCount()).toBe(1);
    stop.abort();
    expect(await waiting).toBe('stopped');
    expect(t.bus.subscriberCount()).toBe(0);
    expect(await t.outcomes.awaitOutcome({ sessionId: SESSION, promptId: PROMPT, after: 0, signal: stop.signal })).toBe('stopped');
  });

  it("says 'gone' when the prompt's session is deleted while it waits", async () => {
    const t = harness();
    t.save();
    const waiting = t.outcomes.awaitOutcome({
      sessionId: SESSION,
      promptId: PROMPT,
      after: await t.bus.position(SESSION),
      signal: new AbortController().signal,
    });
    await turn();
    t.saved.delete(PROMPT);
    await t.publish({ type: 'session_deleted' });
    expect(await waiting).toBe('gone');
  });
});
