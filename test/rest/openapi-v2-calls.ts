import { expect } from 'vitest';
import type { RestResponse, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { settledSession } from '../helpers/sessions.ts';

type Call = (method: string, template: string, path: string, key: string | null, body?: unknown) => Promise<RestResponse>;

/**
 * The calls `openapi.test.ts` makes to the collections, threads and the SDK's other v2 routes:
 * each operation answered once with success and with its errors, every body checked there
 * against the document.
 */
export async function callCollectionsAndSdkRoutes(t: TestApp, alice: TestUser, bob: TestUser, call: Call) {
  const f = fixtures(t);
  const a = alice.apiKey;
  const b = bob.apiKey;

  const made = await call('POST', '/v2/agents', '/v2/agents', a, { name: 'Spare', key: 'spare-agent', tools: { flux_dev: [] } });
  expect(made.status).toBe(201);
  await call('POST', '/v2/agents', '/v2/agents', b, { name: 'Spare', key: 'spare-agent' });
  await call('POST', '/v2/agents', '/v2/agents', a, { key: 'no-name' });
  await call('DELETE', '/v2/agents/{agentId}', `/v2/agents/${made.body.agentId}`, b);
  await call('DELETE', '/v2/agents/{agentId}', `/v2/agents/${made.body.agentId}`, a);
  await call('DELETE', '/v2/agents/{agentId}', `/v2/agents/${made.body.agentId}`, a);

  const model = await f.model(alice, { public: false });
  await call('GET', '/v2/models', '/v2/models?limit=5', a);
  await call('GET', '/v2/models', '/v2/models?limit=500', a);
  await call('PATCH', '/v2/models/{modelId}', `/v2/models/${model.id}`, a, { public: true, name: 'Renamed LoRA' });
  await call('PATCH', '/v2/models/{modelId}', `/v2/models/${model.id}`, b, { public: false });
  await call('PATCH', '/v2/models/{modelId}', '/v2/models/nope', a, { public: false });
  await call('PATCH', '/v2/models/{modelId}', `/v2/models/${model.id}`, a, {});

  const [mine, other] = [await f.creation(alice), await f.creation(alice)];
  const bobs = await f.creation(bob);
  await call('GET', '/v2/creations/{creationId}', `/v2/creations/${mine.id}`, b);
  await call('GET', '/v2/creations/{creationId}', '/v2/creations/nope', a);
  await call('PATCH', '/v2/creations/{creationId}', `/v2/creations/${mine.id}`, a, { name: 'Harbour at night' });
  await call('PATCH', '/v2/creations/{creationId}', `/v2/creations/${mine.id}`, b, { public: false });
  await call('PATCH', '/v2/creations/{creationId}', '/v2/creations/nope', a, { public: false });
  await call('PATCH', '/v2/creations/{creationId}', `/v2/creations/${mine.id}`, a, { public: 'no' });
  await call('PATCH', '/v2/creations/bulk', '/v2/creations/bulk', a, { creationIds: [mine.id, other.id], public: true });
  await call('PATCH', '/v2/creations/bulk', '/v2/creations/bulk', a, { creationIds: [mine.id, bobs.id], public: true });
  await call('PATCH', '/v2/creations/bulk', '/v2/creations/bulk', a, { creationIds: ['nope'], public: true });
  await call('PATCH', '/v2/creations/bulk', '/v2/creations/bulk', a, { creationIds: [], public: true });

  await call('GET', '/v2/creators/{userId}', `/v2/creators/${bob.id}`, a);
  await call('GET', '/v2/creators/{userId}', '/v2/creators/nope', a);

  const created = await call('POST', '/v2/collections', '/v2/collections', a, { name: 'Harbours', creationIds: [mine.id, bobs.id] });
  const id = created.body.collectionId as string;
  await call('POST', '/v2/collections', '/v2/collections', a, { name: '' });
  await call('GET', '/v2/collections/light', '/v2/collections/light', a);
  await call('GET', '/v2/collections/light', '/v2/collections/light?limit=0', a);
  await call('GET', '/v2/collections/{collectionId}', `/v2/collections/${id}`, b);
  await call('GET', '/v2/collections/{collectionId}', '/v2/collections/nope', a);
  await call('GET', '/v2/collections/{collectionId}/creations', `/v2/collections/${id}/creations?limit=1`, a);
  await call('GET', '/v2/collections/{collectionId}/creations', `/v2/collections/${id}/creations?cursor=nope`, a);
  await call('GET', '/v2/collections/{collectionId}/creations', '/v2/collections/nope/creations', a);
  await call('PATCH', '/v2/collections/{collectionId}/creations/add', `/v2/collections/${id}/creations/add`, a, {
    creationIds: [other.id],
  });
  await call('PATCH', '/v2/collections/{collectionId}/creations/add', `/v2/collections/${id}/creations/add`, b, { creationIds: [bobs.id] });
  await call('PATCH', '/v2/collections/{collectionId}/creations/add', `/v2/collections/${id}/creations/add`, a, { creationIds: ['nope'] });
  await call('PATCH', '/v2/collections/{collectionId}/creations/add', '/v2/collections/nope/creations/add', a, { creationIds: [mine.id] });
  await call('PATCH', '/v2/collections/{collectionId}/creations/remove', `/v2/collections/${id}/creations/remove`, a, {
    creationIds: [other.id],
  });
  await call('PATCH', '/v2/collections/{collectionId}/creations/remove', `/v2/collections/${id}/creations/remove`, a, {});
  await call('PATCH', '/v2/collections/{collectionId}/creations/remove', `/v2/collections/${id}/creations/remove`, b, {
    creationIds: [mine.id],
  });
  await call('PATCH', '/v2/collections/{collectionId}/creations/remove', '/v2/collections/nope/creations/remove', a, {
    creationIds: [mine.id],
  });
  await call('PATCH', '/v2/collections/{collectionId}', `/v2/collections/${id}`, a, { description: 'Quays and boats', public: false });
  await call('PATCH', '/v2/collections/{collectionId}', `/v2/collections/${id}`, a, { public: 'sometimes' });
  await call('PATCH', '/v2/collections/{collectionId}', `/v2/collections/${id}`, b, { name: 'Mine' });
  const open = await call('POST', '/v2/collections', '/v2/collections', a, { name: 'Open' });
  await call('PATCH', '/v2/collections/{collectionId}', `/v2/collections/${open.body.collectionId}`, b, { name: 'Mine' });
  await call('DELETE', '/v2/collections/{collectionId}', `/v2/collections/${open.body.collectionId}`, b);
  await call('DELETE', '/v2/collections/{collectionId}', `/v2/collections/${id}`, a);
  await call('DELETE', '/v2/collections/{collectionId}', `/v2/collections/${id}`, a);

  const agent = await f.agent(alice, { name: 'Scribe', key: 'scribe-threads' });
  const thread = await call('POST', '/v2/threads/create', '/v2/threads/create', a, { agent_id: agent.id, content: 'Hello' });
  const threadId = thread.body.thread_id as string;
  await call('POST', '/v2/threads/create', '/v2/threads/create', a, { agent_id: agent.id, content: '' });
  const settled = await settledSession(t, alice, threadId);
  await call('POST', '/v2/threads', '/v2/threads', a, { thread_id: threadId, content: 'And again' });
  await call('POST', '/v2/threads', '/v2/threads', b, { thread_id: threadId, content: 'Me too' });
  await call('POST', '/v2/threads', '/v2/threads', a, { content: 'Nobody to answer' });
  await settledSession(t, alice, threadId);
  await call('POST', '/v2/threads/react', '/v2/threads/react', a, { message_id: settled.messages[0].id, reaction: 'thumbs_up' });
  await call('POST', '/v2/threads/react', '/v2/threads/react', b, { message_id: settled.messages[0].id, reaction: 'thumbs_up' });
  await call('POST', '/v2/threads/react', '/v2/threads/react', a, { message_id: settled.messages[0].id, reaction: 'meh' });
  await call('GET', '/v2/threads', `/v2/threads?agent_id=${agent.id}`, a);
  await call('GET', '/v2/threads', '/v2/threads?page=0', a);
  await call('GET', '/v2/threads/{thread_id}', `/v2/threads/${threadId}`, a);
  await call('GET', '/v2/threads/{thread_id}', `/v2/threads/${threadId}`, b);
  await call('DELETE', '/v2/threads/{thread_id}', `/v2/threads/${threadId}`, b);
  await call('DELETE', '/v2/threads/{thread_id}', `/v2/threads/${threadId}`, a);
}
