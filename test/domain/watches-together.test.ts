import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/domain/core/ids.ts';
import type { WatchStream } from '../../src/domain/core/watch.ts';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import { domainDatabase, people } from '../helpers/domain-database.ts';
import { sessionsOver } from '../helpers/domain-sessions.ts';

// Thousands of clients opening their watches at once: whether each may watch, and whether its
// key still exists, are read for the watches that arrive together in a few statements, and each
// is answered as if it had come alone. The sessions service and API keys over their stores on a
// migrated database, with no app.

type User = { id: string; username: string; apiKey: string };
const t = domainDatabase();
let services: ReturnType<typeof sessionsOver>;
let alice: User;
let bob: User;
let carol: User;
let dave: User;
let sessionId: string;
const opened: WatchStream[] = [];

beforeAll(async () => {
  services = sessionsOver(t.db, t.bus(), { limits: { maxSubscriptionsPerKey: 100 } });
  const make = await people(t.db);
  const withKey = async (name: string) => {
    const user = await make.user(name);
    return { ...user, apiKey: (await services.apiKeys.create(user.id)).apiKey };
  };
  [alice, bob, carol, dave] = [await withKey('alice'), await withKey('bob'), await withKey('carol'), await withKey('dave')];
  const agent = await make.agent(alice, { name: 'Scribe', key: 'scribe' });
  ({ sessionId } = await services.sessions.send({ id: alice.id }, { agentIds: [agent.id], content: 'Hello there' }));
  for (const u of [bob, dave]) await services.sessions.addUser({ id: alice.id }, sessionId, { username: u.username, permission: 'editor' });
});
afterAll(async () => {
  for (const w of opened) w.close();
  services?.stop();
});

describe('watches opened together', () => {
  it('read who may watch, and whether their keys still exist, for all of them at once, each answered as if alone', async () => {
    const [owner, editor, stranger, revoked] = await Promise.all(
      [alice, bob, carol, dave].map((u) => services.apiKeys.authenticate(u.apiKey)),
    );
    await services.apiKeys.delete(revoked!, dave.apiKey);
    const asked: [Viewer, string][] = [
      ...Array.from({ length: 10 }, () => [owner!, sessionId] as [Viewer, string]),
      ...Array.from({ length: 5 }, () => [editor!, sessionId] as [Viewer, string]),
      [stranger!, sessionId],
      [owner!, newId()],
      [revoked!, sessionId],
    ];
    const before = t.queries.length;
    const outcomes = await Promise.all(
      asked.map(([viewer, id]) =>
        services.sessions.watch(viewer, id).then(
          (w) => {
            opened.push(w);
            return w;
          },
          (e: { code: string }) => e.code,
        ),
      ),
    );
    expect(outcomes.slice(15, 17)).toEqual(['FORBIDDEN', 'NOT_FOUND']);
    // The deleted key's watch ends before it delivers anything; the others stay open.
    const lastOne = outcomes[17] as WatchStream;
    expect((await lastOne.next()).value).toMatchObject({
      end: true,
      code: 'ACCESS_REVOKED',
      reason: 'The API key of this stream was deleted',
    });
    expect(outcomes.slice(0, 15).every((o) => typeof o !== 'string')).toBe(true);

    // A few statements for 18 watches, not one each. On Redis the watches' positions come back
    // over a few reads, and the reads after them group accordingly; the periodic check of every
    // open watch (one read of each kind a second) may also fall in the window.
    const statements = t.queries.slice(before);
    expect(statements.filter((q) => q.includes('"SessionUser"')).length).toBeLessThanOrEqual(6);
    expect(statements.filter((q) => q.includes('FROM "public"."ApiKey"')).length).toBeLessThanOrEqual(6);
  });
});
