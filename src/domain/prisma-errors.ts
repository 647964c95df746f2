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

/** True when a write failed on a unique constraint (optionally one covering `field`). */
export function isUniqueViolation(e: unknown, field?: string): boolean {
  if (!(e instanceof Prisma.PrismaClientKnownRequestError) || e.code !== 'P2002') return false;
  if (!field) return true;
  const target = (e.meta as { target?: unknown; driverAdapterError?: { cause?: { constraint?: { fields?: string[] } } } } | undefined);
  const fields = target?.driverAdapterError?.cause?.constraint?.fields ?? (Array.isArray(target?.target) ? (target.target as string[]) : []);
  return fields.length === 0 || fields.some((f) => f.replace(/"/g, '') === field);
}
