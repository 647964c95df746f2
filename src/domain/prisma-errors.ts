import { Prisma } from '../generated/prisma/client.ts';
import { badInput, type DomainError } from './errors.ts';

/**
 * PostgreSQL text cannot hold the NUL character, so any input carrying one fails in the
 * database. That is bad input, not a server fault: both transports turn it into this error.
 */
export function nulCharacterError(e: unknown): DomainError | null {
  if (!(e instanceof Prisma.PrismaClientKnownRequestError)) return null;
  const cause = (e.meta as { driverAdapterError?: { cause?: { originalCode?: string } } } | undefined)?.driverAdapterError?.cause;
  return cause?.originalCode && NUL_REJECTED.includes(cause.originalCode) ? badInput('Text must not contain the NUL character (\\u0000)') : null;
}

/** invalid_byte_sequence_for_encoding (text columns), untranslatable_character (jsonb). */
const NUL_REJECTED = ['22021', '22P05'];

/** True when a write failed on a unique constraint. */
export const isUniqueViolation = (e: unknown) => e instanceof Prisma.PrismaClientKnownRequestError && e.code === 'P2002';

/** True when a write found no row to change: it was deleted meanwhile (a session, say). */
export const isRecordGone = (e: unknown) => e instanceof Prisma.PrismaClientKnownRequestError && (e.code === 'P2025' || e.code === 'P2003');
