import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Numbered } from '../../src/domain/core/bus.ts';
import type { FeedEvent, FeedEventPayload, FeedEventType } from '../../src/domain/core/feed-events.ts';
import type { FeedWatchOptions } from '../../src/domain/feeds/service.ts';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import type { WatchItem, WatchStream } from '../../src/domain/core/watch.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';
import { sessionsOver } from '../helpers/domain-sessions.ts';

/**
 * The domain's watch of a user's own feed (`feeds.watch`), over the API keys' and access stores
 * on a migrated database and the lane's bus, with no app: only the caller's events, narrowed as
 * asked, resumable, one of the key's subscription slots, and ended when the key it was opened
 * with goes, even when no signal says so.
 */
type User = { id: string; username: string; apiKey: string };
const t = domainDatabase();
let services: ReturnType<typeof sessionsOver>;
let bus: EventBus;
let make: Awaited<ReturnType<typeof people>>;
let alice: User;
let bob: User;
const opened: WatchStream<FeedEvent>[] = [];

async function createUser(name: string): Promise<User> {
  const user = await make.user(name);
  return { ...user, apiKey: (await services.apiKeys.create(user.id)).apiKey };
}

beforeAll(async () => {
  const events = { accessRecheckMs: 200 };
  bus = t.bus(events);
  services = sessionsOver(t.db, bus, { limits: { maxSubscriptionsPerKey: 2 }, events });
  make = await people(t.db);
  [alice, bob] = [await createUser('alice'), await createUser('bob')];
});
afterAll(async () => {
  for (const w of opened) w.close();
  services?.stop();
});

const viewerOf = (key: string): Promise<Viewer> => services.apiKeys.authenticate(key);
const publish = (userId: string, payload: FeedEventPayload) => bus.feeds.publish(userId, payload);
const changed = (triggerId: string, status: 'active' | 'paused'): FeedEventPayload => ({
  type: 'trigger_changed',
  triggerId,
  change: 'updated',
  trigger: {
    id: triggerId,
    agentId: 'a',
    name: 'Daily',
    status,
    lastRunTime: null,
    nextScheduledRun: null,
    errorCount: 0,
    lastError: null,
  },
});

async function watch<T extends FeedEventType = FeedEventType>(viewer: Viewer, options: FeedWatchOptions<T> = {}) {
  const w = await services.feeds.watch(viewer, options);
  opened.push(w as WatchStream<FeedEvent>);
  return w;
}

async function take<E extends Numbered>(w: AsyncIterator<WatchItem<E>>, count: number) {
  const items: WatchItem<E>[] = [];
  while (items.length < count) {
    const r = await w.next();
    if (r.done) break;
    items.push(r.value);
  }
  return items;
}

describe("a watch of the caller's own feed", () => {
  it("shows only the caller's events, narrowed to the types and the one trigger asked for, and resumes after a seq", async () => {
    const [alices, bobs] = [await viewerOf(alice.apiKey), await viewerOf(bob.apiKey)];
    const everything = await watch(alices);
    const oneTrigger = await watch(alices, { types: ['trigger_changed', 'trigger_paused'], where: (e) => e.triggerId === 'tr1' });
    const first = await publish(bob.id, changed('tr1', 'paused'));
    const mine = [
      await publish(alice.id, changed('tr2', 'active')),
      await publish(alice.id, { type: 'task_cancelled', taskId: 'tk' }),
      await publish(alice.id, changed('tr1', 'paused')),
    ];
    expect((await take(everything, 3)).map((e) => ('seq' in e ? e.seq : e.code))).toEqual(mine.map((e) => e.seq));
    expect(await take(oneTrigger, 1)).toMatchObject([{ type: 'trigger_changed', triggerId: 'tr1', userId: alice.id, seq: mine[2]!.seq }]);
    everything.close();
    oneTrigger.close();
    // Bob's watch from before his event sees his, and none of Alice's after it.
    const bobsWatch = await watch(bobs, { after: first.seq - 1 });
    const marker = await publish(bob.id, { type: 'task_cancelled', taskId: 'marker' });
    expect((await take(bobsWatch, 2)).map((e) => ('seq' in e ? e.seq : e.code))).toEqual([first.seq, marker.seq]);
    bobsWatch.close();
    const resumed = await watch(alices, { after: mine[0]!.seq });
    expect((await take(resumed, 2)).map((e) => ('seq' in e ? e.seq : e.code))).toEqual([mine[1]!.seq, mine[2]!.seq]);
    resumed.close();
  });

  it('refuses an `after` that is no seq, naming it', async () => {
    await expect(services.feeds.watch(await viewerOf(alice.apiKey), { after: -1 })).rejects.toMatchObject({
      code: 'BAD_USER_INPUT',
      fieldPath: ['after'],
    });
  });

  it("holds one of the key's subscription slots, shared with session watches, until it ends", async () => {
    const carol = await createUser('carol');
    const viewer = await viewerOf(carol.apiKey);
    const agent = await make.agent(carol, { name: 'Scribe', key: 'scribe' });
    const { sessionId } = await services.sessions.send(viewer, { agentIds: [agent.id], content: 'Hello there' });
    const session = await services.sessions.watch(viewer, sessionId);
    const feed = await watch(viewer);
    await expect(services.feeds.watch(viewer)).rejects.toMatchObject({ code: 'TOO_MANY_SUBSCRIPTIONS' });
    feed.close();
    const again = await watch(viewer);
    again.close();
    session.close();
  });

  it('ends with ACCESS_REVOKED when its key is deleted, when it was deleted before the watch opened, and when no signal said so', async () => {
    const keys = await Promise.all([0, 1, 2].map(async () => (await services.apiKeys.create(bob.id)).apiKey));
    const [signalled, early, silent] = await Promise.all(keys.map(viewerOf));
    const watched = await watch(signalled!);
    await services.apiKeys.delete(signalled!, keys[0]!);
    expect(await take(watched, 1)).toMatchObject([{ end: true, code: 'ACCESS_REVOKED', reason: 'The API key of this stream was deleted' }]);

    // Authenticated, then deleted before the watch opened: the watch looks the key up once more.
    await services.apiKeys.delete(early!, keys[1]!);
    expect(await take(await watch(early!), 1)).toMatchObject([{ end: true, code: 'ACCESS_REVOKED' }]);

    // Gone from the database without a revocation on the bus (one Redis never carried): the
    // periodic check of open watches ends it, and nothing published meanwhile reaches it.
    const unsignalled = await watch(silent!);
    // Seen live first: its key was confirmed when it opened.
    const seen = await publish(bob.id, { type: 'task_cancelled', taskId: 'while-the-key-exists' });
    expect(await take(unsignalled, 1)).toMatchObject([{ seq: seen.seq }]);
    await t.db.apiKey.delete({ where: { id: silent!.keyId! } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await publish(bob.id, { type: 'task_cancelled', taskId: 'after-the-key-went' });
    expect(await take(unsignalled, 1)).toMatchObject([{ end: true, code: 'ACCESS_REVOKED' }]);
  });
});
