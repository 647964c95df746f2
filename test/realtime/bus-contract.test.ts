import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventsConfig } from '../../src/config.ts';
import { type BusItem, type BusSubscription, type EventBus, isStreamEnd, type StreamEnd } from '../../src/domain/core/bus.ts';
import type { SessionEvent } from '../../src/domain/core/events.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { createRedisBus } from '../../src/realtime/redis-bus.ts';
import type { PublisherOptions } from '../../src/realtime/redis-publisher.ts';
import { type RedisServer, startRedis } from '../helpers/redis.ts';

/**
 * One contract, both buses. `peer` is where a second instance would watch: the same bus in
 * process, a second bus on the same Redis (what another instance of parley holds).
 */
interface BusUnderTest {
  bus: EventBus;
  peer: EventBus;
  /** Makes the next event reach the log but not live delivery (a pub/sub message lost in a reconnect). */
  loseLiveDelivery?: (sessionId: string) => Promise<void>;
  /** How many instances listen for the session's live events. */
  listening?: (sessionId: string) => Promise<number>;
  /** How many range reads of the session's log Redis served while `during` ran. */
  rangeReads?: (sessionId: string, during: () => Promise<unknown>) => Promise<number>;
}

const config = (replayLimit: number, replayBytes = 1 << 24): EventsConfig => ({
  replayLimit,
  replayBytes,
  idleTtlMs: 60_000,
  streamBufferBytes: 1 << 20,
  slowClientMs: 30_000,
  heartbeatMs: 15_000,
  accessRecheckMs: 2_000,
});

let redis: RedisServer | null = null;
const redisUrl = async () => {
  if (process.env.TEST_REDIS_URL) return process.env.TEST_REDIS_URL;
  redis ??= await startRedis();
  return redis.url;
};
const opened: EventBus[] = [];
const raw: Redis[] = [];

const kinds: Record<'memory' | 'redis', (replayLimit: number, replayBytes?: number, leases?: PublisherOptions) => Promise<BusUnderTest>> = {
  async memory(replayLimit, replayBytes) {
    const bus = createMemoryBus(config(replayLimit, replayBytes));
    opened.push(bus);
    return { bus, peer: bus };
  },
  async redis(replayLimit, replayBytes, leases) {
    const url = await redisUrl();
    // A prefix per bus pair: tests sharing one Redis never see each other's sessions.
    const prefix = `contract-${randomUUID()}:`;
    const bus = createRedisBus(url, config(replayLimit, replayBytes), prefix, undefined, leases);
    const peer = createRedisBus(url, config(replayLimit, replayBytes), prefix, undefined, leases);
    opened.push(bus, peer);
    const client = new Redis(url, { keyPrefix: prefix, maxRetriesPerRequest: 1 });
    raw.push(client);
    return {
      bus,
      peer,
      // The event goes into the stream and takes its seq exactly as a publish would, but no
      // pub/sub message announces it.
      async loseLiveDelivery(sessionId) {
        const seq = await client.incr(`parley:seq:{${sessionId}}`);
        const json = JSON.stringify({ type: 'end_prompt', promptId: 'lost', at: new Date().toISOString() });
        await client.xadd(`parley:events:{${sessionId}}`, `${seq}-0`, 'e', json);
      },
      // Counted from what Redis executes (MONITOR), between two marks this client sends, and for
      // this session's log only: other tests share the Redis and read logs of their own meanwhile.
      async rangeReads(sessionId, during) {
        const monitor = await client.monitor();
        try {
          const mark = `window-${randomUUID()}`;
          let marks = 0;
          let reads = 0;
          const closed = new Promise<void>((resolve) =>
            monitor.on('monitor', (_time: string, args: string[]) => {
              const [command = '', key = ''] = args.map(String);
              if (command.toLowerCase() === 'echo' && key === mark && ++marks === 2) resolve();
              else if (marks === 1 && command.toLowerCase() === 'xrange' && key.includes(sessionId)) reads++;
            }),
          );
          await client.echo(mark);
          await during();
          await client.echo(mark);
          await closed;
          return reads;
        } finally {
          monitor.disconnect();
        }
      },
      async listening(sessionId) {
        const [, count] = (await client.pubsub('NUMSUB', `parley:live:${sessionId}`)) as [string, number];
        return count;
      },
    };
  },
};

afterAll(async () => {
  await Promise.all(opened.map((b) => b.close()));
  for (const c of raw) c.disconnect();
  await redis?.stop();
});

const prompt = (n: number) => ({ type: 'end_prompt' as const, promptId: `p${n}` });
/** A piece of a reply, what a streaming reply publishes many of a second. */
const token = (n: number) => ({ type: 'assistant_token' as const, promptId: 'p', messageId: 'm', agentId: 'a', text: `t${n}` });

async function publishMany(bus: EventBus, sessionId: string, count: number, from = 0): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for (let i = 0; i < count; i++) events.push(await bus.publish(sessionId, prompt(from + i)));
  return events;
}

/** Reads `count` items, or fewer if the subscription ends. */
async function take(sub: BusSubscription, count: number): Promise<BusItem[]> {
  const items: BusItem[] = [];
  while (items.length < count) {
    const r = await sub.next();
    if (r.done) break;
    items.push(r.value);
    if (isStreamEnd(r.value)) break;
  }
  return items;
}

/** Reads as a REST stream does: what is here already by `poll`, a wait by `woken`, the rest by `next()`. */
async function takeByPoll(sub: BusSubscription, count: number): Promise<BusItem[]> {
  const items: BusItem[] = [];
  while (items.length < count) {
    const event = sub.poll!();
    if (event === null) {
      await sub.woken!();
      continue;
    }
    if (event !== undefined) {
      items.push(event);
      continue;
    }
    const r = await sub.next();
    if (r.done) break;
    items.push(r.value);
    if (isStreamEnd(r.value)) break;
  }
  return items;
}

/**
 * A watch on `on` that starts right after a first event of the session. Across instances
 * "subscribe now" races with a publish on another connection, so positions are explicit.
 */
async function watchFrom(publisher: EventBus, on: EventBus, sessionId: string) {
  const [watch] = await watchesFrom(publisher, [on], sessionId);
  return watch;
}

/** Watches on each of `on`, all from right after the same first event. */
async function watchesFrom<const T extends EventBus[]>(publisher: EventBus, on: T, sessionId: string) {
  const first = await publisher.publish(sessionId, { type: 'session_updated', title: null, scenario: null });
  return on.map((bus) => bus.subscribe(sessionId, { after: first.seq })) as { [K in keyof T]: BusSubscription };
}

const seqs = (items: BusItem[]) => items.map((i) => (isStreamEnd(i) ? `end:${i.code}` : i.seq));
const promptIds = (items: BusItem[]) => items.map((i) => (isStreamEnd(i) ? `end:${i.code}` : 'promptId' in i ? i.promptId : i.type));
const texts = (items: BusItem[]) => items.map((i) => (isStreamEnd(i) ? `end:${i.code}` : 'text' in i ? i.text : i.type));

for (const [kind, make] of Object.entries(kinds)) {
  describe(`event bus contract: ${kind}`, () => {
    let b: BusUnderTest;
    beforeAll(async () => {
      b = await make(100);
    });

    it('delivers every event once, in publish order, with consecutive seqs, to watchers here and on a peer', async () => {
      const session = randomUUID();
      const here = await watchFrom(b.bus, b.bus, session);
      const there = await watchFrom(b.bus, b.peer, session);
      await take(here, 1);
      const published = await publishMany(b.bus, session, 30);
      for (let i = 1; i < published.length; i++) expect(published[i]!.seq).toBe(published[i - 1]!.seq + 1);
      for (const sub of [here, there]) {
        const got = await take(sub, 30);
        expect(seqs(got)).toEqual(published.map((e) => e.seq));
        expect(promptIds(got)).toEqual(published.map((e) => (e as { promptId: string }).promptId));
        sub.close();
      }
    });

    it("streams a reply's tokens in order to watchers here and on a peer, and a peer's event among them gets through while they flow", async () => {
      // Room in the logs for every token: the watchers read only once the loop is done.
      const roomy = await make(100_000);
      const session = randomUUID();
      const [here, there] = await watchesFrom(roomy.bus, [roomy.bus, roomy.peer], session);
      const tokens: Promise<SessionEvent>[] = [];
      let renamed: SessionEvent | null = null;
      for (let i = 0; renamed === null || i < 60; i++) {
        // The peer publishes while this instance streams, faster than Redis answers, and is not
        // kept waiting for the reply's end.
        if (i === 20_000) throw new Error("the peer's event did not get through while the tokens flowed");
        tokens.push(roomy.bus.publish(session, token(i)));
        if (i === 20)
          void roomy.peer.publish(session, { type: 'session_updated', title: 'renamed', scenario: null }).then((e) => (renamed = e));
        await new Promise(setImmediate);
      }
      const published = [...(await Promise.all(tokens)), renamed!].sort((x, y) => x.seq - y.seq);
      expect(published.map((e) => e.seq)).toEqual(published.map((_, i) => published[0]!.seq + i));
      expect(texts(published).filter((t) => t !== 'session_updated')).toEqual(tokens.map((_, i) => `t${i}`));
      for (const sub of [here, there]) {
        const got = await take(sub, published.length);
        expect(seqs(got)).toEqual(seqs(published));
        expect(texts(got)).toEqual(texts(published));
        sub.close();
      }
    });

    it('starts a subscription without `after` at the next event, not at earlier ones', async () => {
      const session = randomUUID();
      await publishMany(b.bus, session, 3);
      const sub = b.bus.subscribe(session);
      const [next] = await publishMany(b.bus, session, 1, 3);
      expect(seqs(await take(sub, 1))).toEqual([next!.seq]);
      sub.close();
    });

    it('resumes after any seq it issued with exactly the events that followed, then goes on live', async () => {
      const session = randomUUID();
      const published = await publishMany(b.bus, session, 12);
      const subs = published.map((from) => b.peer.subscribe(session, { after: from.seq }));
      for (const [i, sub] of subs.entries()) {
        const rest = published.slice(i + 1).map((e) => e.seq);
        expect(seqs(await take(sub, rest.length))).toEqual(rest);
      }
      const [live] = await publishMany(b.bus, session, 1, 12);
      for (const sub of subs) {
        expect(seqs(await take(sub, 1))).toEqual([live!.seq]);
        sub.close();
      }
    });

    it('gives the position now, from which a subscription on any instance misses nothing published after', async () => {
      const session = randomUUID();
      const before = await publishMany(b.bus, session, 2);
      const at = await b.peer.position(session);
      expect(at).toBe(before.at(-1)!.seq);
      const later = await publishMany(b.bus, session, 3, 2);
      const sub = b.peer.subscribe(session, { after: at });
      expect(seqs(await take(sub, 3))).toEqual(later.map((e) => e.seq));
      expect(await b.bus.position(session)).toBe(later.at(-1)!.seq);
      sub.close();
    });

    it('ends a resume from a seq it never issued with EVENTS_EXPIRED and that seq', async () => {
      const session = randomUUID();
      const [last] = await publishMany(b.bus, session, 1);
      const sub = b.peer.subscribe(session, { after: last!.seq + 1000 });
      const [end] = await take(sub, 1);
      expect(end).toMatchObject({ end: true, code: 'EVENTS_EXPIRED', lastSeq: last!.seq + 1000 });
      expect((end as StreamEnd).reason).toMatch(/read the session again/);
      expect((await sub.next()).done).toBe(true);
    });

    it('cuts off a watcher whose next event is gone with SLOW_CONSUMER and the last seq it got', async () => {
      const small = await make(10);
      const session = randomUUID();
      const sub = await watchFrom(small.bus, small.peer, session);
      const published = await publishMany(small.bus, session, 2);
      expect(seqs(await take(sub, 1))).toEqual([published[0]!.seq]);
      // Far more than either log keeps (Redis trims its streams approximately, by whole nodes).
      await publishMany(small.bus, session, 1500, 2);
      // Events still held when it reads again come first (a peer may still be taking events in),
      // never with a hole; then the end, naming the last seq it got.
      const got = await take(sub, 2000);
      const end = got.pop();
      const delivered = seqs(got) as number[];
      expect(delivered).toEqual(delivered.map((_, i) => published[0]!.seq + 1 + i));
      expect(delivered.length).toBeLessThan(1500);
      expect(end).toMatchObject({ end: true, code: 'SLOW_CONSUMER', lastSeq: delivered.at(-1) ?? published[0]!.seq });
      // It can resume from what it still holds only by reading the session again.
      const resumed = small.peer.subscribe(session, { after: published[0]!.seq });
      expect(await take(resumed, 1)).toMatchObject([{ end: true, code: 'EVENTS_EXPIRED' }]);
    });

    it('keeps at most about its byte budget of events, whatever their count: large old events go first', async () => {
      const small = await make(1000, 20_000);
      const session = randomUUID();
      const big = (n: number) => ({ type: 'session_updated' as const, title: `${n}`.padEnd(2_000, '.'), scenario: null });
      const published: SessionEvent[] = [];
      for (let i = 0; i < 50; i++) published.push(await small.bus.publish(session, big(i)));
      // 50 events of 2 KB: 100 KB published, of which at most 20 KB are kept.
      const early = small.peer.subscribe(session, { after: published[0]!.seq });
      expect(await take(early, 1)).toMatchObject([{ end: true, code: 'EVENTS_EXPIRED' }]);
      const recent = small.peer.subscribe(session, { after: published[44]!.seq });
      expect(seqs(await take(recent, 5))).toEqual(published.slice(45).map((e) => e.seq));
      await recent.return?.();
    });

    it('frees a subscription at once when its consumer lets go, even while it waits', async () => {
      const session = randomUUID();
      const before = b.peer.subscriberCount();
      const sub = b.peer.subscribe(session);
      expect(b.peer.subscriberCount()).toBe(before + 1);
      const pending = sub.next();
      await sub.return!();
      expect(await pending).toEqual({ value: undefined, done: true });
      expect(b.peer.subscriberCount()).toBe(before);
    });

    it('tells every instance, this one included, of a revoked key and of cancelled replies', async () => {
      const keys: string[] = [];
      const cancels: string[] = [];
      const stops = [b.bus, b.peer].flatMap((bus, i) => [
        bus.onKeyRevoked((k) => keys.push(`${i}:${k}`)),
        bus.onCancelReplies((c) => cancels.push(`${i}:${c.sessionId}:${c.promptId}:${c.reason}`)),
      ]);
      await b.bus.revokeKey('key-1');
      await b.peer.cancelReplies({ sessionId: 's', promptId: 'p', reason: 'cancelled' });
      const expected = b.bus === b.peer ? { keys: ['0:key-1', '1:key-1'], cancels: ['0:s:p:cancelled', '1:s:p:cancelled'] } : null;
      await expect.poll(() => [...keys].sort()).toEqual(expected?.keys ?? ['0:key-1', '1:key-1']);
      await expect.poll(() => [...cancels].sort()).toEqual(expected?.cancels ?? ['0:s:p:cancelled', '1:s:p:cancelled']);
      for (const stop of stops) stop();
      await b.bus.revokeKey('key-2');
      // A listener that was removed hears nothing more; the local signal is synchronous.
      expect(keys.filter((k) => k.endsWith('key-2'))).toEqual([]);
    });

    if (kind === 'redis') {
      it('shows the instance streaming a reply each token at once, before Redis has stored it; a peer gets it from Redis', async () => {
        const session = randomUUID();
        const [here, there] = await watchesFrom(b.bus, [b.bus, b.peer], session);
        // The first token asks Redis to let this instance number the session's next events.
        const [first] = await Promise.all([b.bus.publish(session, token(0)), take(here, 1), take(there, 1)]);
        let stored = false;
        const second = b.bus.publish(session, token(1)).then((e) => {
          stored = true;
          return e;
        });
        const [shown] = await take(here, 1);
        expect(stored).toBe(false);
        expect(shown).toMatchObject({ seq: first!.seq + 1, text: 't1' });
        expect(await b.bus.position(session)).toBe(first!.seq + 1);
        // A client moving to the peer at once resumes from what it was shown, stored or not yet.
        const moved = b.peer.subscribe(session, { after: first!.seq + 1 });
        const third = b.bus.publish(session, token(2));
        expect(texts(await take(moved, 1))).toEqual(['t2']);
        moved.close();
        expect((await second).seq).toBe(first!.seq + 1);
        expect(await take(there, 2)).toMatchObject([
          { seq: first!.seq + 1, text: 't1' },
          { seq: first!.seq + 2, text: 't2' },
        ]);
        expect(await b.peer.position(session)).toBe((await third).seq);
        here.close();
        there.close();
      });

      it('an instance that stops confirming a session it numbers: after its lease runs out the next event skips past its numbers, watchers carry on, its own watchers are told', async () => {
        // "gone": this instance never hands its lease back while idle, and its lease runs out fast.
        const pair = await make(100, undefined, { leaseMs: 300, leaseIdleMs: 60_000 });
        const session = randomUUID();
        const [mine, elsewhere] = await watchesFrom(pair.bus, [pair.bus, pair.peer], session);
        const streamed = [];
        for (let i = 0; i < 5; i++) streamed.push(await pair.bus.publish(session, token(i)));
        await take(mine, 5);
        const last = streamed.at(-1)!.seq;
        // The peer waits out the lease, then numbers past anything the holder may have shown unstored.
        const renamed = await pair.peer.publish(session, { type: 'session_updated', title: 'after', scenario: null });
        expect(renamed.seq).toBeGreaterThan(last + 1);
        expect(texts(await take(elsewhere, 6))).toEqual(['t0', 't1', 't2', 't3', 't4', 'session_updated']);
        // Resuming works from the last number stored, not from one that never was.
        expect(seqs(await take(pair.peer.subscribe(session, { after: last }), 1))).toEqual([renamed.seq]);
        expect(await take(pair.peer.subscribe(session, { after: last + 1 }), 1)).toMatchObject([{ end: true, code: 'EVENTS_EXPIRED' }]);
        // The old holder numbers one more itself: Redis refuses it, and its watchers are told to
        // read the session again (before what they were shown and not yet read).
        await expect(pair.bus.publish(session, token(5))).rejects.toThrow(/numbered elsewhere/);
        // A new watcher there (while the old one has its end still unread) waits for the next
        // event without reading the log over and over.
        const waiting = pair.bus.subscribe(session);
        const nextItem = waiting.next();
        expect(await take(mine, 10)).toMatchObject([{ end: true, code: 'EVENTS_EXPIRED' }]);
        const reads = await pair.rangeReads!(session, () => new Promise((resolve) => setTimeout(resolve, 200)));
        // Nothing is published meanwhile, so nothing needs reading; a watcher reading in a loop makes hundreds.
        expect(reads).toBeLessThan(3);
        // What it publishes next skips past the number it showed; the watcher elsewhere carries on.
        const next = await pair.bus.publish(session, token(6));
        expect(await nextItem).toMatchObject({ value: { text: 't6' } });
        waiting.close();
        expect(next.seq).toBeGreaterThan(renamed.seq + 1);
        expect(texts(await take(elsewhere, 1))).toEqual(['t6']);
        const anew = pair.bus.subscribe(session, { after: renamed.seq });
        expect(texts(await take(anew, 1))).toEqual(['t6']);
        anew.close();
        elsewhere.close();
      });

      it('stores everything an instance numbered before it closes, and hands its lease back: the next instance carries on from there', async () => {
        const pair = await make(100_000);
        const session = randomUUID();
        const [elsewhere] = await watchesFrom(pair.bus, [pair.peer], session);
        await pair.bus.publish(session, token(0));
        // Published and shown, some on their way to Redis and some not yet sent, when the
        // instance is told to stop.
        const tokens = Array.from({ length: 100 }, (_, i) => pair.bus.publish(session, token(i + 1)));
        await new Promise(setImmediate);
        tokens.push(...Array.from({ length: 100 }, (_, i) => pair.bus.publish(session, token(i + 101))));
        await pair.bus.close();
        const stored = await Promise.all(tokens);
        const next = await pair.peer.publish(session, { type: 'session_updated', title: 'after', scenario: null });
        expect(next.seq).toBe(stored.at(-1)!.seq + 1);
        const got = await take(elsewhere, 202);
        expect(texts(got)).toEqual([...Array.from({ length: 201 }, (_, i) => `t${i}`), 'session_updated']);
        expect(seqs(got)).toEqual(got.map((_, i) => (got[0] as SessionEvent).seq + i));
        elsewhere.close();
      });

      it('stops listening for a session once its last watcher has left and the lease is handed back', async () => {
        const pair = await make(100, undefined, { leaseIdleMs: 100 });
        const session = randomUUID();
        const watcher = await watchFrom(pair.bus, pair.bus, session);
        for (let i = 0; i < 3; i++) await pair.bus.publish(session, token(i));
        expect(await pair.listening!(session)).toBe(1);
        watcher.close();
        // Kept while the lease is held (a watcher resuming here finds what Redis may not have yet), then let go.
        await expect.poll(() => pair.listening!(session), { timeout: 3_000 }).toBe(0);
      });

      it('fills a gap left by a lost live message from the log, in order', async () => {
        const session = randomUUID();
        const sub = await watchFrom(b.bus, b.peer, session);
        const [first] = await publishMany(b.bus, session, 1);
        await b.loseLiveDelivery!(session);
        const [third] = await publishMany(b.bus, session, 1, 2);
        const got = await take(sub, 3);
        expect(seqs(got)).toEqual([first!.seq, first!.seq + 1, third!.seq]);
        expect(promptIds(got)).toEqual(['p0', 'lost', 'p2']);
        sub.close();
      });
    }

    it('gives a reader that takes events as they come (poll, else woken or next) what one that iterates gets, here and on a peer, to the end', async () => {
      const own = await make(100);
      const session = randomUUID();
      const [polled, iterated, there] = await watchesFrom(own.bus, [own.bus, own.bus, own.peer], session);
      const reading = [takeByPoll(polled, 60), take(iterated, 60), takeByPoll(there, 60)];
      const published: SessionEvent[] = [];
      // Tokens one at a time with pauses (readers wait for each), then a burst (readers find several at once).
      for (let i = 0; i < 30; i++) {
        published.push(await own.bus.publish(session, token(i)));
        if (i % 5 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      published.push(...(await Promise.all(Array.from({ length: 30 }, (_, i) => own.bus.publish(session, token(30 + i))))));
      for (const got of await Promise.all(reading)) {
        expect(seqs(got)).toEqual(seqs(published));
        expect(texts(got)).toEqual(texts(published));
      }
      await Promise.all([own.bus.close(), own.peer.close()]);
      const last = published.at(-1)!.seq;
      for (const sub of [polled, there]) {
        expect(await takeByPoll(sub, 1)).toMatchObject([{ end: true, code: 'SHUTTING_DOWN', lastSeq: last }]);
        expect(sub.poll!()).toBeUndefined();
        expect((await sub.next()).done).toBe(true);
      }
    });

    it('on close, ends every subscription with SHUTTING_DOWN after the last event it got, and refuses new ones the same way', async () => {
      const own = await make(100);
      const session = randomUUID();
      const sub = await watchFrom(own.bus, own.bus, session);
      const [event] = await publishMany(own.bus, session, 1);
      expect(seqs(await take(sub, 1))).toEqual([event!.seq]);
      await own.bus.close();
      expect(await take(sub, 1)).toMatchObject([{ end: true, code: 'SHUTTING_DOWN', lastSeq: event!.seq }]);
      expect((await sub.next()).done).toBe(true);
      const late = own.bus.subscribe(session);
      expect(await take(late, 1)).toMatchObject([{ end: true, code: 'SHUTTING_DOWN' }]);
      expect(own.bus.subscriberCount()).toBe(0);
    });
  });
}
