/**
 * The signals service's front: the outbox that carries what takes access away (a user removed, a
 * session deleted, a key revoked) to every instance, and how it is composed. A change records its
 * signal with `recordSignal` in its own transaction; `api-keys/` and `sessions/` do.
 */
export { type Signal, type SignalOutbox, signalOutbox } from './service.ts';
export type { SignalStore } from './store.ts';
export { prismaSignalStore, recordSignal } from './prisma-store.ts';
