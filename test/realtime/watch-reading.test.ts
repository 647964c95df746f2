import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { EventsConfig } from '../../src/config.ts';
import { type BusItem, isStreamEnd } from '../../src/domain/core/bus.ts';
import type { SessionEvent } from '../../src/domain/core/events.ts';
import { type WatchEnd, type WatchItem, type WatchStep, type WatchStream, watchStream } from '../../src/domain/core/watch.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';

/**
 * A watch read as a REST stream reads it (what is here already by `poll`, a wait by `woken`,
 * the rest by `next()`) yields what iterating it yields: the same events filtered the same way,
 * each held until admitted, the same end, whether events come one by one or several at once.
 */
const config: EventsConfig = {
  replayLimit: 1000,
  replayBytes: 1 << 24,
  idleTtlMs: 60_000,
  streamBufferBytes: 1 << 20,
  slowClientMs: 30_000,
  heartbeatMs: 15_000,
  accessRecheckMs: 2_000,
};
const bus = createMemoryBus(config);
afterAll(() => bus.close());

const token = (n: number) => ({ type: 'assistant_token' as const, promptId: 'p', messageId: 'm', agentId: 'a', text: `t${n}` });
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const REVOKED: WatchEnd = { end: true, code: 'ACCESS_REVOKED', reason: 'gone', lastSeq: null };

/** Tokens and the end of the prompt pass; a renamed session does not; the end of the prompt stops the watch. */
const step = (item: BusItem): WatchStep => {
  if (isStreamEnd(item)) return { emit: item, stop: true };
  if (item.type === 'session_updated') return {};
  return { emit: item, stop: item.type === 'end_prompt' };
};

/** A watch whose every `holdEvery`th event waits `holdMs` to be admitted. */
function watch(sessionId: string, after: number, holdEvery: number, holdMs: number) {
  let asked = 0;
  return watchStream<SessionEvent>(bus.subscribe(sessionId, { after }), step, undefined, () =>
    ++asked % holdEvery === 0 ? pause(holdMs).then(() => {}) : null,
  );
}

async function iterate(w: WatchStream) {
  const items: WatchItem[] = [];
  for await (const item of w) items.push(item);
  return items;
}

async function byPoll(w: WatchStream) {
  const items: WatchItem[] = [];
  for (;;) {
    let item = w.poll();
    if (item === null) {
      await w.woken();
      continue;
    }
    if (item === undefined) {
      const r = await w.next();
      if (r.done) break;
      item = r.value;
    }
    items.push(item);
  }
  return items;
}

const shown = (items: WatchItem[]) => items.map((i) => ('end' in i ? `end:${i.code}` : 'text' in i ? i.text : i.type));

describe('reading a watch as it comes', () => {
  it('yields what iterating yields: filtered, admitted in order, stopped by the end of the prompt', async () => {
    const session = randomUUID();
    const first = await bus.publish(session, { type: 'session_updated', title: null, scenario: null });
    const watches = [watch(session, first.seq, 7, 10), watch(session, first.seq, 7, 10)];
    const reading = [byPoll(watches[0]!), iterate(watches[1]!)];
    const expected: string[] = [];
    for (let i = 0; i < 20; i++) {
      await bus.publish(session, token(i));
      expected.push(`t${i}`);
      if (i === 10) await bus.publish(session, { type: 'session_updated', title: 'renamed', scenario: null });
      if (i % 4 === 0) await pause(3);
    }
    await Promise.all(Array.from({ length: 20 }, (_, i) => bus.publish(session, token(20 + i))));
    expected.push(...Array.from({ length: 20 }, (_, i) => `t${20 + i}`));
    await bus.publish(session, { type: 'end_prompt', promptId: 'p' });
    await bus.publish(session, token(99));
    const [polled, iterated] = await Promise.all(reading);
    expect(shown(polled!)).toEqual([...expected, 'end_prompt']);
    expect(shown(iterated!)).toEqual(shown(polled!));
  });

  it('ends with the interruption, whether the reader waits for an event or for one to be admitted', async () => {
    for (const waitingFor of ['an event', 'admission'] as const) {
      const session = randomUUID();
      const first = await bus.publish(session, { type: 'session_updated', title: null, scenario: null });
      // Waiting for admission: the third event is held 50 ms, and the interruption comes meanwhile.
      const holdEvery = waitingFor === 'admission' ? 3 : 1_000;
      const watches = [watch(session, first.seq, holdEvery, 50), watch(session, first.seq, holdEvery, 50)];
      const reading = [byPoll(watches[0]!), iterate(watches[1]!)];
      for (let i = 0; i < 3; i++) await bus.publish(session, token(i));
      await pause(10);
      for (const w of watches) w.interrupt(REVOKED);
      const [polled, iterated] = await Promise.all(reading);
      const shownBefore = waitingFor === 'admission' ? ['t0', 't1'] : ['t0', 't1', 't2'];
      expect(shown(polled!), waitingFor).toEqual([...shownBefore, 'end:ACCESS_REVOKED']);
      expect(shown(iterated!), waitingFor).toEqual(shown(polled!));
    }
  });
});
