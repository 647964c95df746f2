import { Prisma } from '../../../generated/prisma/client.ts';
import { badInput, type DomainError } from '../errors.ts';

/**
 * PostgreSQL text cannot hold the NUL character, so any input carrying one fails in the
 * database. That is bad input, not a server fault: both transports turn it into this error.
 */
export function nulCharacterError(e: unknown): DomainError | null {
  if (!(e instanceof Prisma.PrismaClientKnownRequestError)) return null;
  const cause = (e.meta as { driverAdapterError?: { cause?: { originalCode?: string } } } | undefined)?.driverAdapterError?.cause;
  return cause?.originalCode && NUL_REJECTED.includes(cause.originalCode)
    ? badInput('Text must not contain the NUL character (\\u0000)')
    : null;
}

/** invalid_byte_sequence_for_encoding (text columns), untranslatable_character (jsonb). */
const NUL_REJECTED = ['22021', '22P05'];

/** True when a write failed on a unique constraint (a raw statement's too: Prisma reports those as P2010 with the driver's cause). */
export const isUniqueViolation = (e: unknown) =>
  e instanceof Prisma.PrismaClientKnownRequestError &&
  (e.code === 'P2002' ||
    (e.meta as { driverAdapterError?: { cause?: { kind?: string } } } | undefined)?.driverAdapterError?.cause?.kind ===
      'UniqueConstraintViolation');

/** True when a write found no row to change: it was deleted meanwhile (a session, say). */
export const isRecordGone = (e: unknown) => e instanceof Prisma.PrismaClientKnownRequestError && (e.code === 'P2025' || e.code === 'P2003');

/** What clients are told while the database is out of reach, and when to try again. */
export const DATABASE_UNAVAILABLE = 'The database is unavailable right now; try again in a few seconds';
export const RETRY_AFTER_SECONDS = 5;

/**
 * Prisma's codes for a database it cannot reach or that dropped the connection: can't reach
 * (P1001), timed out reaching it (P1002), operation timed out (P1008), server closed the
 * connection (P1017), no pool connection in time (P2024).
 */
const UNREACHABLE_PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
/** What the driver adapter reports when the connection is the problem, not the statement. */
const UNREACHABLE_ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
/**
 * SQLSTATEs of a server going away or not taking connections: class 08 (connection exception),
 * admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections.
 */
const UNREACHABLE_SQLSTATE = /^(08...|57P01|57P02|57P03|53300)$/;
const UNREACHABLE_SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
/** node-postgres's own errors, which reach us unwrapped (they carry no code). */
const PG_CONNECTION_MESSAGES = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect)/;

/**
 * True when a failure means the database is out of reach (down, restarting, the network cut,
 * no connection to be had), as opposed to something wrong with the statement: the request may
 * succeed if tried again later, so transports answer 503 rather than 500. Every shape the pg
 * adapter and Prisma give such a failure is recognised here, and nowhere else.
 */
export function isDatabaseUnavailable(e: unknown): boolean {
  for (let error = e, depth = 0; error && typeof error === 'object' && depth < 5; error = (error as { cause?: unknown }).cause, depth++) {
    if (error instanceof Prisma.PrismaClientInitializationError) return true;
    if (error instanceof Prisma.PrismaClientKnownRequestError) {
      if (UNREACHABLE_PRISMA_CODES.has(error.code)) return true;
      const cause = (error.meta as { driverAdapterError?: { cause?: AdapterCause } } | undefined)?.driverAdapterError?.cause;
      if (cause && isUnreachableCause(cause)) return true;
      continue;
    }
    const { name, cause, code, message } = error as { name?: unknown; cause?: unknown; code?: unknown; message?: unknown };
    if (name === 'DriverAdapterError' && cause && typeof cause === 'object' && isUnreachableCause(cause as AdapterCause)) return true;
    if (typeof code === 'string' && (UNREACHABLE_SOCKET_CODES.has(code) || UNREACHABLE_SQLSTATE.test(code))) return true;
    if (typeof message === 'string' && PG_CONNECTION_MESSAGES.test(message)) return true;
  }
  return false;
}

interface AdapterCause {
  kind?: string;
  code?: string;
  originalCode?: string;
}

const isUnreachableCause = (cause: AdapterCause) =>
  (cause.kind !== undefined && UNREACHABLE_ADAPTER_KINDS.has(cause.kind)) ||
  UNREACHABLE_SQLSTATE.test(cause.originalCode ?? cause.code ?? '');
