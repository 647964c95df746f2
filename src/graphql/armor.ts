import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { GraphQLError, Kind, Lexer, type SelectionSetNode, Source, TokenKind, type ValidationContext, type ValidationRule } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/** What one GraphQL document may ask for (docs/security.md). */
export const DOCUMENT_LIMITS = { depth: 12, aliases: 30, cost: 20_000, tokens: 5_000, directives: 50, nesting: 64 } as const;

/**
 * graphql-armor words every refusal as a "Syntax Error" without a code. Ours keep its text
 * (which says the limit and what was found) under a code a client can act on. A refusal during
 * validation is reported like any validation error (so a document breaking several limits hears
 * of each); the token limit stops the parser, so it is thrown.
 */
function refuseWith(code: string) {
  return [
    (context: ValidationContext | null, error: GraphQLError) => {
      const refusal = new GraphQLError(error.message.replace(/^Syntax Error: /, ''), { extensions: { code } });
      if (!context) throw refusal;
      context.reportError(refusal);
    },
  ];
}

/**
 * How deep `{`, `[` and `(` nest in a document's text, read token by token (without recursion)
 * up to the token limit; 0 for text the lexer cannot read (the parser then says why).
 */
function deepestNesting(text: string): number {
  const lexer = new Lexer(new Source(text));
  let depth = 0;
  let deepest = 0;
  try {
    for (let i = 0, token = lexer.advance(); token.kind !== TokenKind.EOF && i < DOCUMENT_LIMITS.tokens; i++, token = lexer.advance()) {
      if (token.kind === TokenKind.BRACE_L || token.kind === TokenKind.BRACKET_L || token.kind === TokenKind.PAREN_L) {
        depth++;
        if (depth > deepest) deepest = depth;
        if (deepest > DOCUMENT_LIMITS.nesting) break;
      } else if (token.kind === TokenKind.BRACE_R || token.kind === TokenKind.BRACKET_R || token.kind === TokenKind.PAREN_R) depth--;
    }
  } catch {
    return 0;
  }
  return deepest;
}

/**
 * graphql-js parses a document by recursion, a few frames per level of `{`, `[` and `(`: a list
 * nested 2,000 deep (4,001 tokens, under the token limit) overflowed the stack and was a 500.
 * The text is measured before it is parsed, over HTTP and graphql-ws alike.
 */
const nestingLimit = (): Plugin => ({
  // In the parse function itself, as graphql-armor's token limit is: its refusals are answered as parse errors (400).
  onParse: ({ parseFn, setParseFn }) => {
    setParseFn((source, options) => {
      if (deepestNesting(typeof source === 'string' ? source : source.body) > DOCUMENT_LIMITS.nesting)
        throw new GraphQLError(`Nesting limit of ${DOCUMENT_LIMITS.nesting} exceeded: braces, brackets and parentheses nest deeper.`, {
          extensions: { code: 'NESTING_LIMIT_EXCEEDED' },
        });
      return parseFn(source, options);
    });
  },
});

/**
 * graphql-js gives up validating a document whose overlapping fields (thousands of repeats of
 * one field, say) would take too long to compare, and says only "Validation aborted.".
 */
const ABORTED = 'Validation aborted.';
const explainAborted = (): Plugin => ({
  onValidate:
    () =>
    ({ valid, result, setResult }) => {
      if (valid || !result.some((e) => e.message === ABORTED)) return;
      setResult(
        result.map((e) =>
          e.message === ABORTED
            ? new GraphQLError('The document is too complex to validate: too many repeated or overlapping fields', {
                extensions: { code: 'QUERY_TOO_COMPLEX' },
              })
            : e,
        ),
      );
    },
});

/**
 * The whole schema is the largest answer there is (130 kB here), and graphql-armor's depth and
 * cost limits leave `__schema` out so that tools can introspect: thirty aliases of it made one
 * request of 4 MB and a second of CPU. One per operation is what every tool sends. Fields that
 * share a response name run once, so it is distinct names at the root that count (fragments
 * included; `__schema` exists only on the root type).
 */
const oneSchemaIntrospection: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    const names = new Set<string>();
    const expanded = new Set<string>();
    const collect = (set: SelectionSetNode) => {
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) {
          if (selection.name.value === '__schema') names.add(selection.alias?.value ?? '__schema');
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          collect(selection.selectionSet);
        } else if (!expanded.has(selection.name.value)) {
          expanded.add(selection.name.value);
          const fragment = context.getFragment(selection.name.value);
          if (fragment) collect(fragment.selectionSet);
        }
      }
    };
    collect(operation.selectionSet);
    if (names.size > 1) {
      context.reportError(
        new GraphQLError(`Introspection limit exceeded: __schema may be asked once per operation, found ${names.size}.`, {
          nodes: operation,
          extensions: { code: 'INTROSPECTION_LIMIT_EXCEEDED' },
        }),
      );
    }
  },
});

/**
 * Limits on the document itself, checked before anything runs, over HTTP and graphql-ws alike:
 * nesting (before parsing), depth, aliases, cost (list sizes multiply), tokens, directives, and one `__schema`. graphql-js adds its own:
 * introspection nesting, fragment cycles, and the validation budget above. Batched requests
 * (a JSON array of operations) are not accepted at all (Yoga's default).
 */
export function documentLimits(): Plugin[] {
  const propagateOnRejection = false;
  return [
    EnvelopArmorPlugin({
      maxDepth: { n: DOCUMENT_LIMITS.depth, propagateOnRejection, onReject: refuseWith('DEPTH_LIMIT_EXCEEDED') },
      maxAliases: { n: DOCUMENT_LIMITS.aliases, propagateOnRejection, onReject: refuseWith('ALIAS_LIMIT_EXCEEDED') },
      costLimit: { maxCost: DOCUMENT_LIMITS.cost, propagateOnRejection, onReject: refuseWith('COST_LIMIT_EXCEEDED') },
      maxTokens: { n: DOCUMENT_LIMITS.tokens, propagateOnRejection, onReject: refuseWith('TOKEN_LIMIT_EXCEEDED') },
      maxDirectives: { n: DOCUMENT_LIMITS.directives, propagateOnRejection, onReject: refuseWith('DIRECTIVE_LIMIT_EXCEEDED') },
      // Ours also hides the enum form, and in variable values too (hideSuggestions).
      blockFieldSuggestion: { enabled: false },
    }),
    // After graphql-armor, whose token limit sets a parse function of its own: this one wraps it.
    nestingLimit(),
    { onValidate: ({ addValidationRule }) => addValidationRule(oneSchemaIntrospection) },
    explainAborted(),
  ];
}
