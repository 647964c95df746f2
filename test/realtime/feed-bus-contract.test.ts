import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventsConfig } from '../../src/config.ts';
import {
  type BusItem,
  type BusSubscription,
  type EventBus,
  isStreamEnd,
  type Numbered,
  type StreamEnd,
} from '../../src/domain/core/bus.ts';
import type { FeedEvent, FeedEventPayload } from '../../src/domain/core/feed-events.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { createRedisBus } from '../../src/realtime/redis-bus.ts';
import type { PublisherOptions } from '../../src/realtime/redis-publisher.ts';
import { type RedisServer, startRedis } from '../helpers/redis.ts';

/**
 * Users' feeds carry the same guarantees as sessions (`bus-contract.test.ts`), on both buses:
 * numbered and ordered, resumable, bounded, slow consumers cut off, shared across instances
 * through Redis. `peer` is where a second instance would watch.
 */
interface BusUnderTest {
  bus: EventBus;
  peer: EventBus;
  /** Makes the next event of a feed reach the log but not live delivery (a pub/sub message lost in a reconnect). */
  loseLiveDelivery?: (userId: string) => Promise<void>;
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
    // A prefix per bus pair: tests sharing one Redis never see each other's feeds.
    const prefix = `feed-contract-${randomUUID()}:`;
    const bus = createRedisBus(url, config(replayLimit, replayBytes), prefix, undefined, leases);
    const peer = createRedisBus(url, config(replayLimit, replayBytes), prefix, undefined, leases);
    opened.push(bus, peer);
    const client = new Redis(url, { keyPrefix: prefix, maxRetriesPerRequest: 1 });
    raw.push(client);
    return {
      bus,
      peer,
      // Into the feed's own log, with its seq, exactly as a publish would; no pub/sub message.
      async loseLiveDelivery(userId) {
        const seq = await client.incr(`parley:feed:seq:{${userId}}`);
        const json = JSON.stringify({ type: 'task_cancelled', taskId: 'lost', at: new Date().toISOString() });
        await client.xadd(`parley:feed:events:{${userId}}`, `${seq}-0`, 'e', json);
      },
    };
  },
};

afterAll(async () => {
  await Promise.all(opened.map((b) => b.close()));
  for (const c of raw) c.disconnect();
  await redis?.stop();
});

const created = (n: number): FeedEventPayload => ({
  type: 'task_created',
  taskId: `t${n}`,
  task: {
    id: `t${n}`,
    tool: 'flux',
    outputType: 'image',
    status: 'pending',
    cost: 5,
    agentId: null,
    sessionId: null,
    createdAt: new Date(0).toISOString(),
  },
});
const progress = (taskId: string, value: number): FeedEventPayload => ({ type: 'task_progress', taskId, progress: value, message: null });

async function publishMany(bus: EventBus, userId: string, count: number, from = 0): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  for (let i = 0; i < count; i++) events.push(await bus.feeds.publish(userId, created(from + i)));
  return events;
}

/** Reads `count` items, or fewer if the subscription ends. */
async function take<E extends Numbered>(sub: BusSubscription<E>, count: number): Promise<BusItem<E>[]> {
  const items: BusItem<E>[] = [];
  while (items.length < count) {
    const r = await sub.next();
    if (r.done) break;
    items.push(r.value);
    if (isStreamEnd(r.value)) break;
  }
  return items;
}

/** Watches on each of `on`, all from right after the same first event (positions are explicit across instances). */
async function watchesFrom<const T extends EventBus[]>(publisher: EventBus, on: T, userId: string) {
  const first = await publisher.feeds.publish(userId, { type: 'task_cancelled', taskId: 'first' });
  return on.map((bus) => bus.feeds.subscribe(userId, { after: first.seq })) as { [K in keyof T]: BusSubscription<FeedEvent> };
}

const seqs = (items: BusItem<Numbered>[]) => items.map((i) => (isStreamEnd(i) ? `end:${i.code}` : i.seq));
const taskIds = (items: BusItem<FeedEvent>[]) => items.map((i) => (isStreamEnd(i) ? `end:${i.code}` : 'taskId' in i ? i.taskId : i.type));

for (const [kind, make] of Object.entries(kinds)) {
  describe(`users' feeds on the event bus: ${kind}`, () => {
    let b: BusUnderTest;
    beforeAll(async () => {
      b = await make(100);
    });

    it('delivers every event once, in publish order, with consecutive seqs and its user, to watchers here and on a peer', async () => {
      const user = randomUUID();
      const [here, there] = await watchesFrom(b.bus, [b.bus, b.peer], user);
      const published = await publishMany(b.bus, user, 30);
      for (let i = 1; i < published.length; i++) expect(published[i]!.seq).toBe(published[i - 1]!.seq + 1);
      for (const sub of [here, there]) {
        const got = await take(sub, 30);
        expect(seqs(got)).toEqual(published.map((e) => e.seq));
        expect(taskIds(got)).toEqual(published.map((_, i) => `t${i}`));
        expect(got.every((e) => !isStreamEnd(e) && e.userId === user)).toBe(true);
        sub.close();
      }
    });

    it("never shows one user's events to another's watchers, nor a session's of the same id", async () => {
      const [alice, bob] = [randomUUID(), randomUUID()];
      const [alicesFeed] = await watchesFrom(b.bus, [b.peer], alice);
      const [bobsFeed] = await watchesFrom(b.bus, [b.peer], bob);
      // A session named like Alice: a channel of the other kind, with its own numbering.
      const session = b.peer.subscribe(alice);
      await b.bus.feeds.publish(bob, created(1));
      await b.bus.publish(alice, { type: 'end_prompt', promptId: 'session-event' });
      const mine = await b.bus.feeds.publish(alice, created(2));
      expect(taskIds(await take(alicesFeed, 1))).toEqual(['t2']);
      expect(taskIds(await take(bobsFeed, 1))).toEqual(['t1']);
      const [fromSession] = await take(session, 1);
      expect(fromSession).toMatchObject({ type: 'end_prompt', sessionId: alice });
      // Alice's feed went on from where it was: the session's event took no number of hers.
      expect(await b.peer.feeds.position(alice)).toBe(mine.seq);
      for (const s of [alicesFeed, bobsFeed, session]) s.close();
    });

    it('streams 1,000 tasks progressing at once, every update in order and none lost, to watchers here and on a peer, with a peer publishing among them', async () => {
      const roomy = await make(100_000);
      const user = randomUUID();
      const [here, there] = await watchesFrom(roomy.bus, [roomy.bus, roomy.peer], user);
      const updates: Promise<FeedEvent>[] = [];
      const steps = [0.2, 0.4, 0.6, 0.8, 1];
      // 1,000 tasks, 5 steps each, interleaved as tasks running side by side report.
      for (const [i, step] of steps.entries()) {
        for (let t = 0; t < 1_000; t++) updates.push(roomy.bus.feeds.publish(user, progress(`t${t}`, step)));
        if (i === 2) updates.push(roomy.peer.feeds.publish(user, { type: 'task_failed', taskId: 'elsewhere', error: 'boom' }));
        await new Promise(setImmediate);
      }
      const published = (await Promise.all(updates)).sort((x, y) => x.seq - y.seq);
      expect(published.map((e) => e.seq)).toEqual(published.map((_, i) => published[0]!.seq + i));
      for (const sub of [here, there]) {
        const got = (await take(sub, published.length)) as FeedEvent[];
        expect(seqs(got)).toEqual(published.map((e) => e.seq));
        // Each task's own updates arrive in the order they were published, none lost.
        const byTask = new Map<string, number[]>();
        for (const e of got) if (e.type === 'task_progress') byTask.set(e.taskId, [...(byTask.get(e.taskId) ?? []), e.progress]);
        expect(byTask.size).toBe(1_000);
        for (const seen of byTask.values()) expect(seen).toEqual(steps);
        expect(got.filter((e) => e.type === 'task_failed')).toHaveLength(1);
        sub.close();
      }
    });

    it('resumes after any seq it issued with exactly the events that followed, and gives the position now', async () => {
      const user = randomUUID();
      const published = await publishMany(b.bus, user, 8);
      expect(await b.peer.feeds.position(user)).toBe(published.at(-1)!.seq);
      const subs = published.map((from) => b.peer.feeds.subscribe(user, { after: from.seq }));
      for (const [i, sub] of subs.entries()) {
        const rest = published.slice(i + 1).map((e) => e.seq);
        expect(seqs(await take(sub, rest.length))).toEqual(rest);
      }
      const [live] = await publishMany(b.bus, user, 1, 8);
      for (const sub of subs) {
        expect(seqs(await take(sub, 1))).toEqual([live!.seq]);
        sub.close();
      }
    });

    it('ends a resume from a seq it never issued with EVENTS_EXPIRED, in words about the feed', async () => {
      const user = randomUUID();
      const [last] = await publishMany(b.bus, user, 1);
      const sub = b.peer.feeds.subscribe(user, { after: last!.seq + 1000 });
      const [end] = await take(sub, 1);
      expect(end).toMatchObject({ end: true, code: 'EVENTS_EXPIRED', lastSeq: last!.seq + 1000 });
      expect((end as StreamEnd).reason).toMatch(/read the current state again/);
      expect((await sub.next()).done).toBe(true);
    });

    it('cuts off a watcher whose next event is gone with SLOW_CONSUMER and the last seq it got', async () => {
      const small = await make(10);
      const user = randomUUID();
      const [sub] = await watchesFrom(small.bus, [small.peer], user);
      const published = await publishMany(small.bus, user, 2);
      expect(seqs(await take(sub, 1))).toEqual([published[0]!.seq]);
      await publishMany(small.bus, user, 1500, 2);
      const got = await take(sub, 2000);
      const end = got.pop();
      const delivered = seqs(got) as number[];
      expect(delivered).toEqual(delivered.map((_, i) => published[0]!.seq + 1 + i));
      expect(delivered.length).toBeLessThan(1500);
      expect(end).toMatchObject({ end: true, code: 'SLOW_CONSUMER', lastSeq: delivered.at(-1) ?? published[0]!.seq });
      expect(await take(small.peer.feeds.subscribe(user, { after: published[0]!.seq }), 1)).toMatchObject([
        { end: true, code: 'EVENTS_EXPIRED' },
      ]);
    });

    it('keeps at most about its byte budget of events, whatever their count', async () => {
      const small = await make(1000, 20_000);
      const user = randomUUID();
      const big = (n: number): FeedEventPayload => ({ type: 'task_failed', taskId: `t${n}`, error: 'x'.repeat(2_000) });
      const published: FeedEvent[] = [];
      for (let i = 0; i < 50; i++) published.push(await small.bus.feeds.publish(user, big(i)));
      expect(await take(small.peer.feeds.subscribe(user, { after: published[0]!.seq }), 1)).toMatchObject([
        { end: true, code: 'EVENTS_EXPIRED' },
      ]);
      const recent = small.peer.feeds.subscribe(user, { after: published[44]!.seq });
      expect(seqs(await take(recent, 5))).toEqual(published.slice(45).map((e) => e.seq));
      recent.close();
    });

    if (kind === 'redis') {
      it('fills a gap left by a lost live message from the log, in order', async () => {
        const user = randomUUID();
        const [sub] = await watchesFrom(b.bus, [b.peer], user);
        const [first] = await publishMany(b.bus, user, 1);
        await b.loseLiveDelivery!(user);
        const [third] = await publishMany(b.bus, user, 1, 2);
        const got = await take(sub, 3);
        expect(seqs(got)).toEqual([first!.seq, first!.seq + 1, third!.seq]);
        expect(taskIds(got)).toEqual(['t0', 'lost', 't2']);
        sub.close();
      });

      it('stores everything an instance published before it closes: the next instance carries on from there, nothing lost', async () => {
        const pair = await make(100_000);
        const user = randomUUID();
        const [elsewhere] = await watchesFrom(pair.bus, [pair.peer], user);
        // Progress takes the feed's lease: the closing instance numbers these itself.
        const updates = Array.from({ length: 100 }, (_, i) => pair.bus.feeds.publish(user, progress('t', i / 100)));
        await new Promise(setImmediate);
        updates.push(...Array.from({ length: 100 }, (_, i) => pair.bus.feeds.publish(user, progress('u', i / 100))));
        await pair.bus.close();
        const stored = await Promise.all(updates);
        const next = await pair.peer.feeds.publish(user, {
          type: 'task_completed',
          taskId: 't',
          result: { url: 'x' },
          outputs: [],
          cost: 5,
        });
        expect(next.seq).toBe(stored.at(-1)!.seq + 1);
        const got = (await take(elsewhere, 201)) as FeedEvent[];
        expect(seqs(got)).toEqual(got.map((_, i) => got[0]!.seq + i));
        expect(got.map((e) => e.type)).toEqual([...Array(200).fill('task_progress'), 'task_completed']);
        elsewhere.close();
      });

      it('carries feeds on the same two connections as sessions, one pub/sub channel per feed watched', async () => {
        // A Redis of its own: the only connections in it are this bus's.
        const lone = await startRedis();
        const client = lone.client();
        const bus = createRedisBus(lone.url, config(100));
        const [user, session] = [randomUUID(), randomUUID()];
        const subs: BusSubscription<Numbered>[] = [bus.feeds.subscribe(user), bus.feeds.subscribe(user), bus.subscribe(session)];
        await bus.feeds.publish(user, created(0));
        await bus.publish(session, { type: 'end_prompt', promptId: 'p' });
        await Promise.all(subs.map((s) => take(s, 1)));
        const list = (await client.client('LIST')) as string;
        expect(list.split('\n').filter((l) => /name=parley:events/.test(l))).toHaveLength(2);
        const [, watchers] = (await client.pubsub('NUMSUB', `parley:feed:live:${user}`)) as [string, number];
        expect(watchers).toBe(1);
        await bus.close();
        await lone.stop();
      });
    }

    it('on close, ends feed subscriptions with SHUTTING_DOWN after the last event they got, and refuses new ones the same way', async () => {
      const own = await make(100);
      const user = randomUUID();
      const [sub] = await watchesFrom(own.bus, [own.bus], user);
      const before = own.bus.subscriberCount();
      const [event] = await publishMany(own.bus, user, 1);
      expect(seqs(await take(sub, 1))).toEqual([event!.seq]);
      await own.bus.close();
      expect(await take(sub, 1)).toMatchObject([{ end: true, code: 'SHUTTING_DOWN', lastSeq: event!.seq }]);
      expect(own.bus.subscriberCount()).toBe(before - 1);
      expect(await take(own.bus.feeds.subscribe(user), 1)).toMatchObject([{ end: true, code: 'SHUTTING_DOWN' }]);
    });
  });
}
