import type { Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/database.ts';
import type { SessionEventPayload } from '../core/events.ts';
import type { Signal } from './service.ts';
import type { SignalStore } from './store.ts';

const toRow = (signal: Signal) =>
  signal.kind === 'event'
    ? { kind: 'event', sessionId: signal.sessionId, payload: signal.event as unknown as Prisma.InputJsonValue }
    : { kind: 'revoke_key', payload: { keyId: signal.keyId } };

const fromRow = (row: { kind: string; sessionId: string | null; payload: unknown }): Signal =>
  row.kind === 'event'
    ? { kind: 'event', sessionId: row.sessionId!, event: row.payload as SessionEventPayload }
    : { kind: 'revoke_key', keyId: (row.payload as { keyId: string }).keyId };

/**
 * Writes a signal into the outbox inside the transaction of the change it announces (a user
 * removed, a session deleted, a key revoked), so the two commit or fail together. Returns its id.
 */
export async function recordSignal(tx: Prisma.TransactionClient, signal: Signal): Promise<bigint> {
  return (await tx.pendingSignal.create({ data: toRow(signal), select: { id: true } })).id;
}

export function prismaSignalStore(db: Db): SignalStore {
  return {
    async pending(limit) {
      const rows = await db.pendingSignal.findMany({ orderBy: { id: 'asc' }, take: limit });
      return rows.map((row) => ({ id: row.id, signal: fromRow(row) }));
    },
    async remove(id) {
      await db.pendingSignal.deleteMany({ where: { id } });
    },
  };
}
