import { EdenClient } from '@edenlabs/eden-sdk';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { sdkTypes } from '../helpers/sdk-types.ts';
import { setUp } from '../helpers/set-up.ts';

/**
 * The original platform's published JavaScript SDK (@edenlabs/eden-sdk, pinned) pointed at a
 * real parley on loopback: every SDK method whose route parley serves is called through the
 * SDK itself (its URLs, its X-Api-Key header, its axios), and what comes back is checked
 * against the types the SDK declares for it, read from its own .d.ts files.
 */
describe('the original SDK (@edenlabs/eden-sdk) against parley', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;
  let bob: TestUser;
  let sdk: EdenClient;
  let bobSdk: EdenClient;
  let telegram: FakeTelegram;
  const types = sdkTypes();

  /** The SDK's promise for a document: no problems, and not vacuously (the type has required fields). */
  const expectConforms = (typeName: string, value: unknown) => {
    expect(types.required(typeName).length, `${typeName} requires fields`).toBeGreaterThan(0);
    expect(types.problems(typeName, value), typeName).toEqual([]);
  };
  /** A response type whose fields are all optional in the SDK: conforming, and carrying the ones named. */
  const expectResponse = (typeName: string, value: Record<string, unknown>, present: string[]) => {
    expect(types.problems(typeName, value), typeName).toEqual([]);
    for (const key of present) expect(value[key], `${typeName}.${key}`).toBeDefined();
  };

  setUp(async (start) => {
    telegram = await start.service(startFakeTelegram());
    t = await start.app({ deployments: { telegram: { apiUrl: telegram.apiUrl, pollTimeoutS: 1 } } });
    f = fixtures(t);
    alice = await t.createUser('alice');
    bob = await t.createUser('bob');
    // Users of the original have a picture; the SDK types `userImage` as a string when present.
    for (const u of [alice, bob]) {
      await t.db.user.update({ where: { id: u.id }, data: { userImage: `https://cdn.example.com/${u.username}.png` } });
    }
    sdk = new EdenClient({ edenApiUrl: t.url, apiKey: alice.apiKey });
    bobSdk = new EdenClient({ edenApiUrl: t.url, apiKey: bob.apiKey });
  });

  /** The SDK throws axios's error for a non-2xx answer; integrations read `response.data.error`/`.message`. */
  async function failure(call: Promise<unknown>) {
    const error = await call.then(
      () => expect.fail('the call should have failed'),
      (e: unknown) => e,
    );
    // The SDK's own copy of axios made the error, so it is recognised by its flag, not by class.
    const { isAxiosError, response } = error as { isAxiosError?: boolean; response: { status: number; data: Record<string, unknown> } };
    expect(isAxiosError).toBe(true);
    return { status: response.status, body: response.data };
  }

  const richAgent = async (owner: TestUser, fields: Record<string, unknown> = {}) =>
    f.agent(owner, {
      description: 'Paints lighthouses',
      image: 'https://cdn.example.com/agent.png',
      persona: 'You are a painter.',
      isPersonaPublic: true,
      greeting: 'Hello there',
      knowledge: 'Knows about the sea',
      suggestions: [{ label: 'Paint', prompt: 'Paint a lighthouse' }],
      tools: { flux_dev: true, wan_t2v: false },
      ...fields,
    });

  describe('agents.get (GET v2/agents/{id})', () => {
    it('gives an agent the SDK types describe: _id, username, userImage, owner as a creator, tools as lists', async () => {
      const agent = await richAgent(alice);
      const res = await sdk.agents.get({ agentId: agent.id });
      expectConforms('AgentGetResponse', res);
      expectConforms('Agent', res.agent);
      expect(res.agent).toMatchObject({
        _id: agent.id,
        username: agent.user.username,
        name: 'Test agent',
        userImage: 'https://cdn.example.com/agent.png',
        tools: { flux_dev: [] },
        public: true,
      });
      expect(res.agent.owner).toMatchObject({ _id: alice.id, userId: alice.id, username: 'alice' });
      expectConforms('Creator', res.agent.owner);
      expect(res.error).toBeUndefined();
    });

    it("gives another user's public agent in the same shape", async () => {
      const agent = await richAgent(alice);
      const res = await bobSdk.agents.get({ agentId: agent.id });
      expectConforms('Agent', res.agent);
      expect(res.agent.owner._id).toBe(alice.id);
    });

    it('fails with 404 {error} for an unknown agent, which the SDK passes on as axios does', async () => {
      const { status, body } = await failure(sdk.agents.get({ agentId: '5f1e2d3c4b5a697887766554' }));
      expect(status).toBe(404);
      expect(body).toEqual({ error: 'Agent not found' });
    });

    it('the check reads the SDK: the shape parley answered before (owner as an id, boolean tools) fails it', async () => {
      const agent = await richAgent(alice);
      const { agent: read } = await sdk.agents.get({ agentId: agent.id });
      expect(types.problems('Agent', { ...read, owner: alice.id })).not.toEqual([]);
      expect(types.problems('Agent', { ...read, tools: { flux_dev: true } })).not.toEqual([]);
      const { _id: _dropped, ...withoutId } = read;
      expect(types.problems('Agent', withoutId)).toContain("_id: required by the SDK's type, missing");
    });
  });

  describe('agents.update (PATCH v2/agents/{id})', () => {
    it("accepts the SDK's arguments (tools as lists of strings, agentId in the body) and answers {agent} beside the spec's {agentId}", async () => {
      const agent = await richAgent(alice);
      const res = await sdk.agents.update({
        agentId: agent.id,
        name: 'Renamed by the SDK',
        description: 'Now paints harbours',
        greeting: 'Ahoy',
        suggestions: [{ label: 'Harbour', prompt: 'Paint a harbour' }],
        tools: { kokoro_tts: [], flux_schnell: ['default'] },
        public: false,
      });
      expectConforms('AgentsUpdateResponse', res);
      expect(res.agentId).toBe(agent.id);
      expect(res.agent).toMatchObject({
        _id: agent.id,
        name: 'Renamed by the SDK',
        description: 'Now paints harbours',
        greeting: 'Ahoy',
        suggestions: [{ label: 'Harbour', prompt: 'Paint a harbour' }],
        tools: { kokoro_tts: [], flux_schnell: [] },
        public: false,
      });
      // What the SDK reads back is what was stored.
      const again = await sdk.agents.get({ agentId: agent.id });
      expect(again.agent).toEqual(res.agent);
      const row = await t.db.agent.findUniqueOrThrow({ where: { id: agent.id } });
      expect(row.tools).toEqual({ kokoro_tts: true, flux_schnell: true });
    });

    it('changes the key, which the SDK then reads as username', async () => {
      const agent = await richAgent(alice);
      const key = `sdk-key-${Date.now().toString(36)}`;
      const res = await sdk.agents.update({ agentId: agent.id, key });
      expect(res.agent.username).toBe(key);
    });

    it("fails with 401 {error} for someone else's agent and with 400 {error} for a bad value, changing nothing", async () => {
      const agent = await richAgent(alice);
      const before = (await sdk.agents.get({ agentId: agent.id })).agent;
      const notOwner = await failure(bobSdk.agents.update({ agentId: agent.id, name: 'Hijacked' }));
      expect(notOwner.status).toBe(401);
      expect(typeof notOwner.body.error).toBe('string');
      const bad = await failure(sdk.agents.update({ agentId: agent.id, tools: { teleport: [] } }));
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatch(/^tools\.teleport: /);
      expect((await sdk.agents.get({ agentId: agent.id })).agent).toEqual(before);
    });
  });

  describe('creators.meV2 (GET v2/creators/me)', () => {
    it('gives the creator the SDK types describe, with a numeric subscriptionTier, and the balances', async () => {
      const res = await sdk.creators.meV2();
      expectResponse('CreatorsGetMeResponse', res, ['creator', 'balance', 'subscriptionBalance', 'foreverBalance']);
      expectConforms('Creator', res.creator);
      expect(res.creator).toMatchObject({ _id: alice.id, userId: alice.id, username: 'alice', type: 'user', subscriptionTier: 0 });
      expect(res).toMatchObject({ balance: 0, subscriptionBalance: 0, foreverBalance: 0 });
    });

    it("reads the caller's own profile: bob's key gives bob, with his tier as the SDK's number", async () => {
      await t.db.user.update({ where: { id: bob.id }, data: { subscriptionTier: 'pro' } });
      const res = await bobSdk.creators.meV2();
      expectConforms('Creator', res.creator);
      expect(res.creator).toMatchObject({ _id: bob.id, username: 'bob', subscriptionTier: 2 });
    });

    it('fails with 401 for a key parley does not know', async () => {
      const stranger = new EdenClient({ edenApiUrl: t.url, apiKey: 'not-a-key' });
      const { status, body } = await failure(stranger.creators.meV2());
      expect(status).toBe(401);
      expect(typeof body.error).toBe('string');
    });
  });

  describe('models.get (GET v2/models/{id})', () => {
    const model = (owner: TestUser, isPublic: boolean) =>
      t.db.model.create({
        data: {
          userId: owner.id,
          name: 'Lighthouse LoRA',
          baseModel: 'flux-dev',
          checkpoint: 'https://cdn.example.com/lighthouse.safetensors',
          thumbnail: null,
          loraTriggerText: 'LHTOK',
          public: isPublic,
          args: { lora_training_urls: ['https://cdn.example.com/a.jpg'] },
        },
      });

    it('gives a model the SDK types describe: _id, user as a creator, task, slug, deleted, base_model', async () => {
      const m = await model(alice, true);
      const res = await bobSdk.models.get({ modelId: m.id });
      expectResponse('ModelsV2GetResponse', res, ['model']);
      expectConforms('ModelV2', res.model);
      expect(res.model).toMatchObject({
        _id: m.id,
        name: 'Lighthouse LoRA',
        slug: 'alice/lighthouse-lora',
        deleted: false,
        base_model: 'flux-dev',
        thumbnail: null,
        public: true,
      });
      expect(res.model!.user._id).toBe(alice.id);
      expectConforms('TaskV2', res.model!.task);
    });

    it("fails with 401 {message} for someone else's private model and 404 for an unknown one", async () => {
      const m = await model(alice, false);
      expectConforms('ModelV2', (await sdk.models.get({ modelId: m.id })).model);
      const hidden = await failure(bobSdk.models.get({ modelId: m.id }));
      expect(hidden.status).toBe(401);
      expect(typeof hidden.body.message).toBe('string');
      const unknown = await failure(sdk.models.get({ modelId: 'nope' }));
      expect(unknown).toEqual({ status: 404, body: { message: 'Model not found' } });
    });
  });

  describe('tools.list (GET v2/tools)', () => {
    it('gives tools the SDK types describe: parameters with tip and schema, base_model a short name or absent', async () => {
      const res = await sdk.tools.list();
      expectResponse('ToolsListResponseV2', res, ['tools']);
      expect(res.tools!.length).toBeGreaterThanOrEqual(8);
      for (const tool of res.tools!) {
        expectConforms('ToolV2', tool);
        for (const p of tool.parameters ?? []) expectConforms('ToolParameterV2', p);
      }
      expect(res.tools!.find((tool) => tool.key === 'flux_dev')?.base_model).toBe('flux-dev');
      // A base model the SDK has no name for is left out rather than sent as a name it cannot know.
      expect(res.tools!.find((tool) => tool.key === 'kokoro_tts')).not.toHaveProperty('base_model');
    });
  });

  describe('tools.get (GET v2/tools/{key})', () => {
    it('gives one tool as the list shows it, and 404 for a tool the list does not show', async () => {
      const { tools } = await sdk.tools.list();
      const res = await sdk.tools.get({ toolKey: 'flux_dev' });
      expectResponse('ToolsGetResponseV2', res, ['tool']);
      expectConforms('ToolV2', res.tool);
      expect(res.tool).toEqual(tools!.find((tool) => tool.key === 'flux_dev'));
      // sdxl is in the registry but inactive.
      const { status, body } = await failure(sdk.tools.get({ toolKey: 'sdxl' }));
      expect(status).toBe(404);
      expect(body.error).toBe('Tool not found');
    });
  });

  describe('tasks (v2/tasks…)', () => {
    const settledTask = async (client: EdenClient, taskId: string) => {
      for (;;) {
        const { task } = await client.tasks.getV2({ taskId });
        if (task && ['completed', 'failed', 'cancelled'].includes(task.status)) return task;
        await new Promise((r) => setTimeout(r, 20));
      }
    };

    it('tasks.costV2 then tasks.createV2: the estimate is what is held, and the task the SDK types describe', async () => {
      await t.services.manna.grant('alice', '10', 'forever');
      const args = { prompt: 'a lighthouse by the SDK', n_samples: 2 };
      const cost = await sdk.tasks.costV2({ tool: 'flux_schnell', args });
      expectResponse('TasksV2CreateResponse', cost, ['cost']);
      const before = (await sdk.creators.meV2()).balance as number;
      const res = await sdk.tasks.createV2({ tool: 'flux_schnell', args });
      expectResponse('TasksV2CreateResponse', res, ['task']);
      const task = (res as { task: Record<string, unknown> }).task;
      expectConforms('TaskV2', task);
      expect(task).toMatchObject({ tool: 'flux_schnell', status: 'pending', cost: cost.cost, user: { _id: alice.id } });
      expect((await sdk.creators.meV2()).balance).toBe(before - (cost.cost as number));

      const done = await settledTask(sdk, task._id as string);
      expectConforms('TaskV2', done);
      expect(done.status).toBe('completed');
      for (const result of done.result) {
        expectConforms('TaskV2Result', result);
        for (const output of result.output) expectConforms('TasksV2ResultOutput', output);
      }
      expect(done.result[0]!.output).toHaveLength(2);
    });

    it('tasks.getV2 and tasks.listV2 answer in the SDK’s shapes; a stranger’s private task is not found', async () => {
      await t.services.manna.grant('alice', '5', 'forever');
      const made = (await sdk.tasks.createV2({ tool: 'flux_schnell', args: { prompt: 'listed' } })) as { task: { _id: string } };
      await settledTask(sdk, made.task._id);
      const got = await sdk.tasks.getV2({ taskId: made.task._id });
      expectResponse('TasksV2GetResponse', got, ['task']);
      const list = await sdk.tasks.listV2({ status: ['completed', 'failed'], tool: 'flux_schnell', limit: 5, page: 1 });
      expectResponse('TasksV2ListResponse', list, ['docs', 'total', 'page', 'pages', 'limit']);
      for (const doc of list.docs!) expectConforms('TaskV2', doc);
      expect(list.docs!.map((d) => d._id)).toContain(made.task._id);
      const { status, body } = await failure(bobSdk.tasks.getV2({ taskId: made.task._id }));
      expect(status).toBe(404);
      expect(body.error).toBe('Task not found');
      const bad = await failure(sdk.tasks.listV2({ output_type: 'hologram' as never }));
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatch(/^output_type: /);
    });

    it('createV2(input), the README’s first example, waits on GET /v2/tasks/events for the task-update that ends it and returns its result', async () => {
      await t.services.manna.grant('alice', '5', 'forever');
      const result = (await sdk.createV2({ tool: 'flux_schnell', args: { prompt: 'a lighthouse, awaited', n_samples: 1 } })) as unknown as
        | Record<string, unknown>[]
        | undefined;
      // The SDK answers undefined when its stream fails or ends without the task's end.
      expect(result).toBeDefined();
      const list = await sdk.tasks.listV2({ tool: 'flux_schnell', limit: 50 });
      const task = list.docs!.find((d) => (d.args as { prompt?: string }).prompt === 'a lighthouse, awaited')!;
      expect(task.status).toBe('completed');
      expect(result).toEqual(JSON.parse(JSON.stringify(task.result)));
      for (const one of result!) expectConforms('TaskV2Result', one);
      expect(result![0]!.output).toHaveLength(1);
    });

    it('createV2(input) waits through the progress of a task that takes a while (the demo tool), then returns its result', async () => {
      await t.services.manna.grant('alice', '1', 'forever');
      const result = (await sdk.createV2({ tool: 'countdown', args: { seconds: 2, steps: 4 } })) as unknown as Record<string, unknown>[];
      expect(result).toEqual([
        expect.objectContaining({ data: { counted: 4, seconds: 2, message: 'Counted 4 steps in 2 s' }, output: [] }),
      ]);
      const list = await sdk.tasks.listV2({ tool: 'countdown', limit: 5 });
      expect(list.docs!.map((d) => [d.status, (d as { progress?: number }).progress])).toEqual([['completed', 1]]);
    });

    it('tasks.cancelV2 answers {taskStatus}; a task the balance cannot cover fails with the original’s words', async () => {
      await t.services.manna.grant('bob', '1', 'forever');
      const made = (await bobSdk.tasks.createV2({ tool: 'flux_schnell', args: { prompt: 'soon cancelled', n_samples: 1 } })) as {
        task: { _id: string };
      };
      const cancelled = await bobSdk.tasks.cancelV2({ taskId: made.task._id });
      expectResponse('TasksV2CancelResponse', cancelled, ['taskStatus']);
      expect(['cancelled', 'completed']).toContain(cancelled.taskStatus);
      const broke = await failure(bobSdk.tasks.createV2({ tool: 'flux_dev', args: { prompt: 'x', n_samples: 4 } }));
      expect(broke.status).toBe(402);
      expect(broke.body.error).toMatch(/^Insufficient manna balance\. Need 4 but only have /);
    });
  });

  describe('agents.deploy, getDeployments, updateDeployment, stopDeployment, deleteDeployment (v2/agents/{id}/deployments)', () => {
    it("take the SDK's arguments and answer in its types: a Telegram deployment made, listed, changed, stopped and deleted", async () => {
      const agent = await richAgent(alice);
      const token = telegram.addBot('sdk_bot');
      const deployed = await sdk.agents.deploy({
        agentId: agent.id,
        platform: 'telegram',
        secrets: { telegram: { token } },
        config: { telegram: { topic_allowlist: [{ id: '4242', note: 'the team' }] } },
      });
      expectConforms('AgentsDeployResponse', deployed);
      const id = deployed.deployment_id;
      expect(id).toMatch(/^[0-9a-f-]{36}$/);

      const listed = await sdk.agents.getDeployments({ agentId: agent.id });
      expectResponse('AgentsGetDeploymentsResponse', listed, ['deployments']);
      expect(listed.deployments).toHaveLength(1);
      expectConforms('Deployment', listed.deployments[0]);
      expect(listed.deployments[0]).toMatchObject({
        _id: id,
        platform: 'telegram',
        agent: { _id: agent.id, username: agent.user.username },
        config: { telegram: { topic_allowlist: [{ id: '4242', note: 'the team' }] }, discord: { channel_allowlist: [] } },
      });
      expect(JSON.stringify(listed)).not.toContain(token);

      const updated = await sdk.agents.updateDeployment({
        agentId: agent.id,
        platform: 'telegram',
        config: { telegram: { topic_allowlist: [] } },
      });
      expectConforms('AgentsUpdateDeploymentResponse', updated);
      expect(updated.deploymentId).toBe(id);

      const stopped = await sdk.agents.stopDeployment({ agentId: agent.id, platform: 'telegram' });
      expectResponse('AgentsStopDeploymentResponse', stopped, ['success']);
      expect(stopped.success).toBe(true);
      expect((await sdk.agents.getDeployments({ agentId: agent.id })).deployments[0]).toMatchObject({ state: 'stopped' });

      const deleted = await sdk.agents.deleteDeployment({ agentId: agent.id, platform: 'telegram' });
      expectResponse('AgentsDeleteDeploymentResponse', deleted, ['success']);
      expect((await sdk.agents.getDeployments({ agentId: agent.id })).deployments).toEqual([]);
    });

    it('fail as the original did: 401 {error} for an agent that is not yours, 400 {error} naming the field for a token Telegram refuses', async () => {
      const agent = await richAgent(alice);
      const theirs = await failure(
        bobSdk.agents.deploy({ agentId: agent.id, platform: 'telegram', secrets: { telegram: { token: telegram.addBot() } } }),
      );
      expect(theirs).toEqual({ status: 401, body: { error: "Only the agent's owner can deploy it or change its deployments" } });
      const revoked = telegram.addBot();
      telegram.revoke(revoked);
      const refused = await failure(
        sdk.agents.deploy({ agentId: agent.id, platform: 'telegram', secrets: { telegram: { token: revoked } } }),
      );
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatch(/^secrets\.telegram\.token: Telegram refused this bot token/);
      expect((await sdk.agents.getDeployments({ agentId: agent.id })).deployments).toEqual([]);
    });
  });
});
