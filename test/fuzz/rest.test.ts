import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  databaseDigest,
  fuzzRuns,
  fuzzSeed,
  hostileJson,
  hostileText,
  plausibleText,
  seedWorld,
  sendRaw,
  settledDigest,
  type RawResponse,
} from '../helpers/fuzz.ts';
import { expectNoInternals } from '../helpers/rest-helpers.ts';
import { setUpNow } from '../helpers/set-up.ts';

/**
 * Every route the app registers (taken from Fastify as they are added, so a new route is fuzzed
 * without touching this file) gets generated requests: path parameters, query strings, headers
 * and bodies, mostly wrong and some nearly right. Whatever arrives, the answer is never a 5xx,
 * an error is in the documented shape without internals, and a refused request changes nothing
 * in the database.
 */
const RUNS = fuzzRuns(20);

const { t, world } = await setUpNow(async (start) => {
  const t = await start.app();
  return { t, world: await seedWorld(t) };
});

const allIds = Object.values(world.ids).flat();
const text = plausibleText(allIds);
const url = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('https://example.com/a.png', 'http://example.com/b.jpg') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'javascript:alert(1)',
      'data:image/png;base64,AA',
      'file:///etc/passwd',
      `https://example.com/${'a'.repeat(2100)}`,
      'https://',
    ),
  },
);
const oneOf = <T>(values: T[]) => fc.constantFrom(...values);
const some = <T>(arbitrary: fc.Arbitrary<T>) => fc.array(arbitrary, { maxLength: 4 });

/** Each REST body field with values of about the right type, most of them acceptable. */
const plausible: Record<string, fc.Arbitrary<unknown>> = {
  name: text,
  key: fc.oneof(fc.stringMatching(/^[a-zA-Z0-9_.-]{2,12}$/), text),
  description: text,
  image: url,
  public: fc.boolean(),
  models: some(fc.record({ lora: oneOf(world.ids.model), use_when: text })),
  persona: text,
  isPersonaPublic: fc.boolean(),
  greeting: text,
  knowledge: text,
  voice: text,
  suggestions: some(fc.record({ label: text, prompt: text })),
  owner_pays: oneOf(['off', 'deployments', 'full', 'OFF']),
  tools: fc.dictionary(oneOf([...t.services.tools.all().map((tool) => tool.key), 'constructor', 'nope']), fc.boolean(), { maxKeys: 3 }),
  llm_settings: fc.record(
    {
      model_profile: oneOf(['low', 'medium', 'high', 'max']),
      thinking_policy: oneOf(['auto', 'off', 'always', '']),
      thinking_effort_cap: oneOf(['low', 'high', 'none']),
      thinking_effort_instructions: text,
    },
    { requiredKeys: [] },
  ),
  usage_instructions: text,
  images: some(fc.record({ image: url, usage_instructions: text })),
  agent: fc.oneof(oneOf(world.ids.agent), fc.constant(null)),
  session_id: oneOf(world.ids.session),
  content: text,
  attachments: some(url),
  stream: fc.boolean(),
  thinking: fc.boolean(),
  agent_ids: some(oneOf(world.ids.agent)),
  scenario: text,
  budget: fc.record(
    {
      manna_budget: fc.oneof(fc.integer({ min: 100, max: 50_000 }), fc.double()),
      token_budget: fc.integer({ min: 0, max: 2_000_000 }),
      turn_budget: fc.oneof(fc.integer({ min: 1, max: 1_000 }), fc.double()),
    },
    { requiredKeys: [] },
  ),
  title: text,
  extras: fc.record({ exclude_memory: fc.boolean() }, { requiredKeys: [] }),
  message_id: oneOf(world.ids.message),
  reaction: fc.oneof(oneOf(['thumbs_up', 'thumbs_down', '🙂']), text),
  apiKey: fc.oneof(fc.constant(world.spareKey), fc.constant(world.bob.apiKey), text),
  prompt_id: oneOf(world.ids.message),
  username: fc.oneof(oneOf(world.usernames), text),
  permission: oneOf(['editor', 'owner', 'admin']),
};
/** Field names of every REST body, so generated bodies come near valid ones. */
const fields = [...Object.keys(plausible), '__proto__', 'constructor'];

/** A plausible body with, most of the time, one field given any value at all. */
const nearlyValid = fc
  .subarray(Object.keys(plausible), { maxLength: 6 })
  .chain((keys) => fc.record(Object.fromEntries(keys.map((k) => [k, plausible[k]!]))))
  .chain((object) =>
    fc.oneof(
      fc.constant(object),
      fc.tuple(fc.constantFrom(...fields), hostileJson(allIds, fields)).map(([k, v]) => ({ ...object, [k]: v })),
    ),
  );
const queryNames = [
  'limit',
  'cursor',
  'after',
  'before',
  'query',
  'page',
  'orderBy',
  'direction',
  'agentId',
  'userId',
  'tool',
  'first',
  'last',
  'stream',
  '__proto__',
];

/** Ids of the kind a parameter names first, then anything. */
const idsFor: Record<string, string[]> = {
  agentId: world.ids.agent,
  conceptId: world.ids.concept,
  modelId: world.ids.model,
  creationId: world.ids.creation,
  session_id: world.ids.session,
  share_id: world.ids.share,
  user_id: world.ids.user,
  memoryId: world.ids.memory,
  file: ['missing.png', 'a.png'],
};

/** Percent-encoded; a lone surrogate (which encodeURIComponent refuses) as U+FFFD, as browsers send it. */
const encode = (s: string) =>
  encodeURIComponent(s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'));

const segment = (name: string) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...(idsFor[name] ?? allIds)) },
    { weight: 3, arbitrary: hostileText(allIds).map(encode) },
    { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%2F', '%00', '..', '%2e%2e', 'a%c3%28', '*', 'x'.repeat(600)) },
  );

const queryString = fc
  .array(
    fc.tuple(
      fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...queryNames) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) }),
      fc.oneof(text, fc.integer().map(String)),
    ),
    { maxLength: 4 },
  )
  .chain((pairs) =>
    fc.constantFrom(
      pairs.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&'),
      // Unencoded, as a careless client writes it.
      pairs.map(([k, v]) => `${k}=${v}`).join('&'),
    ),
  );

const body = fc.oneof(
  { weight: 6, arbitrary: nearlyValid.map((o) => JSON.stringify(o)) },
  {
    weight: 2,
    arbitrary: fc.dictionary(fc.constantFrom(...fields), hostileJson(allIds, fields), { maxKeys: 6 }).map((o) => JSON.stringify(o)),
  },
  { weight: 1, arbitrary: hostileJson(allIds, fields).map((v) => JSON.stringify(v)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      '{',
      '{"a":',
      'null',
      '[]',
      '{"__proto__":{"x":1}}',
      '{"constructor":{"prototype":{}}}',
      '[['.repeat(5000),
      '{"a":"\\ud800"}',
      'a=1&b=2',
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
);

const headers = fc.record(
  {
    'content-type': fc.oneof(
      { weight: 6, arbitrary: fc.constant('application/json') },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'application/json; charset=utf-8',
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/json; charset=latin1',
          'application/graphql',
          'nonsense',
        ),
      },
    ),
    'x-api-key': fc.oneof(
      { weight: 12, arbitrary: fc.constant(world.alice.apiKey) },
      { weight: 2, arbitrary: fc.constant(world.bob.apiKey) },
      { weight: 1, arbitrary: hostileText([world.spareKey]) },
    ),
    'last-event-id': hostileText(['1', '0', '99999999999999999999']),
    accept: fc.constantFrom('application/json', 'text/event-stream', 'application/graphql-response+json', '*/*', 'text/html'),
  },
  { requiredKeys: ['x-api-key'] },
);

/** Methods whose requests carry a body here. */
const withBody = new Set(['POST', 'PATCH', 'DELETE', 'PUT']);
/**
 * Deletions run last, those of whole resources (fewer path segments) last of all, so that the
 * other routes still find the rows they are aimed at.
 */
const deletesLast = (r: { method: string; url: string }) => (r.method === 'DELETE' ? 100 - r.url.split('/').length : 0);
const routes = t.routes
  .flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).map((method) => ({ method, url: r.url })))
  .filter((r) => r.method !== 'OPTIONS')
  .sort((a, b) => deletesLast(a) - deletesLast(b));

function pathFor(url: string, values: Record<string, string>) {
  return url.replace(/:(\w+)/g, (_, name: string) => values[name] ?? '').replace(/\*$/, () => values['*'] ?? '');
}

/** A request as a generator draws it for one route. */
function requestFor(url: string) {
  const names = [...url.matchAll(/:(\w+)/g)].map((m) => m[1]!).concat(url.endsWith('*') ? ['*'] : []);
  return fc.record({
    params: fc.record(Object.fromEntries(names.map((n) => [n, segment(n)]))),
    query: fc.option(queryString, { nil: undefined }),
    headers,
    body: fc.option(body, { nil: undefined }),
  });
}

/** An error body: JSON, in one of the documented shapes. */
function expectErrorShape(url: string, res: RawResponse, context: string) {
  // GraphQL over SSE refuses with its events: the errors are in their data lines.
  const json = String(res.headers['content-type']).startsWith('text/event-stream')
    ? ([...res.text.matchAll(/^data: (.+)$/gm)].map((m) => m[1]!).find((d) => d.includes('"errors"')) ?? '')
    : res.text;
  let parsed: unknown;
  expect(() => (parsed = JSON.parse(json)), context).not.toThrow();
  const body = parsed as Record<string, unknown>;
  // GraphQL's own refusals; the transport's (415, 413, ...) come in the shape below.
  if (url === '/graphql' && 'errors' in body) {
    expect(Array.isArray(body.errors) && body.errors.length > 0, context).toBe(true);
    for (const e of body.errors as { message: unknown; extensions?: { code?: unknown } }[]) {
      expect(typeof e.message, context).toBe('string');
      expect(e.extensions?.code, context).not.toBe('INTERNAL_SERVER_ERROR');
    }
    return;
  }
  // MCP's refusals are JSON-RPC's error responses (the SDK's transport answers most of them).
  if (url === '/mcp') {
    const error = body.error as { code?: unknown; message?: unknown } | undefined;
    if (body.jsonrpc === '2.0' && typeof error === 'object') {
      expect([typeof error.code, typeof error.message], context).toEqual(['number', 'string']);
      return;
    }
  }
  const keys = Object.keys(body).sort();
  expect(['error', 'error,message', 'message'], context).toContain(keys.join(','));
  for (const key of keys) expect(typeof body[key] === 'string' && (body[key] as string).length > 0, `${context}: ${key}`).toBe(true);
}

describe('REST fuzz: every route', () => {
  let baseline: string;
  beforeAll(async () => {
    baseline = await settledDigest(t);
  });

  it.each(routes.map((route, i) => ({ ...route, seed: fuzzSeed + i })))('$method $url', async ({ method, url, seed }) => {
    await fc.assert(
      fc.asyncProperty(requestFor(url), async (r) => {
        const path = pathFor(url, r.params) + (r.query ? `?${r.query}` : '');
        const sent = withBody.has(method) ? r.body : undefined;
        const { 'content-type': contentType, ...others } = r.headers;
        const res = await sendRaw(
          t.url,
          method,
          path,
          sent === undefined || contentType === undefined ? others : { ...others, 'content-type': contentType },
          sent,
        );
        if (!res) return;
        const context = `${method} ${path} ${JSON.stringify(r.headers)} ${sent?.slice(0, 300)} → ${res.status} ${res.text.slice(0, 300)}`;
        expect(res.status, context).toBeLessThan(500);
        if (res.status >= 400) {
          if (method !== 'HEAD') {
            expectErrorShape(url, res, context);
            expectNoInternals(res.text, context);
          }
          expect(await databaseDigest(t), `a refused request changed the database: ${context}`).toBe(baseline);
        } else {
          baseline = await settledDigest(t);
        }
      }),
      { numRuns: RUNS, seed, endOnFailure: true },
    );
  });
});
