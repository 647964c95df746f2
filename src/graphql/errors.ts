import { GraphQLError } from 'graphql';
import { isDomainError, type ErrorCode } from '../domain/core/errors.ts';
import {
  DATABASE_UNAVAILABLE,
  isDatabaseUnavailable,
  nulCharacterError,
  RETRY_AFTER_SECONDS,
} from '../domain/core/stores/prisma-errors.ts';
import { describeInputError } from '../domain/core/validation.ts';
import { withoutSuggestions } from './suggestions.ts';

const graphqlCode: Record<ErrorCode, string> = {
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  FORBIDDEN: 'FORBIDDEN',
  NOT_FOUND: 'NOT_FOUND',
  BAD_USER_INPUT: 'BAD_USER_INPUT',
  UNPROCESSABLE: 'BAD_USER_INPUT',
  CONFLICT: 'CONFLICT',
  INSUFFICIENT_MANNA: 'INSUFFICIENT_MANNA',
  RATE_LIMITED: 'RATE_LIMITED',
  TOO_MANY_SUBSCRIPTIONS: 'TOO_MANY_SUBSCRIPTIONS',
  TOO_MANY_STREAMS: 'TOO_MANY_STREAMS',
  UNAVAILABLE: 'SERVICE_UNAVAILABLE',
};

/**
 * graphql-js's own errors that reach the masker without a code are about the values sent:
 * variables that do not fit their types (parse and validation errors got theirs from Yoga
 * already). They get BAD_USER_INPUT, as Apollo Server gives them, so every error has a code.
 */
function withCode(error: GraphQLError): GraphQLError {
  if (error.extensions.code !== undefined) return error;
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...error.extensions, code: 'BAD_USER_INPUT' },
  });
}

/**
 * Domain errors become GraphQL errors with `extensions.code`; GraphQL's own errors (syntax,
 * validation) pass through; a database out of reach is SERVICE_UNAVAILABLE (503 with
 * Retry-After over HTTP); anything else is logged and masked, so no internals leak.
 */
export function createErrorMasker(logUnexpected: (error: unknown) => void, logUnavailable: (error: unknown) => void) {
  return (error: unknown): Error => {
    const thrown = error instanceof GraphQLError ? (error.originalError ?? error) : error;
    const original = nulCharacterError(thrown) ?? thrown;
    const located =
      error instanceof GraphQLError ? { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path } : {};
    if (isDomainError(original)) {
      return new GraphQLError(describeInputError(original.message, original.fieldPath), {
        ...located,
        extensions: {
          code: graphqlCode[original.code],
          ...(original.fieldPath?.length ? { field: original.fieldPath.join('.') } : {}),
          ...(original.code === 'UNAUTHENTICATED' ? { http: { status: 401 } } : {}),
        },
      });
    }
    if (original instanceof GraphQLError) return withCode(withoutSuggestions(error as GraphQLError));
    if (isDatabaseUnavailable(original)) {
      logUnavailable(original);
      return new GraphQLError(DATABASE_UNAVAILABLE, {
        ...located,
        extensions: {
          code: 'SERVICE_UNAVAILABLE',
          retryAfter: RETRY_AFTER_SECONDS,
          http: { status: 503, headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } },
        },
      });
    }
    logUnexpected(original);
    return new GraphQLError('Unexpected error.', { ...located, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
  };
}
