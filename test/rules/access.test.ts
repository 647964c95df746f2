import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { accessGate } from '../../src/domain/access/gate.ts';
import { sessionAccess } from '../../src/domain/access/service.ts';
import type { AccessStore } from '../../src/domain/access/store.ts';
import type { WatchEnd } from '../../src/domain/core/watch.ts';
import { inMemorySessionStore, inMemoryWatchAccessStore, World } from '../domain/in-memory-session-stores.ts';

// Access on its rules alone, over in-memory stores: a caller's place in a session, which every
// session operation starts with, and the gate that keeps open watches honest about it.

const quiet = { warn: () => {} };

/** A session of Olivia's: Cora added as owner, Eddie as editor; Sam is not in it. Eddie watches with a key. */
function arrange() {
  const world = new World(() => new Date());
  const [olivia, cora, eddie, sam] = ['olivia', 'cora', 'eddie', 'sam'].map((n) => world.user(n));
  const session = world.session(olivia!.id, []);
  session.members.set(cora!.id, 'owner').set(eddie!.id, 'editor');
  const keyId = randomUUID();
  world.apiKeys.add(keyId);
  const reads: number[] = [];
  const store = inMemorySessionStore(world);
  // Counts the statements, to see that asks arriving together are read together.
  const counted: AccessStore = {
    places: (asks) => {
      reads.push(asks.length);
      return store.places(asks);
    },
  };
  const viewers = { olivia: { id: olivia!.id }, cora: { id: cora!.id }, eddie: { id: eddie!.id, keyId }, sam: { id: sam!.id } };
  return { world, session, access: sessionAccess(counted), reads, viewers, keyId };
}

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

describe("a caller's place in a session", () => {
  it('is the owner for its owner and for those added as owner, editor for an editor, none for anyone else', async () => {
    const { access, session, viewers } = arrange();
    const places = await Promise.all(Object.values(viewers).map((v) => access.permissionIn(v, session.id)));
    expect(places).toEqual(['owner', 'owner', 'editor', null]);
  });

  it('is read for the callers that ask together in one statement', async () => {
    const { access, session, viewers, reads } = arrange();
    await Promise.all(Array.from({ length: 50 }, (_, i) => access.permissionIn(i % 2 ? viewers.eddie : viewers.sam, session.id)));
    expect(reads).toEqual([50]);
  });

  it('refuses a stranger, lets only owners manage, and finds no session that does not exist', async () => {
    const { access, session, viewers } = arrange();
    await expect(access.requireAccess(viewers.sam, session.id)).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: 'You do not have access to this session',
    });
    await expect(access.requireManager(viewers.eddie, session.id, 'add or remove users')).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: 'Only an owner of this session can add or remove users',
    });
    await expect(access.requireManager(viewers.cora, session.id, 'add or remove users')).resolves.toBeUndefined();
    for (const id of [randomUUID(), 'a\u0000b']) {
      await expect(access.permissionIn(viewers.olivia, id)).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Session not found' });
    }
  });
});

describe('the access gate of open watches', () => {
  /** A gate whose confirmations are never fresh, so every `admit` waits for a check of every open watch. */
  function gateOver(world: World) {
    const gate = accessGate(inMemoryWatchAccessStore(world), 0, quiet);
    stop = gate.stop;
    return gate;
  }

  it('lets a watch deliver while its viewer is in the session and the key exists', async () => {
    const { world, session, viewers } = arrange();
    const ends: WatchEnd[] = [];
    const ticket = gateOver(world).open(viewers.eddie, session.id, (end) => ends.push(end));
    await ticket.admit();
    await ticket.admit();
    expect(ends).toEqual([]);
    ticket.close();
  });

  it('ends a watch with the reason once the check finds the viewer removed, the session deleted or the key gone', async () => {
    const { world, session, viewers, keyId } = arrange();
    const gate = gateOver(world);
    const other = world.session(viewers.olivia.id, []);
    other.members.set(viewers.eddie.id, 'editor');
    const third = world.session(viewers.olivia.id, []);
    third.members.set(viewers.cora.id, 'editor');
    const ends: Record<string, WatchEnd[]> = { removed: [], deleted: [], keyGone: [] };
    const removed = gate.open(viewers.eddie, session.id, (end) => ends.removed!.push(end));
    const deleted = gate.open({ id: viewers.cora.id }, third.id, (end) => ends.deleted!.push(end));
    const keyGone = gate.open(viewers.eddie, other.id, (end) => ends.keyGone!.push(end));
    await Promise.all([removed.admit(), deleted.admit(), keyGone.admit()]);
    expect(ends).toEqual({ removed: [], deleted: [], keyGone: [] });

    session.members.delete(viewers.eddie.id);
    world.sessions.delete(third.id);
    await Promise.all([removed.admit(), deleted.admit()]);
    expect(ends.removed!.map((e) => e.code)).toEqual(['ACCESS_REVOKED']);
    expect(ends.deleted!.map((e) => e.code)).toEqual(['SESSION_DELETED']);
    expect(ends.keyGone).toEqual([]);

    world.apiKeys.delete(keyId);
    await keyGone.admit();
    expect(ends.keyGone!.map((e) => [e.code, 'reason' in e ? e.reason : null])).toEqual([
      ['ACCESS_REVOKED', 'The API key of this stream was deleted'],
    ]);
  });
});
