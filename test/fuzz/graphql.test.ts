import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  isLeafType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
} from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema.ts';
import { databaseDigest, fuzzRuns, fuzzSeed, hostileJson, hostileText, plausibleText, seedWorld, settledDigest } from '../helpers/fuzz.ts';
import { expectNoInternals } from '../helpers/rest-helpers.ts';
import { setUpNow } from '../helpers/set-up.ts';

/**
 * Every query and mutation that takes arguments (read from the schema, so a new one is fuzzed
 * without touching this file) is called with generated variables: values of about the right
 * type, out of range, of the wrong type, hostile strings, ids of the wrong kind. The answer is
 * never a 5xx or INTERNAL_SERVER_ERROR, every error has a code and no internals, queries never
 * change the database, and a mutation that is refused changes nothing.
 */
const RUNS = fuzzRuns(20);

const { t, world } = await setUpNow(async (start) => {
  const t = await start.app();
  return { t, world: await seedWorld(t) };
});

const allIds = Object.values(world.ids).flat();
/** Every input field name in the schema: keys for values of the wrong shape. */
const inputNames = [
  ...new Set(Object.values(schema.getTypeMap()).flatMap((type) => (isInputObjectType(type) ? Object.keys(type.getFields()) : []))),
];
const anything = hostileJson(allIds, inputNames);
const text = plausibleText(allIds);

/** Ids of the kind an argument names (`agentId`; for a plain `id`, the field: `likeCreation`). */
function idsNamed(name: string): string[] {
  const words = name.toLowerCase().replace('prompt', 'message');
  const kind = (Object.keys(world.ids) as (keyof typeof world.ids)[]).find((k) => words.includes(k));
  return kind ? world.ids[kind] : allIds;
}

const url = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('https://example.com/a.png', 'http://example.com/b.jpg') },
  { weight: 1, arbitrary: text },
);
/** Strings some fields must be, by their names. */
const strings: Record<string, fc.Arbitrary<unknown>> = {
  username: fc.oneof(fc.constantFrom(...world.usernames), text),
  apiKey: fc.oneof(fc.constant(world.spareKey), text),
  key: fc.oneof(fc.stringMatching(/^[a-z0-9_.-]{2,12}$/), text),
  image: url,
  attachments: url,
  lora: fc.oneof(fc.constantFrom(...world.ids.model), text),
};

const scalars: Record<string, (name: string) => fc.Arbitrary<unknown>> = {
  ID: (name) => fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...idsNamed(name)) }, { weight: 1, arbitrary: hostileText(allIds) }),
  String: (name) => strings[name] ?? text,
  Int: () =>
    fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: -2, max: 120 }) },
      { weight: 1, arbitrary: fc.constantFrom(2 ** 31 - 1, -(2 ** 31), 2 ** 31, 1e20, 0.5) },
    ),
  Float: () => fc.oneof(fc.double(), fc.integer()),
  Boolean: () => fc.boolean(),
  DateTime: () =>
    fc.oneof(
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      text,
    ),
  Seq: () => fc.oneof(fc.integer({ min: -1, max: 100 }), fc.constantFrom(2 ** 53, '12', 'x', 1.5)),
  JSON: () => anything,
};

/** Values for an input type: mostly of that type, sometimes null, sometimes anything at all. */
function valueFor(type: GraphQLInputType, name: string, depth = 0): fc.Arbitrary<unknown> {
  if (isNonNullType(type))
    return fc.oneof({ weight: 12, arbitrary: valueFor(type.ofType, name, depth) }, { weight: 1, arbitrary: fc.constant(null) });
  let typed: fc.Arbitrary<unknown>;
  if (isListType(type)) typed = fc.array(valueFor(type.ofType, name, depth + 1), { maxLength: depth > 1 ? 1 : 4 });
  else if (isEnumType(type))
    typed = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...type.getValues().map((v) => v.name)) }, { weight: 1, arbitrary: text });
  else if (isInputObjectType(type)) {
    // Required fields always, and some of the others.
    const fields = Object.values(type.getFields());
    const required = fields.filter((f) => isNonNullType(f.type));
    typed = fc
      .subarray(fields.filter((f) => !isNonNullType(f.type)))
      .chain((chosen) => fc.record(Object.fromEntries([...required, ...chosen].map((f) => [f.name, valueFor(f.type, f.name, depth + 1)]))));
  } else if (isScalarType(type)) typed = (scalars[type.name] ?? (() => anything))(name);
  else typed = anything;
  return fc.oneof({ weight: 10, arbitrary: typed }, { weight: 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: anything });
}

function documentFor(operation: 'query' | 'mutation', field: GraphQLField<unknown, unknown>) {
  const variables = field.args.map((a: GraphQLArgument) => `$${a.name}: ${a.type.toString()}`).join(', ');
  const args = field.args.map((a) => `${a.name}: $${a.name}`).join(', ');
  const selection = isLeafType(getNamedType(field.type)) ? '' : ' { __typename }';
  return `${operation} Fuzz(${variables}) { ${field.name}(${args})${selection} }`;
}

/** Removals last, so the other fields still find the rows they are aimed at. */
const removesLast = (name: string) => (/^(delete|remove|forget)/.test(name) ? 1 : 0);
const targets = (['query', 'mutation'] as const).flatMap((operation) => {
  const root = operation === 'query' ? schema.getQueryType()! : schema.getMutationType()!;
  return Object.values(root.getFields())
    .filter((f) => f.args.length > 0)
    .sort((a, b) => removesLast(a.name) - removesLast(b.name))
    .map((field) => ({ operation, name: field.name, field }));
});

const key = fc.oneof(
  { weight: 12, arbitrary: fc.constant<string | null>(world.alice.apiKey) },
  { weight: 2, arbitrary: fc.constant(world.bob.apiKey) },
  { weight: 1, arbitrary: fc.constant(null) },
);

describe('GraphQL fuzz: every query and mutation with arguments', () => {
  let baseline: string;
  beforeAll(async () => {
    baseline = await settledDigest(t);
  });

  it.each(targets.map((target, i) => ({ ...target, seed: fuzzSeed + i })))('$operation $name', async ({ operation, field, seed }) => {
    const query = documentFor(operation, field);
    const variables = fc.record(
      Object.fromEntries(field.args.map((a) => [a.name, valueFor(a.type, a.name === 'id' ? field.name : a.name)])),
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(variables, key, async (vars, apiKey) => {
        const res = await fetch(`${t.url}/graphql`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/graphql-response+json',
            ...(apiKey ? { 'x-api-key': apiKey } : {}),
          },
          body: JSON.stringify({ query, variables: vars }),
        });
        const answer = await res.text();
        const context = `${query} ${JSON.stringify(vars).slice(0, 500)} → ${res.status} ${answer.slice(0, 500)}`;
        expect(res.status, context).toBeLessThan(500);
        const body = JSON.parse(answer) as {
          data?: Record<string, unknown> | null;
          errors?: { message: unknown; extensions?: { code?: unknown } }[];
        };
        for (const error of body.errors ?? []) {
          expect(typeof error.message, context).toBe('string');
          expect(typeof error.extensions?.code, context).toBe('string');
          expect(error.extensions?.code, context).not.toBe('INTERNAL_SERVER_ERROR');
        }
        if (body.errors) expectNoInternals(JSON.stringify(body.errors), context);
        const refused = (body.errors?.length ?? 0) > 0 && (body.data?.[field.name] ?? null) === null;
        if (operation === 'query' || refused)
          expect(await databaseDigest(t), `${refused ? 'a refused mutation' : 'a query'} changed the database: ${context}`).toBe(baseline);
        else baseline = await settledDigest(t);
      }),
      { numRuns: RUNS, seed, endOnFailure: true },
    );
  });
});
