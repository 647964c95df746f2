import type { Plugin } from 'graphql-yoga';
import { GraphQLError } from 'graphql';

/**
 * graphql-js suggests names close to a wrong one (`Did you mean "persona"?`, `Did you mean the
 * enum value "FULL"?`), which maps the schema for anyone without introspection. Errors lose
 * them wherever they arise: in validation of the query text (this plugin) and in execution,
 * where variable values are checked (the error masker calls `withoutSuggestions`).
 */
const SUGGESTION = /\s*Did you mean [^?]*\?/g;

export function withoutSuggestions(error: GraphQLError): GraphQLError {
  const message = error.message.replace(SUGGESTION, '');
  if (message === error.message) return error;
  return new GraphQLError(message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: error.extensions,
  });
}

export const hideSuggestions = (): Plugin => ({
  onValidate:
    () =>
    ({ valid, result, setResult }) => {
      if (!valid) setResult(result.map((e) => (e instanceof GraphQLError ? withoutSuggestions(e) : e)));
    },
});
