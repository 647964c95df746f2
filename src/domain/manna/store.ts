import type { MannaLedger } from '../../generated/prisma/client.ts';
import type { Manna } from '../core/manna.ts';
import type { BalanceKind } from '../core/vocabulary.ts';

/**
 * One move of manna as the ledger keeps it (exact decimals, never floats): the row itself, as
 * GraphQL's `LedgerEntry` is the Prisma plugin's object of that table.
 */
export type LedgerEntry = MannaLedger;

/** Where an entry stands in a user's ledger: newest first, the id breaking ties. */
export interface LedgerPosition {
  createdAt: Date;
  id: string;
}

export interface Granted {
  ledgerId: string;
  amount: Manna;
  subscriptionBalance: Manna;
  foreverBalance: Manna;
}

/** Every statement the manna rules need. */
export interface MannaStore {
  /** A user or agent profile by username. */
  userNamed(username: string): Promise<{ id: string; type: 'user' | 'agent' } | null>;
  /** Adds `amount` to one of the user's balances with its ledger row, and reads both balances after, at once. */
  grant(userId: string, kind: BalanceKind, amount: string): Promise<Granted>;
  /** Up to `take` of the user's entries after `from`, newest first. */
  ledger(userId: string, from: LedgerPosition | null, take: number): Promise<LedgerEntry[]>;
}
