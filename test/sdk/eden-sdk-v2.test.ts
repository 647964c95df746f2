import { EdenClient, Methods } from '@edenlabs/eden-sdk';
import { describe, expect, it } from 'vitest';
import { restOperations } from '../../src/rest/routes.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { sdkTypes } from '../helpers/sdk-types.ts';
import { settledSession } from '../helpers/sessions.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * Every method of the published SDK (@edenlabs/eden-sdk, pinned) that calls a `/v2` path: which
 * route serves it, and, for those served here, the method called through the SDK itself against
 * a real parley, its answer checked against the type the SDK declares for it.
 */

/** The SDK's methods by name (`collections.getV2`), with the request each makes, read by calling it with a transport that only records. */
async function sdkRequests(): Promise<{ name: string; method: string; url: string }[]> {
  const found: { name: string; method: string; url: string }[] = [];
  const seen: { last?: { method: string; url: string } } = {};
  class Recorder extends Methods {
    override async apiCall(configFn: (options: Record<string, unknown>) => { method?: string; url?: string }) {
      // Every argument a URL is built from reads as a placeholder segment.
      const config = configFn(new Proxy({}, { get: (_t, key) => (typeof key === 'string' ? `{${key}}` : undefined) }));
      seen.last = { method: String(config.method), url: String(config.url) };
      return {};
    }
  }
  const walk = async (node: Record<string, unknown>, path: string[]) => {
    for (const [key, value] of Object.entries(node)) {
      if (typeof value === 'function') {
        seen.last = undefined;
        await (value as (a?: unknown) => Promise<unknown>)({});
        // The call set it (TypeScript cannot see through the await).
        const recorded = seen.last as { method: string; url: string } | undefined;
        if (recorded) found.push({ name: [...path, key].join('.'), ...recorded });
      } else if (value && typeof value === 'object') await walk(value as Record<string, unknown>, [...path, key]);
    }
  };
  await walk(new Recorder() as unknown as Record<string, unknown>, []);
  return found;
}

/** The declared operation that serves `method url` (a static path before a parameter, as the router does), or undefined. */
function servedBy(method: string, url: string) {
  const path = `/${url.replace(/^\//, '')}`;
  const matches = restOperations.filter(
    (op) =>
      op.method === method.toLowerCase() &&
      new RegExp(`^${op.path.replace(/:\w+/g, '[^/]+')}$`).test(path.replace(/\{\w+\}/g, 'x')) &&
      op.path.split('/').every((part, i) => part.startsWith(':') || part === path.split('/')[i]),
  );
  return matches.sort((a, b) => a.path.split(':').length - b.path.split(':').length)[0];
}

/** Methods on `/v2` paths whose routes other wave-2 branches build: none, now that tasks and deployments have landed. */
const OTHER_BRANCHES: string[] = [];

describe("the SDK's methods on /v2 paths", () => {
  it('are 37, and every one is served by a declared route but those other branches build', async () => {
    const v2 = (await sdkRequests()).filter((r) => /^\/?v2\//.test(r.url));
    expect(v2).toHaveLength(37);
    const table = v2.map((r) => ({ ...r, route: servedBy(r.method, r.url) }));
    const unserved = table.filter((r) => !r.route).map((r) => r.name);
    expect(unserved.sort()).toEqual(OTHER_BRANCHES);
    // A few, to show the matching reads the SDK's URLs as the router does.
    const route = (name: string) => table.find((r) => r.name === name)?.route?.operationId;
    expect(route('collections.getLightV2')).toBe('listMyCollections');
    expect(route('collections.getV2')).toBe('getCollection');
    expect(route('creations.bulkUpdateV2')).toBe('updateCreations');
    expect(route('creators.getV2')).toBe('getCreator');
    expect(route('creators.meV2')).toBe('getMyProfile');
    expect(route('threads.message')).toBe('sendThreadMessage');
  });
});

describe('the SDK methods parley now serves, called through the SDK', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;
  let sdk: EdenClient;
  let bobSdk: EdenClient;
  const types = sdkTypes();

  const expectConforms = (typeName: string, value: unknown) => {
    expect(types.required(typeName).length, `${typeName} requires fields`).toBeGreaterThan(0);
    expect(types.problems(typeName, value), typeName).toEqual([]);
  };
  const expectResponse = (typeName: string, value: Record<string, unknown>, present: string[]) => {
    expect(types.problems(typeName, value), typeName).toEqual([]);
    for (const key of present) expect(value[key], `${typeName}.${key}`).toBeDefined();
  };
  /**
   * A numbered page: the SDK types `prevPage`/`nextPage` as a number or absent, while the
   * original's "paginate" pages (and the spec's search page) send null at the ends, as parley
   * does (docs/compatibility.md). Those two nulls are the only difference allowed.
   */
  const expectPage = (typeName: string, value: Record<string, unknown>) => {
    const ends = ['prevPage', 'nextPage'].filter((key) => value[key] === null);
    const problems = types.problems(typeName, value);
    expect(
      problems.filter((p) => !ends.some((key) => p.startsWith(`${key}: `))),
      typeName,
    ).toEqual([]);
    expect(types.problems(typeName, { ...value, prevPage: value.prevPage ?? undefined, nextPage: value.nextPage ?? undefined })).toEqual(
      [],
    );
    for (const key of ['docs', 'total', 'limit', 'page', 'pages', 'hasPrevPage', 'hasNextPage']) expect(value[key], key).toBeDefined();
  };
  /** A model as trained ones are: with a checkpoint (the SDK requires one; docs/compatibility.md). */
  const model = (owner: TestUser, fields: { public: boolean; name: string }) =>
    f
      .model(owner, fields)
      .then((m) => t.db.model.update({ where: { id: m.id }, data: { checkpoint: 'https://cdn.example.com/lora.safetensors' } }));

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    for (const u of [alice, bob]) {
      await t.db.user.update({ where: { id: u.id }, data: { userImage: `https://cdn.example.com/${u.username}.png` } });
    }
    sdk = new EdenClient({ edenApiUrl: t.url, apiKey: alice.apiKey });
    bobSdk = new EdenClient({ edenApiUrl: t.url, apiKey: bob.apiKey });
  });

  async function failure(call: Promise<unknown>) {
    const error = await call.then(
      () => expect.fail('the call should have failed'),
      (e: unknown) => e,
    );
    const { isAxiosError, response } = error as { isAxiosError?: boolean; response: { status: number; data: Record<string, unknown> } };
    expect(isAxiosError).toBe(true);
    return { status: response.status, body: response.data };
  }

  const image = (owner: TestUser, fields: Parameters<ReturnType<typeof fixtures>['creation']>[1] = {}) =>
    f.creation(owner, fields).then((c) =>
      t.db.creation.update({
        where: { id: c.id },
        data: { thumbnail: 'https://cdn.example.com/c-thumb.png', mediaAttributes: { mimeType: 'image/png', width: 512, height: 512 } },
      }),
    );

  describe('agents.create and agents.delete', () => {
    it('creates an agent from the SDK arguments (tools as lists, image required) and answers {agentId}', async () => {
      const key = `sdk-made-${Date.now().toString(36)}`;
      const res = await sdk.agents.create({
        name: 'Made by the SDK',
        key,
        description: 'Paints harbours',
        image: 'https://cdn.example.com/made.png',
        greeting: 'Hello',
        suggestions: [{ label: 'Harbour', prompt: 'Paint a harbour' }],
        tools: { flux_dev: [] },
      });
      expectConforms('AgentsCreateResponse', res);
      const read = await sdk.agents.get({ agentId: res.agentId });
      expectConforms('Agent', read.agent);
      expect(read.agent).toMatchObject({ _id: res.agentId, username: key, name: 'Made by the SDK', tools: { flux_dev: [] } });
      const taken = await failure(bobSdk.agents.create({ name: 'Copy', key, image: 'https://cdn.example.com/x.png' }));
      expect(taken).toEqual({ status: 409, body: { error: 'An agent with this key already exists' } });
      const bad = await failure(sdk.agents.create({ name: '', key: 'no-name-here', image: 'https://cdn.example.com/x.png' }));
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatch(/^name: /);
    });

    it("deletes the caller's agent ({success: true}); then it is not found, and someone else's cannot be deleted", async () => {
      const agent = await f.agent(alice, { image: 'https://cdn.example.com/a.png' });
      const refused = await failure(bobSdk.agents.delete({ agentId: agent.id }));
      expect(refused.status).toBe(401);
      expect(typeof refused.body.error).toBe('string');
      const res = await sdk.agents.delete({ agentId: agent.id });
      expectConforms('AgentsDeleteResponse', res);
      expect(res.success).toBe(true);
      expect((await failure(sdk.agents.get({ agentId: agent.id }))).status).toBe(404);
      expect(await failure(sdk.agents.delete({ agentId: agent.id }))).toEqual({ status: 404, body: { error: 'Agent not found' } });
    });
  });

  describe('models.list and models.update', () => {
    it('pages the models the caller may use (their own and public ones), each a ModelV2', async () => {
      const own = await model(alice, { public: false, name: 'Own private' });
      const theirs = await model(bob, { public: true, name: 'Bob public' });
      const hidden = await model(bob, { public: false, name: 'Bob private' });
      const res = await sdk.models.list({ page: 1, limit: 50 });
      expectPage('ModelsV2ListResponse', res);
      for (const m of res.docs!) expectConforms('ModelV2', m);
      const ids = res.docs!.map((m) => m._id);
      expect(ids).toEqual(expect.arrayContaining([own.id, theirs.id]));
      expect(ids).not.toContain(hidden.id);
      expect(res.total).toBe(ids.length);

      const one = await sdk.models.list({ limit: 1, page: 2 });
      expect(one).toMatchObject({ limit: 1, page: 2, total: res.total, hasPrevPage: true });
      expect(one.docs).toHaveLength(1);
      const byOwner = await sdk.models.list({ userId: bob.id });
      expect(byOwner.docs!.map((m) => m._id)).toEqual([theirs.id]);
      const byIds = await sdk.models.list({ modelId: [own.id, hidden.id] });
      expect(byIds.docs!.map((m) => m._id)).toEqual([own.id]);
    });

    it('lets the owner make a model public (answering {model}); others are refused and nothing changes', async () => {
      const m = await model(alice, { public: false, name: 'Lighthouse LoRA' });
      const res = await sdk.models.update({ modelId: m.id, public: true });
      expectResponse('ModelsV2PatchResponse', res, ['model']);
      expectConforms('ModelV2', res.model);
      expect(res.model).toMatchObject({ _id: m.id, public: true });
      expect((await failure(bobSdk.models.update({ modelId: m.id, public: false }))).status).toBe(401);
      const privateOne = await model(alice, { public: false, name: 'Private LoRA' });
      expect(await failure(bobSdk.models.update({ modelId: privateOne.id, public: true }))).toEqual({
        status: 404,
        body: { message: 'Model not found' },
      });
      const deleting = await failure(sdk.models.update({ modelId: m.id, deleted: true }));
      expect(deleting.status).toBe(400);
      expect(deleting.body.message).toMatch(/^deleted: /);
      expect((await t.db.model.findUniqueOrThrow({ where: { id: m.id } })).public).toBe(true);
      expect((await t.db.model.findUniqueOrThrow({ where: { id: privateOne.id } })).public).toBe(false);
    });
  });

  describe('creations.getV2, updateV2 and bulkUpdateV2', () => {
    it('reads a creation as a CreationV2: populated user and requester, its task, output_type, filename', async () => {
      const c = await image(alice);
      const res = await bobSdk.creations.getV2({ creationId: c.id });
      expectResponse('CreationsV2GetResponse', res, ['creation']);
      expectConforms('CreationV2', res.creation);
      expect(res.creation).toMatchObject({
        _id: c.id,
        output_type: 'image',
        filename: 'c.png',
        deleted: false,
        public: true,
        mediaAttributes: { type: 'image', mimeType: 'image/png', width: 512, height: 512 },
      });
      expect(res.creation!.user._id).toBe(alice.id);
      expectConforms('TaskV2', res.creation!.task);
      const hidden = await image(alice, { public: false });
      expect(await failure(bobSdk.creations.getV2({ creationId: hidden.id }))).toEqual({
        status: 404,
        body: { message: 'Creation not found or you do not have access to it' },
      });
    });

    it("lets the owner make a creation private; another user's change is refused", async () => {
      const c = await image(alice);
      const res = await sdk.creations.updateV2({ creationId: c.id, public: false });
      expectResponse('CreationsV2PatchResponse', res, ['creation']);
      expectConforms('CreationV2', res.creation);
      expect(res.creation!.public).toBe(false);
      // Now private: a stranger is told it is not there, and cannot change it back.
      expect((await failure(bobSdk.creations.updateV2({ creationId: c.id, public: true }))).status).toBe(404);
      const open = await image(alice);
      expect((await failure(bobSdk.creations.updateV2({ creationId: open.id, public: false }))).status).toBe(403);
      expect((await t.db.creation.findUniqueOrThrow({ where: { id: open.id } })).public).toBe(true);
    });

    it('changes several creations at once, all or none; deleting them hides them from everyone', async () => {
      const [a, b] = [await image(alice), await image(alice)];
      const bobs = await image(bob);
      const res = await sdk.creations.bulkUpdateV2({ creationIds: [a.id, b.id], public: false });
      expectResponse('CreationsV2BulkPatchResponse', res, ['creations']);
      for (const c of res.creations!) expectConforms('CreationV2', c);
      expect(res.creations!.map((c) => [c._id, c.public])).toEqual([
        [a.id, false],
        [b.id, false],
      ]);
      const mixed = await failure(sdk.creations.bulkUpdateV2({ creationIds: [a.id, bobs.id], public: true }));
      expect(mixed.status).toBe(403);
      expect(mixed.body.message).toMatch(/^creationIds\[1\]: /);
      expect((await t.db.creation.findUniqueOrThrow({ where: { id: a.id } })).public).toBe(false);
      const deleted = await sdk.creations.bulkUpdateV2({ creationIds: [a.id, b.id], deleted: true });
      expect(deleted.creations!.every((c) => c.deleted)).toBe(true);
      expect((await failure(sdk.creations.getV2({ creationId: a.id }))).status).toBe(404);
    });

    it('a creation a task made shows that task, as tasks.getV2 reads it; one whose task the reader may not see shows none of it', async () => {
      await t.services.manna.grant('alice', '5', 'forever');
      const made = (await sdk.tasks.createV2({ tool: 'flux_schnell', args: { prompt: 'a harbour at dusk', n_samples: 2 } })) as {
        task: { _id: string };
      };
      const taskId = made.task._id;
      let done = (await sdk.tasks.getV2({ taskId })).task!;
      while (done.status !== 'completed') {
        expect(['pending', 'running']).toContain(done.status);
        await new Promise((r) => setTimeout(r, 20));
        done = (await sdk.tasks.getV2({ taskId })).task!;
      }
      const creationIds = (done.result[0]!.output as unknown as { creationId: string }[]).map((o) => o.creationId);
      expect(creationIds).toHaveLength(2);

      const res = await sdk.creations.getV2({ creationId: creationIds[1]! });
      expectResponse('CreationsV2GetResponse', res, ['creation']);
      expectConforms('CreationV2', res.creation);
      expectConforms('TaskV2', res.creation!.task);
      // The task record itself: its id, its arguments as given (not the creation's), both outputs.
      expect(res.creation!.task).toEqual(JSON.parse(JSON.stringify(done)));
      expect(res.creation!.task).toMatchObject({ _id: taskId, status: 'completed', args: { prompt: 'a harbour at dusk', n_samples: 2 } });
      expect(res.creation!.task.result[0]!.output).toHaveLength(2);

      // The task stays private when its creation is made public: a stranger reads the creation, not the task.
      await sdk.creations.updateV2({ creationId: creationIds[1]!, public: true });
      const seen = await bobSdk.creations.getV2({ creationId: creationIds[1]! });
      expectConforms('CreationV2', seen.creation);
      expectConforms('TaskV2', seen.creation!.task);
      expect(seen.creation!.task._id).toBe(creationIds[1]);
      expect(JSON.stringify(seen.creation)).not.toContain(taskId);
      expect((await failure(bobSdk.tasks.getV2({ taskId }))).status).toBe(404);
    });
  });

  describe('creators.getV2', () => {
    it("gives another creator's public profile as a Creator, with no balances", async () => {
      await t.db.user.update({ where: { id: bob.id }, data: { foreverBalance: 40 } });
      const res = await sdk.creators.getV2({ userId: bob.id });
      expectResponse('CreatorsGetResponse', res, ['creator']);
      expectConforms('Creator', res.creator);
      expect(res.creator).toMatchObject({ _id: bob.id, username: 'bob', type: 'user' });
      expect(JSON.stringify(res)).not.toMatch(/balance/i);
      const privateAgent = await f.agent(bob, { public: false });
      expect((await failure(sdk.creators.getV2({ userId: privateAgent.id }))).status).toBe(404);
      expect((await failure(sdk.creators.getV2({ userId: 'nobody' }))).status).toBe(404);
    });
  });

  describe('collections.*V2', () => {
    it('creates, reads, lists, renames, fills, empties and deletes a collection, each answer as the SDK types it', async () => {
      const [one, two, three] = [await image(alice), await image(alice), await image(bob)];
      const created = await sdk.collections.createV2({ name: 'Lighthouses', description: 'By the sea', creationIds: [one.id, two.id] });
      expectConforms('CollectionsV2CreateResponse', created);

      const got = await sdk.collections.getV2({ collectionId: created.collectionId });
      expectConforms('CollectionsV2GetResponse', got);
      expectConforms('CollectionV2', got.collection);
      for (const c of got.collection.creations) expectConforms('CreationV2', c);
      expectConforms('CreationV2', got.collection.coverCreation);
      expect(got.collection).toMatchObject({ _id: created.collectionId, name: 'Lighthouses', description: 'By the sea', public: true });
      expect(got.collection.creations.map((c: { _id: string }) => c._id)).toEqual([one.id, two.id]);
      expect(got.collection.coverCreation!._id).toBe(one.id);
      expect(got.collection.user._id).toBe(alice.id);

      const light = await sdk.collections.getLightV2({});
      expectConforms('CollectionsV2GetLightResponse', light);
      expect(light.collections).toEqual([
        expect.objectContaining({
          _id: created.collectionId,
          name: 'Lighthouses',
          creations: [one.id, two.id],
          public: true,
          contributors: [],
        }),
      ]);

      const renamed = await sdk.collections.updateV2({ collectionId: created.collectionId, name: 'Beacons', public: false });
      expectResponse('CollectionsV2UpdateResponse', renamed, ['collectionId']);
      const added = await sdk.collections.creations.addV2({ collectionId: created.collectionId, creationIds: [three.id, one.id] });
      expectResponse('CollectionsV2AddCreationsResponse', added, ['collectionId']);
      const removed = await sdk.collections.creations.removeV2({ collectionId: created.collectionId, creationIds: [two.id] });
      expectResponse('CollectionsV2RemoveCreationsResponse', removed, ['collectionId']);
      const after = await sdk.collections.getV2({ collectionId: created.collectionId });
      expect(after.collection).toMatchObject({ name: 'Beacons', public: false });
      expect(after.collection.creations.map((c: { _id: string }) => c._id)).toEqual([one.id, three.id]);

      // Private now: bob is told it is not there, and cannot change it.
      expect((await failure(bobSdk.collections.getV2({ collectionId: created.collectionId }))).status).toBe(404);
      expect((await failure(bobSdk.collections.deleteV2({ collectionId: created.collectionId }))).status).toBe(404);

      const gone = await sdk.collections.deleteV2({ collectionId: created.collectionId });
      expectResponse('CollectionsV2DeleteResponse', gone, []);
      expect(await failure(sdk.collections.getV2({ collectionId: created.collectionId }))).toEqual({
        status: 404,
        body: { error: 'Collection not found', message: 'Collection not found' },
      });
      expect((await sdk.collections.getLightV2({})).collections).toEqual([]);
    });
  });

  describe('threads.*', () => {
    it('starts a thread with an agent, writes to it, reacts, lists, reads and deletes it, as the SDK types each', async () => {
      const agent = await f.agent(alice, { name: 'Muse', image: 'https://cdn.example.com/muse.png' });
      const started = await sdk.threads.create({ agent_id: agent.id, content: 'Hello, muse' });
      expectResponse('ThreadsCreateResponse', started, ['thread_id', 'success']);
      const threadId = started.thread_id as string;
      await settledSession(t, alice, threadId);
      const more = await sdk.threads.message({ thread_id: threadId, content: 'Paint me a lighthouse' });
      expectResponse('ThreadsMessageResponse', more, ['thread_id', 'success']);
      expect(more.thread_id).toBe(threadId);
      await settledSession(t, alice, threadId);

      const read = await sdk.threads.get({ thread_id: threadId });
      expectResponse('ThreadsGetResponse', read, ['thread']);
      expectConforms('Thread', read.thread);
      expect(read.thread!.agent).toMatchObject({ _id: agent.id, name: 'Muse', userImage: 'https://cdn.example.com/muse.png' });
      expect(read.thread!.user._id).toBe(alice.id);
      const contents = read.thread!.messages.filter((m) => m.role === 'user').map((m) => m.content);
      expect(contents).toEqual(['Hello, muse', 'Paint me a lighthouse']);
      const reply = read.thread!.messages.find((m) => m.role === 'assistant')!;
      expect(reply).toMatchObject({ status: { type: 'complete' } });

      const reacted = await sdk.threads.react({ message_id: reply.id, reaction: 'thumbs_up' });
      expectResponse('ThreadsMessageReactResponse', reacted, ['success']);
      const again = await sdk.threads.get({ thread_id: threadId });
      expect((again.thread!.messages.find((m) => m.id === reply.id) as { reactions?: unknown }).reactions).toEqual({
        [alice.id]: ['thumbs_up'],
      });

      const list = await sdk.threads.list({ agent_id: agent.id });
      expectPage('ThreadsListResponse', list);
      for (const thread of list.docs!) expectConforms('Thread', thread);
      expect(list.docs!.map((d) => d._id)).toEqual([threadId]);
      const other = await f.agent(alice, { image: 'https://cdn.example.com/o.png' });
      expect((await sdk.threads.list({ agent_id: other.id })).docs).toEqual([]);

      // Someone else's thread is not there for bob, whatever he tries.
      expect((await failure(bobSdk.threads.get({ thread_id: threadId }))).status).toBe(404);
      expect((await failure(bobSdk.threads.message({ thread_id: threadId, content: 'Let me in' }))).status).toBe(404);
      expect((await failure(bobSdk.threads.react({ message_id: reply.id, reaction: 'thumbs_down' }))).status).toBe(404);
      expect((await failure(bobSdk.threads.delete({ thread_id: threadId }))).status).toBe(404);

      const deleted = await sdk.threads.delete({ thread_id: threadId });
      expectResponse('ThreadsDeleteResponse', deleted, ['success']);
      expect((await failure(sdk.threads.get({ thread_id: threadId }))).status).toBe(404);
    });

    it('refuses a new thread without an agent, naming the field, and saves nothing', async () => {
      const before = await t.db.session.count();
      const res = await failure(sdk.threads.message({ content: 'To whom?' }));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/^agent_id: /);
      expect(await t.db.session.count()).toBe(before);
    });
  });
});
