import type { EventBus } from '../../../src/domain/core/bus.ts';

/** The types of the events published to a session since `seq`, as a watcher reading from there sees them. */
export async function publishedSince(bus: EventBus, sessionId: string, seq: number) {
  const now = await bus.position(sessionId);
  const subscription = bus.subscribe(sessionId, { after: seq });
  const types: string[] = [];
  for (let i = seq; i < now; i++) {
    const { value } = await subscription.next();
    types.push('type' in value ? value.type : value.code);
  }
  subscription.close();
  return types;
}
