import type { Signal } from './service.ts';

/** The outbox's rows (`service.ts`); a change records its signal through its own store, in its transaction. */
export interface SignalStore {
  /** Signals not yet handed to the bus, oldest first. */
  pending(limit: number): Promise<{ id: bigint; signal: Signal }[]>;
  /** Forgets a signal the bus has taken. */
  remove(id: bigint): Promise<void>;
}
