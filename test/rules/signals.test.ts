import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import type { EventBus } from '../../src/domain/core/bus.ts';
import { signalOutbox } from '../../src/domain/signals/service.ts';
import { createMemoryBus } from '../../src/realtime/memory-bus.ts';
import { inMemorySignalStore, World } from '../domain/in-memory-session-stores.ts';
import { publishedSince } from './support/published.ts';

// The signals outbox on its rules alone: an in-memory store of pending signals and the
// in-process bus, which a test can take out of reach. What takes access away (a user removed, a
// session deleted, a key revoked) must reach the bus even when the bus was away at the change.

const config = loadConfig({});

/** The in-process bus, and a front of it that refuses every signal while `down` is set. */
function arrange() {
  const world = new World(() => new Date());
  const bus = createMemoryBus(config.events);
  const state = { down: false };
  const away = () => Promise.reject(new Error('the bus is out of reach'));
  const flaky: EventBus = {
    ...bus,
    publish: (id, event) => (state.down ? away() : bus.publish(id, event)),
    revokeKey: (keyId) => (state.down ? away() : bus.revokeKey(keyId)),
  };
  const warnings: string[] = [];
  const outbox = signalOutbox(inMemorySignalStore(world), flaky, { warn: (_obj, msg) => warnings.push(msg ?? '') });
  const revoked: string[] = [];
  bus.onKeyRevoked((keyId) => revoked.push(keyId));
  return { world, bus, state, outbox, warnings, revoked };
}

let arranged: ReturnType<typeof arrange> | undefined;
afterEach(async () => {
  await arranged?.bus.close();
  arranged = undefined;
});

describe('the signals outbox, on its rules over an in-memory store', () => {
  it('hands a recorded signal to the bus at once and forgets it', async () => {
    const a = (arranged = arrange());
    const seq = await a.bus.position('s1');
    const removed = { kind: 'event', sessionId: 's1', event: { type: 'user_removed', userId: 'u1' } } as const;
    await a.outbox.deliver(a.world.record(removed), removed);
    const key = { kind: 'revoke_key', keyId: 'k1' } as const;
    await a.outbox.deliver(a.world.record(key), key);
    expect(await publishedSince(a.bus, 's1', seq)).toEqual(['user_removed']);
    expect(a.revoked).toEqual(['k1']);
    expect(a.world.signals.size).toBe(0);
    expect(a.warnings).toEqual([]);
  });

  it('keeps a signal the bus refused, without failing the change, and delivers what waits oldest first once the bus is back', async () => {
    const a = (arranged = arrange());
    const seq = await a.bus.position('s1');
    a.state.down = true;
    const deleted = { kind: 'event', sessionId: 's1', event: { type: 'session_deleted' } } as const;
    const key = { kind: 'revoke_key', keyId: 'k1' } as const;
    const removed = { kind: 'event', sessionId: 's1', event: { type: 'user_removed', userId: 'u1' } } as const;
    await expect(a.outbox.deliver(a.world.record(removed), removed)).resolves.toBeUndefined();
    await expect(a.outbox.deliver(a.world.record(key), key)).resolves.toBeUndefined();
    await expect(a.outbox.deliver(a.world.record(deleted), deleted)).resolves.toBeUndefined();
    expect([...a.world.signals.values()]).toEqual([removed, key, deleted]);
    expect(a.warnings).toHaveLength(3);
    // A flush while the bus is still away delivers nothing and loses nothing.
    await a.outbox.flush();
    expect(a.world.signals.size).toBe(3);

    a.state.down = false;
    await a.outbox.flush();
    expect(await publishedSince(a.bus, 's1', seq)).toEqual(['user_removed', 'session_deleted']);
    expect(a.revoked).toEqual(['k1']);
    expect(a.world.signals.size).toBe(0);
  });
});
