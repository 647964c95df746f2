import { isDomainError } from '../domain/core/errors.ts';
import { describeInputError } from '../domain/core/validation.ts';

/** What the CLI prints for a failed command: the message only, never a stack trace. */
export const describeError = (e: unknown) =>
  isDomainError(e) ? describeInputError(e.message, e.fieldPath) : e instanceof Error ? e.message : String(e);
