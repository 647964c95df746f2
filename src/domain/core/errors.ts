/**
 * Expected failures of the domain, each with a code that both transports understand:
 * GraphQL puts it in `extensions.code`, REST maps it to a status (per resource, because the
 * original service used different statuses and body keys for different resources).
 */
export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'BAD_USER_INPUT'
  | 'UNPROCESSABLE'
  | 'CONFLICT'
  /** The balance cannot cover what was asked for; REST answers 402. */
  | 'INSUFFICIENT_MANNA'
  | 'RATE_LIMITED'
  | 'TOO_MANY_SUBSCRIPTIONS'
  | 'TOO_MANY_STREAMS'
  /** Something the request needs is not there now (a platform out of reach, a setting missing): nothing changed. */
  | 'UNAVAILABLE';

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /**
     * For input errors: the field at fault, in the domain's (camelCase) names. Not called
     * `path`: graphql-js would take an array `path` for the error's location in the response.
     */
    readonly fieldPath?: (string | number)[],
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const unauthenticated = (message: string) => new DomainError('UNAUTHENTICATED', message);
export const forbidden = (message: string) => new DomainError('FORBIDDEN', message);
export const notFound = (message: string) => new DomainError('NOT_FOUND', message);
export const conflict = (message: string) => new DomainError('CONFLICT', message);
export const badInput = (message: string, path?: (string | number)[]) => new DomainError('BAD_USER_INPUT', message, path);
export const insufficientManna = (message: string) => new DomainError('INSUFFICIENT_MANNA', message);
export const unprocessable = (message: string, path?: (string | number)[]) => new DomainError('UNPROCESSABLE', message, path);

/** The request cannot be done now, for a reason outside it; REST answers 503. */
export const unavailable = (message: string) => new DomainError('UNAVAILABLE', message);

/** Over a limit of the caller's key; REST answers 429. */
export const tooMany = (code: 'RATE_LIMITED' | 'TOO_MANY_SUBSCRIPTIONS' | 'TOO_MANY_STREAMS', message: string) =>
  new DomainError(code, message);

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;
