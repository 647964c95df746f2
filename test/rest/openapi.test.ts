import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restOperations } from '../../src/rest/routes.ts';
import { startMcpToolServer } from '../helpers/mcp-tool-server.ts';
import { startTestApp, type RestResponse, type TestApp, type TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { deref, refsIn, resolveRef, routesFromPrintout, schemaProblems, type SchemaObject } from '../helpers/openapi.ts';
import { settledSession } from '../helpers/sessions.ts';
import { openSse } from '../helpers/sse.ts';
import { until } from '../helpers/until.ts';
import { callCollectionsAndSdkRoutes } from './openapi-v2-calls.ts';
import { searchableCreation } from '../search/support.ts';

let t: TestApp;
let tg: FakeTelegram;
let doc: any;
let alice: TestUser;
let bob: TestUser;

beforeAll(async () => {
  tg = await startFakeTelegram();
  t = await startTestApp({
    deployments: { telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } },
    // A webhook's receiver on loopback (nothing answers there): allowed as for private networks.
    outbound: { allowHttp: true, allowPrivate: true },
  });
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
  const res = await fetch(`${t.url}/v2/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = await res.json();
});
afterAll(async () => {
  await t?.close();
  await tg?.close();
});

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const operationsOf = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([m]) => METHODS.includes(m))
      .map(([method, op]) => ({ path, method, op })),
  );
const operation = (method: string, path: string) => doc.paths[path]?.[method.toLowerCase()];
/** The schema's declared fields (following $ref), for a nested one too: `fields(s, 'budget')`. */
const fields = (schema: SchemaObject, ...within: string[]): string[] => {
  let s = deref(doc, schema);
  for (const key of within) s = deref(doc, s.type === 'array' || s.items ? deref(doc, s.items).properties[key] : s.properties[key]);
  if (s.type === 'array') s = deref(doc, s.items);
  return Object.keys(s.properties ?? {});
};
const jsonBody = (op: any) => op.requestBody?.content?.['application/json']?.schema;
const okJson = (op: any) => op.responses['200'].content['application/json'].schema;
/** The body shape(s) an error status is documented with, as sets of keys. */
const errorShapes = (op: any, status: number): string[][] => {
  const schema = deref(doc, op.responses[String(status)].content['application/json'].schema);
  return (schema.anyOf ?? [schema]).map((s: SchemaObject) => Object.keys(deref(doc, s).properties).sort());
};

describe('GET /v2/openapi.json', () => {
  it('is a structurally valid OpenAPI 3.1 document of the REST layer', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(typeof doc.info.title).toBe('string');
    expect(typeof doc.info.version).toBe('string');
    for (const path of Object.keys(doc.paths)) expect(path).toMatch(/^\/(v2\/|apikeys$)/);

    // Every reference points at something that exists.
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) expect(resolveRef(doc, ref), ref).toBeTypeOf('object');

    const ids = new Set<string>();
    for (const { path, method, op } of operationsOf()) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(typeof op.operationId, where).toBe('string');
      expect(ids.has(op.operationId), `${where}: operationId ${op.operationId} is unique`).toBe(false);
      ids.add(op.operationId);
      // Path templates and path parameters agree, both ways; every parameter has a schema.
      const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters ?? []).filter((p: any) => p.in === 'path');
      expect(declared.map((p: any) => p.name).sort(), where).toEqual(templated.sort());
      for (const p of declared) expect(p.required, `${where} ${p.name}`).toBe(true);
      for (const p of op.parameters ?? []) {
        expect(['path', 'query', 'header', 'cookie'], where).toContain(p.in);
        expect(p.schema, `${where} ${p.name}`).toBeTypeOf('object');
      }
      // Responses are keyed by status, each with a description; one of them is a success.
      expect(
        Object.keys(op.responses).every((s) => /^[1-5]\d\d$/.test(s)),
        where,
      ).toBe(true);
      expect(
        Object.keys(op.responses).some((s) => s.startsWith('2')),
        where,
      ).toBe(true);
      for (const response of Object.values<any>(op.responses)) expect(typeof response.description, where).toBe('string');
      if (op.requestBody) expect(Object.keys(op.requestBody.content), where).toEqual(['application/json']);
      // Security requirements name declared schemes.
      for (const requirement of op.security ?? doc.security)
        for (const scheme of Object.keys(requirement)) expect(doc.components.securitySchemes[scheme], where).toBeDefined();
    }
  });

  it('declares the X-Api-Key scheme for every operation but the public ones', async () => {
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Api-Key' });
    expect(doc.security).toEqual([{ ApiKey: [] }]);
    const open = operationsOf()
      .filter(({ op }) => op.security?.length === 0)
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(open.sort()).toEqual(['GET /v2/openapi.json', 'GET /v2/sessions/share/{share_id}']);
    // And the server agrees: those answer without a key, the others refuse.
    expect((await fetch(`${t.url}/v2/sessions/share/nope`)).status).toBe(404);
    expect((await fetch(`${t.url}/v2/tools`)).status).toBe(401);
    expect(operation('get', '/v2/tools').responses['401']).toBeDefined();
  });

  it('describes every REST route the server has, and no other', () => {
    const served = [...routesFromPrintout(t.app.http.printRoutes({ commonPrefix: false }))]
      .filter(([path]) => path.startsWith('/v2/') || path === '/apikeys')
      .flatMap(([path, methods]) =>
        methods.filter((m) => m !== 'HEAD' && m !== 'OPTIONS').map((m) => `${m} ${path.replace(/:(\w+)/g, '{$1}')}`),
      );
    const described = operationsOf().map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(described.sort()).toEqual(served.sort());
    // Each route the server has is one declaration, and each declaration is one route of the document.
    const declared = restOperations.map((op) => `${op.method.toUpperCase()} ${op.path.replace(/:(\w+)/g, '{$1}')}`);
    expect(declared.sort()).toEqual(served.sort());
    expect(restOperations.map((op) => op.operationId).sort()).toEqual(
      operationsOf()
        .map(({ op }) => op.operationId)
        .sort(),
    );
  });

  it('serves each declared operation with its declared access: public ones without a key, the others 401 {error}', async () => {
    for (const op of restOperations) {
      const where = `${op.method.toUpperCase()} ${op.path}`;
      const res = await t.rest(op.method.toUpperCase(), op.path.replace(/:(\w+)/g, 'nope'), { key: null });
      if (op.public) expect(res.status, where).not.toBe(401);
      else {
        expect(res.status, where).toBe(401);
        expect(Object.keys(res.body), where).toEqual(['error']);
      }
    }
  });

  it('names the 18 operations of the interface with their bodies, parameters and success shapes', () => {
    const spec: [method: string, path: string, params: string[], body: string[] | null, ok: string[]][] = [
      ['GET', '/v2/sessions/shared', [], null, ['sharedSessions']],
      ['DELETE', '/apikeys', [], ['apiKey'], []],
      [
        'PATCH',
        '/v2/agents/{agentId}',
        ['agentId'],
        [
          'name',
          'key',
          'description',
          'image',
          'public',
          'models',
          'persona',
          'isPersonaPublic',
          'greeting',
          'knowledge',
          'voice',
          'suggestions',
          'owner_pays',
          'tools',
          'mcp_tools',
          'llm_settings',
          'tool_approval',
        ],
        ['agentId'],
      ],
      [
        'POST',
        '/v2/sessions',
        [],
        [
          'session_id',
          'content',
          'attachments',
          'stream',
          'thinking',
          'agent_ids',
          'scenario',
          'budget',
          'title',
          'extras',
          'autonomy_settings',
          'while_replying',
        ],
        ['session_id'],
      ],
      ['PATCH', '/v2/concepts/{conceptId}', ['conceptId'], ['name', 'agent', 'usage_instructions', 'images'], ['concept']],
      ['POST', '/v2/sessions/react', [], ['message_id', 'reaction'], ['success', 'message']],
      ['GET', '/v2/tools', [], null, ['tools']],
      [
        'GET',
        '/v2/creations/search',
        [],
        null,
        ['docs', 'total', 'limit', 'pages', 'page', 'pagingCounter', 'hasPrevPage', 'hasNextPage', 'prevPage', 'nextPage'],
      ],
      ['DELETE', '/v2/sessions/{session_id}', ['session_id'], null, ['success']],
      ['GET', '/v2/models/{modelId}', ['modelId'], null, ['model']],
      ['DELETE', '/v2/creations/{creationId}/like', ['creationId'], null, ['message']],
      ['POST', '/v2/creations/{creationId}/like', ['creationId'], null, ['message']],
      ['GET', '/v2/creators/me', [], null, ['balance', 'subscriptionBalance', 'foreverBalance', 'creator']],
      ['GET', '/v2/concepts/{conceptId}', ['conceptId'], null, ['concept']],
      ['GET', '/v2/agents/deployments', [], null, ['deployments']],
      ['GET', '/v2/agents/triggers', [], null, ['triggers']],
      ['GET', '/v2/agents/{agentId}', ['agentId'], null, ['agent']],
      ['GET', '/v2/sessions/share/{share_id}', ['share_id'], null, ['share']],
    ];
    for (const [method, path, params, body, ok] of spec) {
      const where = `${method} ${path}`;
      const op = operation(method, path);
      expect(op, where).toBeDefined();
      expect(
        (op.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name),
        where,
      ).toEqual(params);
      if (body) expect(fields(jsonBody(op)).sort(), where).toEqual(body.sort());
      else expect(op.requestBody, where).toBeUndefined();
      expect(fields(okJson(op)), where).toEqual(expect.arrayContaining(ok));
    }

    // The nested request fields, in the spec's spelling, with the rules the service checks.
    const send = jsonBody(operation('POST', '/v2/sessions'));
    expect(fields(send, 'budget').sort()).toEqual(['manna_budget', 'token_budget', 'turn_budget']);
    expect(fields(send, 'extras')).toEqual(['exclude_memory']);
    expect(fields(send, 'autonomy_settings').sort()).toEqual(['actor_selection_method', 'auto_reply', 'reply_interval']);
    expect(deref(doc, send).properties.autonomy_settings.properties.reply_interval).toMatchObject({ minimum: 0, maximum: 3600 });
    expect(deref(doc, send).properties.agent_ids).toMatchObject({ type: 'array', maxItems: 10 });
    expect(deref(doc, send).properties.budget.properties.manna_budget).toMatchObject({ minimum: 100, maximum: 50000 });
    const agent = jsonBody(operation('PATCH', '/v2/agents/{agentId}'));
    expect(fields(agent, 'models').sort()).toEqual(['lora', 'use_when']);
    expect(fields(agent, 'suggestions').sort()).toEqual(['label', 'prompt']);
    expect(fields(agent, 'llm_settings').sort()).toEqual([
      'model_profile',
      'thinking_effort_cap',
      'thinking_effort_instructions',
      'thinking_policy',
    ]);
    expect(deref(doc, agent).properties.llm_settings.properties.model_profile.enum).toEqual(expect.arrayContaining(['low']));
    expect(deref(doc, agent).properties.owner_pays.enum).toEqual(expect.arrayContaining(['off']));
    expect(fields(jsonBody(operation('PATCH', '/v2/concepts/{conceptId}')), 'images').sort()).toEqual(['image', 'usage_instructions']);

    // Nested success fields: the spec's, and the registry's full base model name beside the short one.
    expect(fields(okJson(operation('GET', '/v2/tools')), 'tools').sort()).toEqual(
      [
        'base_model_id',
        'active',
        'base_model',
        'cost_estimate',
        'description',
        'key',
        'name',
        'order',
        'output_type',
        'parameters',
        'resolutions',
        'thumbnail',
      ].sort(),
    );
    expect(fields(okJson(operation('GET', '/v2/sessions/share/{share_id}')), 'share')).toEqual(
      expect.arrayContaining(['share_id', 'session', 'messages', 'owner', 'createdAt', 'title']),
    );
    expect(deref(doc, okJson(operation('GET', '/v2/sessions/shared'))).required).toContain('sharedSessions');
    expect(operation('GET', '/v2/creations/search').parameters.map((p: any) => p.name)).toEqual(
      expect.arrayContaining(['query', 'page', 'limit']),
    );
  });

  it('answers stream: true with an event stream whose frames are described', () => {
    const content = operation('POST', '/v2/sessions').responses['200'].content;
    expect(Object.keys(content).sort()).toEqual(['application/json', 'text/event-stream']);
    const frame = deref(doc, content['text/event-stream'].schema);
    expect(frame.anyOf.map((s: SchemaObject) => deref(doc, s).properties.event.enum[0]).sort()).toEqual(['done', 'error', 'update']);
    const watch = operation('GET', '/v2/sessions/{session_id}/events');
    expect(Object.keys(watch.responses['200'].content)).toEqual(['text/event-stream']);
    expect(watch.parameters.map((p: any) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(['query:after', 'header:last-event-id']));
  });

  it('gives each resource its error body shape (docs/decisions.md)', () => {
    const shapes = (method: string, path: string, status: number) => errorShapes(operation(method, path), status);
    expect(shapes('GET', '/v2/sessions/shared', 401)).toEqual([['error']]);
    expect(shapes('GET', '/v2/sessions/shared', 500)).toEqual([['error', 'message']]);
    expect(shapes('GET', '/v2/agents/{agentId}', 404)).toEqual([['error']]);
    expect(shapes('PATCH', '/v2/agents/{agentId}', 409)).toEqual([['error']]);
    expect(shapes('PATCH', '/v2/agents/{agentId}', 422)).toEqual([['error']]);
    expect(shapes('GET', '/v2/concepts/{conceptId}', 403)).toEqual([['message']]);
    expect(shapes('GET', '/v2/models/{modelId}', 404)).toEqual([['message']]);
    expect(shapes('POST', '/v2/sessions', 403)).toEqual([['message']]);
    expect(shapes('POST', '/v2/sessions', 400)).toEqual([['message'], ['error', 'message']]);
    expect(shapes('DELETE', '/v2/sessions/{session_id}', 404)).toEqual([['error', 'message']]);
    expect(shapes('DELETE', '/v2/sessions/{session_id}', 401)).toEqual([['error'], ['error', 'message']]);
    expect(shapes('GET', '/v2/sessions/share/{share_id}', 404)).toEqual([['error']]);
    expect(shapes('POST', '/v2/creations/{creationId}/like', 400)).toEqual([['message']]);
    expect(shapes('DELETE', '/apikeys', 401)).toEqual([['error'], ['message']]);
  });
});

describe('what the server answers matches what the document says', () => {
  const seen = new Set<string>();

  /** Checks a response against the document: its status is listed, and its body fits the schema given for it. */
  function conforms(method: string, template: string, res: RestResponse) {
    const op = operation(method, template);
    expect(op, `${method} ${template} is described`).toBeDefined();
    const response = op.responses[String(res.status)];
    expect(response, `${method} ${template} answered ${res.status}, which is not described: ${JSON.stringify(res.body)}`).toBeDefined();
    const type = res.headers.get('content-type')!.split(';')[0]!;
    const schema = response.content[type]?.schema;
    expect(schema, `${method} ${template} ${res.status} as ${type}`).toBeDefined();
    expect(schemaProblems(doc, schema, res.body, { closed: true }), `${method} ${template} ${res.status}`).toEqual([]);
    if (res.status === 200 || res.status === 201) seen.add(`${method} ${template}`);
    return res;
  }
  const call = async (method: string, template: string, path: string, key: string | null, body?: unknown) =>
    conforms(method, template, await t.rest(method, path, { key, body }));

  it('for every operation, successes and errors alike', async () => {
    const f = fixtures(t);
    const agent = await f.agent(alice, { name: 'Guide', key: 'guide', tools: { flux_dev: true } });
    const concept = await f.concept(alice, { agent: agent.id });
    const model = await f.model(alice, { public: false });
    const creation = await searchableCreation(t, bob, { name: 'Lighthouse at dusk', prompt: 'a lighthouse at dusk' });
    await f.deployment(agent.id, alice.id);
    const daily = await f.trigger(agent.id, alice.id);
    const a = alice.apiKey;

    await call('GET', '/v2/agents/{agentId}', `/v2/agents/${agent.id}`, a);
    await call('GET', '/v2/agents/{agentId}', '/v2/agents/nope', a);
    await call('PATCH', '/v2/agents/{agentId}', `/v2/agents/${agent.id}`, a, {
      description: 'Shows the way',
      llm_settings: { model_profile: 'low' },
    });
    await call('PATCH', '/v2/agents/{agentId}', `/v2/agents/${agent.id}`, a, { llm_settings: { model_profile: 'huge' } });
    await call('PATCH', '/v2/agents/{agentId}', `/v2/agents/${agent.id}`, bob.apiKey, { name: 'Mine now' });
    await call('GET', '/v2/agents/deployments', '/v2/agents/deployments', a);
    const deploymentEvents = await openSse(`${t.url}/v2/agents/deployments/events?agent_id=${agent.id}`, { headers: { 'x-api-key': a } });
    expect(deploymentEvents.status).toBe(200);
    const deployments = `/v2/agents/${agent.id}/deployments`;
    const deploy = (key: string, body: unknown) => call('POST', '/v2/agents/{agentId}/deployments', deployments, key, body);
    await deploy(a, { platform: 'telegram', secrets: { telegram: { token: tg.addBot('openapi_bot') } } });
    await deploy(a, { platform: 'telegram', secrets: { telegram: { token: 'not a token' } } });
    await deploy(bob.apiKey, { platform: 'telegram' });
    tg.down();
    await deploy(a, { platform: 'telegram', secrets: { telegram: { token: tg.addBot() } } });
    tg.up();
    await call('GET', '/v2/agents/deployments', '/v2/agents/deployments', a);
    await call('GET', '/v2/agents/{agentId}/deployments', deployments, a);
    await call('GET', '/v2/agents/{agentId}/deployments', '/v2/agents/nope/deployments', a);
    await call('PATCH', '/v2/agents/{agentId}/deployments', deployments, a, { platform: 'telegram', config: { daily_manna_cap: 5 } });
    await call('PATCH', '/v2/agents/{agentId}/deployments', deployments, a, { platform: 'telegram', config: { daily_manna_cap: -1 } });
    await call('POST', '/v2/agents/{agentId}/deployments/stop', `${deployments}/stop`, a, { platform: 'telegram' });
    await call('DELETE', '/v2/agents/{agentId}/deployments/{platform}', `${deployments}/telegram`, a);
    await call('DELETE', '/v2/agents/{agentId}/deployments/{platform}', `${deployments}/telegram`, a);
    await deploymentEvents.waitFor((f) => f.data?.data?.deleted === true);
    deploymentEvents.close();
    const deploymentFrames = operation('GET', '/v2/agents/deployments/events').responses['200'].content['text/event-stream'].schema;
    for (const frame of deploymentEvents.frames) expect(schemaProblems(doc, deploymentFrames, frame.data, { closed: true })).toEqual([]);
    seen.add('GET /v2/agents/deployments/events');
    await call('GET', '/v2/agents/deployments/events', `/v2/agents/deployments/events?agent_id=${agent.id}`, bob.apiKey);
    await call('GET', '/v2/agents/deployments/events', '/v2/agents/deployments/events?agent_id=nope', a);
    await call('GET', '/v2/agents/triggers', '/v2/agents/triggers', a);
    await call('GET', '/v2/concepts/{conceptId}', `/v2/concepts/${concept.id}`, a);
    await call('GET', '/v2/concepts/{conceptId}', `/v2/concepts/${concept.id}`, bob.apiKey);
    await call('PATCH', '/v2/concepts/{conceptId}', `/v2/concepts/${concept.id}`, a, {
      usage_instructions: 'Use it well',
      images: [{ image: 'https://example.com/b.png', usage_instructions: 'side' }],
    });
    await call('GET', '/v2/models/{modelId}', `/v2/models/${model.id}`, a);
    await call('GET', '/v2/models/{modelId}', `/v2/models/${model.id}`, bob.apiKey);
    await call('GET', '/v2/tools', '/v2/tools', a);
    await call('GET', '/v2/tools', '/v2/tools', null);
    await call('GET', '/v2/tools/{toolKey}', '/v2/tools/flux_dev', a);
    await call('GET', '/v2/tools/{toolKey}', '/v2/tools/sdxl', a);
    await call('GET', '/v2/creators/me', '/v2/creators/me', a);
    const search = await call('GET', '/v2/creations/search', '/v2/creations/search?query=lighthouse', a);
    expect(search.body.docs.length).toBeGreaterThan(0);
    await call('GET', '/v2/creations/search', '/v2/creations/search?query=lighthouse&limit=0', a);
    await call('POST', '/v2/creations/{creationId}/like', `/v2/creations/${creation.id}/like`, a);
    await call('POST', '/v2/creations/{creationId}/like', `/v2/creations/${creation.id}/like`, a);
    await call('DELETE', '/v2/creations/{creationId}/like', `/v2/creations/${creation.id}/like`, a);
    await call('DELETE', '/v2/creations/{creationId}/like', `/v2/creations/${creation.id}/like`, a);

    const started = await call('POST', '/v2/sessions', '/v2/sessions', a, {
      agent_ids: [agent.id],
      content: 'Hello there',
      budget: { manna_budget: 500 },
    });
    const sessionId = started.body.session_id as string;
    await call('POST', '/v2/sessions', '/v2/sessions', a, { agent_ids: [agent.id], content: 'Hi', budget: { manna_budget: 5 } });
    await call('POST', '/v2/sessions', '/v2/sessions', a, { session_id: sessionId, content: '{"broken"', stream: 'yes' });
    await call('POST', '/v2/sessions', '/v2/sessions', bob.apiKey, { session_id: sessionId, content: 'Let me in' });
    const stream = await openSse(`${t.url}/v2/sessions`, {
      method: 'POST',
      headers: { 'x-api-key': a, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: sessionId, content: 'Tell me more', stream: true }),
    });
    const frames = await stream.done;
    expect(frames.length).toBeGreaterThan(3);
    const frameSchema = operation('POST', '/v2/sessions').responses['200'].content['text/event-stream'].schema;
    for (const frame of frames)
      expect(schemaProblems(doc, frameSchema, frame.data, { closed: true }), JSON.stringify(frame.data).slice(0, 200)).toEqual([]);
    seen.add('POST /v2/sessions (stream)');
    const settled = await settledSession(t, alice, sessionId);

    await call('GET', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}?limit=2`, a);
    await call('GET', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}?limit=-1`, a);
    await call('GET', '/v2/sessions', '/v2/sessions?limit=1', a);
    await call('GET', '/v2/sessions', `/v2/sessions?page=1&limit=5&agent_id=${agent.user.username}`, a);
    await call('GET', '/v2/sessions', '/v2/sessions?agent_id=no-such-agent', a);
    await call('PATCH', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a, { title: 'Renamed' });
    await call('PATCH', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a, {});
    await call('PATCH', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, bob.apiKey, { title: 'Mine' });
    await call('PATCH', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a, {
      autonomy_settings: { auto_reply: false, reply_interval: 5, actor_selection_method: 'random_exclude_last' },
    });
    await call('PATCH', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a, { autonomy_settings: { auto_reply: true } });
    await call('POST', '/v2/sessions/create', '/v2/sessions/create', a, {
      agent_ids: [agent.id],
      autonomy_settings: { auto_reply: true, reply_interval: 0, actor_selection_method: 'random' },
    });
    await call('POST', '/v2/sessions/create', '/v2/sessions/create', a, { agent_ids: [agent.id], title: 'Empty for now' });
    await call('POST', '/v2/sessions/create', '/v2/sessions/create', a, { agent_ids: [] });
    await call('POST', '/v2/sessions/{session_id}/users', `/v2/sessions/${sessionId}/users`, a, { username: 'bob', permission: 'editor' });
    await call('GET', '/v2/sessions/shared', '/v2/sessions/shared', bob.apiKey);
    await call('GET', '/v2/sessions/shared', '/v2/sessions/shared', 'not-a-key');
    const watch = await openSse(`${t.url}/v2/sessions/${sessionId}/events`, { headers: { 'x-api-key': bob.apiKey } });
    expect(watch.status).toBe(200);
    await call('POST', '/v2/sessions/react', '/v2/sessions/react', a, { message_id: settled.messages[0].id, reaction: '👍' });
    await call('POST', '/v2/sessions/react', '/v2/sessions/react', a, { message_id: 'nope', reaction: '👍' });
    await watch.waitFor((f) => f.data?.data?.type === 'reaction');
    watch.close();
    const watchSchema = operation('GET', '/v2/sessions/{session_id}/events').responses['200'].content['text/event-stream'].schema;
    for (const frame of watch.frames) expect(schemaProblems(doc, watchSchema, frame.data, { closed: true })).toEqual([]);
    seen.add('GET /v2/sessions/{session_id}/events');
    await call('DELETE', '/v2/sessions/{session_id}/users/{user_id}', `/v2/sessions/${sessionId}/users/${bob.id}`, a);
    // A call that waits for approval (the offline responder draws when asked), denied by its payer.
    const careful = await f.agent(alice, {
      name: 'Careful',
      key: 'careful',
      tools: { flux_schnell: true },
      toolApproval: { tools: { flux_schnell: 'always' } },
    });
    const asked = await t.rest('POST', '/v2/sessions', { key: a, body: { agent_ids: [careful.id], content: 'Please draw a boat' } });
    const waiting = await until('the call to wait for approval', () =>
      t.db.task.findFirst({ where: { sessionId: asked.body.session_id, status: 'awaiting_approval' } }),
    );
    const approval = `/v2/sessions/${asked.body.session_id}/approvals`;
    await call('POST', '/v2/sessions/{session_id}/approvals/{call_id}', `${approval}/${waiting.id}`, a, { approve: 'yes' });
    await call('POST', '/v2/sessions/{session_id}/approvals/{call_id}', `${approval}/nope`, a, { approve: true });
    await call('POST', '/v2/sessions/{session_id}/approvals/{call_id}', `${approval}/${waiting.id}`, a, {
      approve: false,
      reason: 'not now',
    });
    await call('POST', '/v2/sessions/{session_id}/approvals/{call_id}', `${approval}/${waiting.id}`, a, { approve: true });
    await call('POST', '/v2/sessions/{session_id}/cancel', `/v2/sessions/${sessionId}/cancel`, a, {});
    await call('POST', '/v2/sessions/{session_id}/cancel', `/v2/sessions/${sessionId}/cancel`, a, { prompt_id: 7 });
    const shared = await call('POST', '/v2/sessions/{session_id}/share', `/v2/sessions/${sessionId}/share`, a);
    await call('POST', '/v2/sessions/{session_id}/share', `/v2/sessions/${sessionId}/share`, a, { message_id: 'nope' });
    await call('GET', '/v2/sessions/share/{share_id}', `/v2/sessions/share/${shared.body.share.share_id}`, null);
    await call('GET', '/v2/sessions/share/{share_id}', '/v2/sessions/share/nope', null);
    await call('DELETE', '/v2/sessions/share/{share_id}', `/v2/sessions/share/${shared.body.share_id}`, bob.apiKey);
    await call('DELETE', '/v2/sessions/share/{share_id}', `/v2/sessions/share/${shared.body.share_id}`, a);
    await call('DELETE', '/v2/sessions/share/{share_id}', `/v2/sessions/share/${shared.body.share_id}`, a);

    await t.db.memory.create({
      data: { agentId: agent.id, userId: alice.id, sessionId, fact: 'Likes lighthouses', key: 'likes lighthouses' },
    });
    const memories = await call('GET', '/v2/agents/{agentId}/memories', `/v2/agents/${agent.id}/memories`, a);
    await call('DELETE', '/v2/agents/{agentId}/memories/{memoryId}', `/v2/agents/${agent.id}/memories/${memories.body.memories[0].id}`, a);
    await call('DELETE', '/v2/agents/{agentId}/memories/{memoryId}', `/v2/agents/${agent.id}/memories/${memories.body.memories[0].id}`, a);
    await call('DELETE', '/v2/agents/{agentId}/memories', `/v2/agents/${agent.id}/memories`, a);

    const triggers = `/v2/agents/${agent.id}/triggers`;
    const triggerEvents = await openSse(`${t.url}/v2/agents/triggers/events`, { headers: { 'x-api-key': a } });
    expect(triggerEvents.status).toBe(200);
    await call('GET', '/v2/agents/{agentId}/triggers', triggers, a);
    await call('GET', '/v2/agents/{agentId}/triggers', triggers, bob.apiKey);
    const made = await call('POST', '/v2/agents/{agentId}/triggers', triggers, a, {
      name: 'Weekly',
      prompt: 'Sum up the week',
      schedule: { second: '0', minute: '0', hour: '17', day_of_week: 'fri', timezone: 'Europe/Paris' },
    });
    await call('POST', '/v2/agents/{agentId}/triggers', triggers, a, { prompt: 'Hi', schedule: { hour: '99' } });
    const one = `${triggers}/${made.body.triggerId}`;
    await call('GET', '/v2/agents/{agentId}/triggers/{triggerId}', one, a);
    await call('GET', '/v2/agents/{agentId}/triggers/{triggerId}', `${triggers}/nope`, a);
    await call('PATCH', '/v2/agents/{agentId}/triggers/{triggerId}', one, a, { status: 'paused' });
    await call('PATCH', '/v2/agents/{agentId}/triggers/{triggerId}', one, a, { schedule: { timezone: 'Moon/Base' } });
    await call('POST', '/v2/agents/{agentId}/triggers/{triggerId}/run', `${triggers}/${daily.id}/run`, a);
    await call('POST', '/v2/agents/{agentId}/triggers/{triggerId}/run', `${triggers}/nope/run`, a);
    await call('DELETE', '/v2/agents/{agentId}/triggers/{triggerId}', one, a);
    await call('DELETE', '/v2/agents/{agentId}/triggers/{triggerId}', one, a);
    await triggerEvents.waitFor((f) => f.data?.data?.change === 'deleted');
    triggerEvents.close();
    const triggerFrames = operation('GET', '/v2/agents/triggers/events').responses['200'].content['text/event-stream'].schema;
    for (const frame of triggerEvents.frames) expect(schemaProblems(doc, triggerFrames, frame.data, { closed: true })).toEqual([]);
    seen.add('GET /v2/agents/triggers/events');

    await call('DELETE', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, bob.apiKey);
    await call('DELETE', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a);
    await call('DELETE', '/v2/sessions/{session_id}', `/v2/sessions/${sessionId}`, a);

    const spare = (await t.services.apiKeys.create(alice.id)).apiKey;
    await call('DELETE', '/apikeys', '/apikeys', a, { apiKey: spare });
    await call('DELETE', '/apikeys', '/apikeys', a, { apiKey: spare });
    await call('DELETE', '/apikeys', '/apikeys', a, {});
    await call('GET', '/v2/openapi.json', '/v2/openapi.json', null);
    await callCollectionsAndSdkRoutes(t, alice, bob, call);

    // Tasks: created, estimated, listed, read and cancelled; refused for bad input, a balance too small, or not found.
    await t.services.manna.grant('alice', '5', 'forever');
    await call('POST', '/v2/tasks/cost', '/v2/tasks/cost', a, { tool: 'flux_dev', args: { prompt: 'a lighthouse' } });
    await call('POST', '/v2/tasks/cost', '/v2/tasks/cost', a, { tool: 'flux_dev', args: {} });
    const taskEvents = await openSse(`${t.url}/v2/tasks/events`, { headers: { 'x-api-key': a } }, { apart: ['task-update'] });
    expect(taskEvents.status).toBe(200);
    const task = await call('POST', '/v2/tasks/create', '/v2/tasks/create', a, {
      tool: 'flux_schnell',
      args: { prompt: 'a lighthouse', n_samples: 1 },
      makePublic: true,
    });
    await call('POST', '/v2/tasks/create', '/v2/tasks/create', a, { tool: 'nope' });
    await call('POST', '/v2/tasks/create', '/v2/tasks/create', bob.apiKey, { tool: 'flux_dev', args: { prompt: 'x' } });
    // Completed once its stream says so (which GET /v2/tasks/{taskId} then shows).
    await taskEvents.waitFor((f) => f.data?.data?.type === 'task_completed');
    expect((await call('GET', '/v2/tasks/{taskId}', `/v2/tasks/${task.body.task._id}`, a)).body.task.status).toBe('completed');
    taskEvents.close();
    const taskEventsSchema = operation('GET', '/v2/tasks/events').responses['200'].content['text/event-stream'].schema;
    const types = taskEvents.frames.map((f) => f.data.data.type);
    expect([...types.slice(0, 2), types.at(-1)]).toEqual(['task_created', 'task_started', 'task_completed']);
    for (const frame of taskEvents.frames) expect(schemaProblems(doc, taskEventsSchema, frame.data, { closed: true })).toEqual([]);
    seen.add('GET /v2/tasks/events');
    await call('GET', '/v2/tasks/events', '/v2/tasks/events?taskId=nope', a);
    await call('GET', '/v2/tasks/events', '/v2/tasks/events?after=x', a);
    await call('GET', '/v2/tasks/{taskId}', '/v2/tasks/nope', a);
    await call('GET', '/v2/tasks', '/v2/tasks?status=completed&limit=5', a);
    await call('GET', '/v2/tasks', '/v2/tasks?status=finished', a);
    await call('POST', '/v2/tasks/cancel', '/v2/tasks/cancel', a, { taskId: task.body.task._id });
    await call('POST', '/v2/tasks/cancel', '/v2/tasks/cancel', bob.apiKey, { taskId: task.body.task._id });
    await call('POST', '/v2/tasks/cancel', '/v2/tasks/cancel', a, { taskId: 'nope' });
    await call('POST', '/v2/tasks/cancel', '/v2/tasks/cancel', a, {});

    const hookEvents = await openSse(`${t.url}/v2/webhooks/events`, { headers: { 'x-api-key': a } });
    const hook = await call('POST', '/v2/webhooks', '/v2/webhooks', a, { url: 'http://127.0.0.1:9/hook', event_types: ['webhook.test'] });
    await call('POST', '/v2/webhooks', '/v2/webhooks', a, { url: 'http://127.0.0.1:9/hook', event_types: ['task.exploded'] });
    const hookPath = `/v2/webhooks/${hook.body.webhook.id}`;
    await call('GET', '/v2/webhooks', '/v2/webhooks', a);
    await call('GET', '/v2/webhooks/{webhookId}', hookPath, a);
    await call('GET', '/v2/webhooks/{webhookId}', hookPath, bob.apiKey);
    await call('PATCH', '/v2/webhooks/{webhookId}', hookPath, a, { description: 'CI', enabled: false });
    await call('PATCH', '/v2/webhooks/{webhookId}', hookPath, a, {});
    await call('POST', '/v2/webhooks/{webhookId}/rotate', `${hookPath}/rotate`, a, { overlap_seconds: 60 });
    await call('POST', '/v2/webhooks/{webhookId}/rotate', `${hookPath}/rotate`, a, { overlap_seconds: -1 });
    const tested = await call('POST', '/v2/webhooks/{webhookId}/test', `${hookPath}/test`, a);
    // Its one frame (webhook_disabled, after days of failures) is checked field by field in test/webhooks/webhooks.test.ts.
    expect(hookEvents.status).toBe(200);
    hookEvents.close();
    seen.add('GET /v2/webhooks/events');
    await call('GET', '/v2/webhooks/events', '/v2/webhooks/events?after=x', a);
    await call('GET', '/v2/webhooks/{webhookId}/deliveries', `${hookPath}/deliveries?limit=5`, a);
    await call('GET', '/v2/webhooks/{webhookId}/deliveries', `${hookPath}/deliveries?limit=0`, a);
    const redeliver = '/v2/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver';
    await call('POST', redeliver, `${hookPath}/deliveries/${tested.body.delivery.id}/redeliver`, a);
    await call('POST', redeliver, `${hookPath}/deliveries/nope/redeliver`, a);
    await call('DELETE', '/v2/webhooks/{webhookId}', hookPath, a);
    await call('DELETE', '/v2/webhooks/{webhookId}', hookPath, a);

    const mcp = await call('POST', '/v2/mcp/servers', '/v2/mcp/servers', a, {
      name: 'tools',
      url: 'http://127.0.0.1:9/mcp',
      headers: { Authorization: 'Bearer x', 'X-Team': 'ci' },
      price_per_call: 1,
    });
    await call('POST', '/v2/mcp/servers', '/v2/mcp/servers', a, { name: 'Bad Name', url: 'http://127.0.0.1:9/mcp' });
    await call('POST', '/v2/mcp/servers', '/v2/mcp/servers', a, { name: 'tools', url: 'http://127.0.0.1:9/mcp' });
    const mcpPath = `/v2/mcp/servers/${mcp.body.server.id}`;
    await call('GET', '/v2/mcp/servers', '/v2/mcp/servers', a);
    await call('GET', '/v2/mcp/servers/{serverId}', mcpPath, a);
    await call('GET', '/v2/mcp/servers/{serverId}', mcpPath, bob.apiKey);
    await call('GET', '/v2/mcp/servers/{serverId}/tools', `${mcpPath}/tools`, a);
    // A success needs a server that answers: the SDK's own, on loopback, for this call alone.
    const loopback = await startMcpToolServer();
    try {
      const served = await call('POST', '/v2/mcp/servers', '/v2/mcp/servers', a, { name: 'loopback', url: loopback.url });
      await call('GET', '/v2/mcp/servers/{serverId}/tools', `/v2/mcp/servers/${served.body.server.id}/tools`, a);
    } finally {
      await loopback.close();
    }
    await call('GET', '/v2/mcp/servers/{serverId}/tools', `${mcpPath}/tools`, bob.apiKey);
    await call('PATCH', '/v2/mcp/servers/{serverId}', mcpPath, a, { headers: { 'X-Team': null }, price_per_call: 2 });
    await call('PATCH', '/v2/mcp/servers/{serverId}', mcpPath, a, {});
    await call('DELETE', '/v2/mcp/servers/{serverId}', mcpPath, a);
    await call('DELETE', '/v2/mcp/servers/{serverId}', mcpPath, a);

    const untried = operationsOf()
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`)
      .filter((o) => !seen.has(o));
    expect(untried).toEqual([]);
  });
});
