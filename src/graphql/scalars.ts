import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { MAX_JSON_DEPTH, nestsWithin, TOO_DEEP } from '../domain/core/validation.ts';
import { builder } from './builder.ts';

builder.scalarType('DateTime', {
  description: 'An instant, as an ISO-8601 string in UTC.',
  serialize: (value) => (value instanceof Date ? value : new Date(String(value))).toISOString(),
  parseValue: (value) => {
    const date = new Date(String(value));
    if (Number.isNaN(date.getTime())) throw new GraphQLError('DateTime must be an ISO-8601 string');
    return date;
  },
});

const literalValue = (node: ValueNode): unknown => {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map(literalValue);
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literalValue(f.value)]));
    default:
      throw new GraphQLError('JSON literals cannot contain variables');
  }
};

/** A JSON argument, bounded in depth before any resolver (or the domain) walks it. */
const withinDepth = (value: unknown) => {
  if (!nestsWithin(value)) throw new GraphQLError(`JSON ${TOO_DEEP}`);
  return value;
};

builder.scalarType('JSON', {
  description: `Any JSON value; as an argument, nesting objects and lists at most ${MAX_JSON_DEPTH} levels deep.`,
  serialize: (value) => value,
  parseValue: withinDepth,
  // A literal's depth is bounded by the document's nesting limit (armor.ts) before it is parsed.
  parseLiteral: (node) => withinDepth(literalValue(node)),
});

builder.scalarType('Seq', {
  description:
    'The number of an event in its session: a whole number below 2^53 that grows with every event. Pass the last one you received as `after` to resume.',
  serialize: (value) => Number(value),
  parseValue: (value) => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
      throw new GraphQLError('Seq must be a whole number from 0 to 2^53 - 1');
    return value;
  },
  parseLiteral: (node) => {
    const value = node.kind === Kind.INT ? Number(node.value) : NaN;
    if (!Number.isSafeInteger(value) || value < 0) throw new GraphQLError('Seq must be a whole number from 0 to 2^53 - 1');
    return value;
  },
});
