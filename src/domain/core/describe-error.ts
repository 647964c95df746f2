import { hidePasswords } from '../../passwords.ts';
import { isDomainError } from './errors.ts';
import { describeInputError } from './validation.ts';

/**
 * A failure as plain text, for callers without a transport's error body: the CLI prints it, and
 * the service's command socket sends it back to the CLI. The message only, never a stack trace,
 * and never a URL's password (a driver's message may quote a URL whole).
 * Here, below both, so that the command socket (src/control/) need not import the CLI above it.
 */
export const describeError = (e: unknown) =>
  hidePasswords(isDomainError(e) ? describeInputError(e.message, e.fieldPath) : e instanceof Error ? e.message : String(e));
