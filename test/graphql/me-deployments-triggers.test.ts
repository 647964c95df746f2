import { beforeAll, describe, expect, it } from 'vitest';
import { credit } from '../../src/domain/manna/stores/ledger.ts';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, postDocument, postRaw } from './support.ts';

const MeProfile = graphql(`
  query MeProfile {
    me { rawId username type balance subscriptionBalance foreverBalance subscriptionTier featureFlags agentProfile { rawId } }
  }
`);
const MeOwnerOfAgent = graphql(`
  query MeOwnerOfAgent($id: ID!) {
    agent(id: $id) {
      owner { username balance subscriptionBalance foreverBalance subscriptionTier featureFlags }
      creator { username balance }
    }
  }
`);
const MeAgentsPage = graphql(`
  query MeAgentsPage($first: Int!, $after: String) {
    me {
      agents(first: $first, after: $after) {
        edges { cursor node { rawId key public createdAt } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`);
const MeAgentsOfOwner = graphql(`
  query MeAgentsOfOwner($id: ID!) {
    agent(id: $id) { owner { username agents(first: 50) { edges { node { rawId public } } } } }
  }
`);
const MeDeployments = graphql(`
  query MeDeployments {
    deployments { rawId platform config valid createdAt agent { rawId key } owner { username } }
  }
`);
const MeDeploymentType = graphql(`
  query MeDeploymentType {
    __type(name: "Deployment") { fields { name } }
  }
`);
const MeTriggers = graphql(`
  query MeTriggers {
    triggers { rawId name cron timezone triggerPrompt status lastRun nextRun createdAt session { rawId } agent { rawId } owner { username } }
  }
`);

let t: TestApp;
let f: ReturnType<typeof fixtures>;

setUp(async (start) => {
  t = await start.app();
  f = fixtures(t);
});

describe('me', () => {
  it('is the key owner: username, type USER, zero balances, own account details', async () => {
    const erin = await t.createUser('erin');
    expect(expectData(await t.gql(MeProfile, {}, erin.apiKey)).me).toEqual({
      rawId: erin.id,
      username: 'erin',
      type: 'USER',
      balance: 0,
      subscriptionBalance: 0,
      foreverBalance: 0,
      subscriptionTier: 'free',
      featureFlags: [],
      agentProfile: null,
    });
  });

  it('balance is subscription plus forever manna after credits', async () => {
    const frank = await t.createUser('frank');
    await t.db.$transaction(async (tx) => {
      await credit(tx, { userId: frank.id, kind: 'subscription', amount: '12.5', reason: 'monthly grant' });
      await credit(tx, { userId: frank.id, kind: 'forever', amount: '7.25', reason: 'purchase' });
      await credit(tx, { userId: frank.id, kind: 'forever', amount: '0.1', reason: 'bonus' });
    });
    const me = expectData(await t.gql(MeProfile, {}, frank.apiKey)).me;
    expect(me.subscriptionBalance).toBe(12.5);
    expect(me.foreverBalance).toBeCloseTo(7.35, 10);
    expect(me.balance).toBeCloseTo(19.85, 10);
  });

  it("balances and account details are null on another creator's profile", async () => {
    const gina = await t.createUser('gina');
    const hank = await t.createUser('hank');
    await t.db.$transaction((tx) => credit(tx, { userId: gina.id, kind: 'forever', amount: '50', reason: 'purchase' }));
    const agent = await f.agent(gina, { public: true });

    const seenByHank = expectData(await t.gql(MeOwnerOfAgent, { id: agent.id }, hank.apiKey)).agent;
    expect(seenByHank.owner).toEqual({
      username: 'gina',
      balance: null,
      subscriptionBalance: null,
      foreverBalance: null,
      subscriptionTier: null,
      featureFlags: null,
    });
    expect(seenByHank.creator.balance).toBeNull();

    // The same path for the owner shows her own balance.
    const seenByGina = expectData(await t.gql(MeOwnerOfAgent, { id: agent.id }, gina.apiKey)).agent;
    expect(seenByGina.owner).toMatchObject({ username: 'gina', balance: 50, foreverBalance: 50, subscriptionTier: 'free' });
  });

  it('me.agents paginates with first/after and shows your private agents, newest first', async () => {
    const ivy = await t.createUser('ivy');
    const other = await t.createUser('ivy-neighbour');
    const created = [];
    for (let i = 0; i < 5; i++) created.push(await f.agent(ivy, { public: i % 2 === 0 }));
    await f.agent(other, { public: true });

    const seen: { rawId: string; public: boolean; createdAt: string }[] = [];
    let after: string | null = null;
    const pages: number[] = [];
    for (let guard = 0; guard < 5; guard++) {
      const page: {
        edges: { cursor: string; node: { rawId: string; public: boolean; createdAt: string } }[];
        pageInfo: { hasNextPage: boolean; endCursor?: string | null };
      } = expectData(await t.gql(MeAgentsPage, { first: 2, after }, ivy.apiKey)).me.agents;
      pages.push(page.edges.length);
      seen.push(...page.edges.map((e) => e.node));
      expect(page.pageInfo.endCursor).toBe(page.edges.at(-1)?.cursor);
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor!;
    }
    expect(pages).toEqual([2, 2, 1]);
    expect(seen.map((a) => a.rawId).sort()).toEqual(created.map((a) => a.id).sort());
    expect(seen.filter((a) => !a.public)).toHaveLength(2);
    const times = seen.map((a) => Date.parse(a.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("another creator's agents list only the public ones", async () => {
    const jo = await t.createUser('jo');
    const kim = await t.createUser('kim');
    const pub = await f.agent(jo, { public: true });
    await f.agent(jo, { public: false });
    await f.agent(jo, { public: false });

    const owner = expectData(await t.gql(MeAgentsOfOwner, { id: pub.id }, kim.apiKey)).agent.owner;
    expect(owner.username).toBe('jo');
    expect(owner.agents.edges.map((e) => e.node.rawId)).toEqual([pub.id]);

    const own = expectData(await t.gql(MeAgentsOfOwner, { id: pub.id }, jo.apiKey)).agent.owner;
    expect(own.agents.edges).toHaveLength(3);
  });
});

describe('deployments and triggers', () => {
  let lea: TestUser;
  let max: TestUser;
  let leaAgents: string[];
  let secrets: string[];

  beforeAll(async () => {
    lea = await t.createUser('lea');
    max = await t.createUser('max');
    const a1 = await f.agent(lea, { public: true });
    const a2 = await f.agent(lea, { public: false });
    const m1 = await f.agent(max, { public: true });
    leaAgents = [a1.id, a2.id];
    await f.deployment(a1.id, lea.id, 'discord');
    await f.deployment(a2.id, lea.id, 'telegram');
    await f.deployment(m1.id, max.id, 'discord');
    // The client omits secrets unless asked; the test asks, to know what must never come back.
    const rows = await t.db.deployment.findMany({ omit: { secrets: false } });
    secrets = rows.map((d) => (d.secrets as { bot_token?: string } | null)?.bot_token ?? '');
    expect(secrets).toHaveLength(3);
    expect(secrets.every((s) => s.startsWith('secret-'))).toBe(true);
    await f.trigger(a1.id, lea.id);
    await f.trigger(a2.id, lea.id);
    await f.trigger(m1.id, max.id);
  });

  it("deployments lists only the caller's agents' deployments, newest first", async () => {
    const deployments = expectData(await t.gql(MeDeployments, {}, lea.apiKey)).deployments;
    expect(deployments).toHaveLength(2);
    expect(deployments.map((d) => d.agent.rawId).sort()).toEqual([...leaAgents].sort());
    expect(deployments.map((d) => d.platform).sort()).toEqual(['DISCORD', 'TELEGRAM']);
    expect(deployments.every((d) => d.owner.username === 'lea' && d.valid === true)).toBe(true);
    expect(deployments[0]!.config).toEqual({ channel: 'general' });
    const times = deployments.map((d) => Date.parse(d.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const maxs = expectData(await t.gql(MeDeployments, {}, max.apiKey)).deployments;
    expect(maxs).toHaveLength(1);
    expect(maxs[0]!.owner.username).toBe('max');
  });

  it('a caller without agents has no deployments or triggers', async () => {
    const nia = await t.createUser('nia');
    expect(expectData(await t.gql(MeDeployments, {}, nia.apiKey)).deployments).toEqual([]);
    expect(expectData(await t.gql(MeTriggers, {}, nia.apiKey)).triggers).toEqual([]);
  });

  it('the Deployment type has no secrets field, and asking for one is a validation error', async () => {
    const type = expectData(await t.gql(MeDeploymentType, {}, lea.apiKey)).__type;
    const fields = type!.fields!.map((field) => field.name);
    expect(fields).toContain('config');
    expect(fields.filter((name) => /secret/i.test(name))).toEqual([]);

    const asked = await postRaw(t, { query: '{ deployments { id secrets } }' }, lea.apiKey);
    expect([200, 400]).toContain(asked.status);
    expect(asked.json.data ?? null).toBeNull();
    expect(asked.json.errors[0].message).toMatch(/secrets/);
    for (const secret of secrets) expect(asked.text).not.toContain(secret);
  });

  it('the raw HTTP response never contains a secret', async () => {
    for (const key of [lea.apiKey, max.apiKey]) {
      const { status, text } = await postDocument(t, MeDeployments, {}, key);
      expect(status).toBe(200);
      expect(text).toContain('"deployments"');
      for (const secret of secrets) expect(text).not.toContain(secret);
      expect(text).not.toContain('bot_token');
    }
  });

  it("triggers lists only the caller's agents' triggers, with their fields", async () => {
    const triggers = expectData(await t.gql(MeTriggers, {}, lea.apiKey)).triggers;
    expect(triggers).toHaveLength(2);
    expect(triggers.map((tr) => tr.agent.rawId).sort()).toEqual([...leaAgents].sort());
    for (const trigger of triggers) {
      expect(trigger).toMatchObject({
        cron: '0 9 * * *',
        timezone: 'Europe/Paris',
        triggerPrompt: 'Say good morning',
        status: 'ACTIVE',
        lastRun: null,
        nextRun: expect.stringMatching(/T0[78]:00:00\.000Z$/),
        session: null,
        owner: { username: 'lea' },
      });
    }
    const times = triggers.map((tr) => Date.parse(tr.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    const maxs = expectData(await t.gql(MeTriggers, {}, max.apiKey)).triggers;
    expect(maxs).toHaveLength(1);
    expect(maxs[0]!.owner.username).toBe('max');
  });
});
