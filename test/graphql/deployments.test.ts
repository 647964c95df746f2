import { afterAll, describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { graphqlWsClients, wsSubscribe } from '../helpers/graphql-ws.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';
import { expectData, expectGraphQLError, postDocument } from './support.ts';

const Deploy = graphql(`
  mutation Deploy($agentId: ID!, $input: DeployInput!) {
    deployAgent(agentId: $agentId, input: $input) { id rawId platform state valid lastError account config agent { rawId } owner { username } }
  }
`);
const UpdateDeployment = graphql(`
  mutation UpdateDeployment($agentId: ID!, $input: UpdateDeploymentInput!) {
    updateDeployment(agentId: $agentId, input: $input) { rawId state config }
  }
`);
const StopDeployment = graphql(`
  mutation StopDeployment($agentId: ID!) { stopDeployment(agentId: $agentId, platform: TELEGRAM) { rawId state } }
`);
const DeleteDeployment = graphql(`
  mutation DeleteDeployment($agentId: ID!) { deleteDeployment(agentId: $agentId, platform: TELEGRAM) }
`);
const AgentDeployments = graphql(`
  query AgentDeployments($id: ID!) { agent(id: $id) { deployments { rawId state account chats { title } } } }
`);
const DeploymentUpdates = graphql(`
  subscription DeploymentUpdates($agentId: ID, $after: Seq) {
    deploymentUpdates(agentId: $agentId, after: $after) {
      __typename seq type
      ... on DeploymentStateChanged { deploymentId agentId platform state valid lastError deleted }
    }
  }
`);
const DeploymentNode = graphql(`
  query DeploymentNode($id: ID!) { node(id: $id) { __typename ... on Deployment { rawId state } } }
`);

let t: TestApp;
let tg: FakeTelegram;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;
const ws = graphqlWsClients(() => t.url);

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  t = await start.app({ deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});
afterAll(() => ws.disposeAll());

describe('deployments in GraphQL', () => {
  it('deployAgent checks the token with Telegram: a refused one is BAD_USER_INPUT on secrets.telegram.token, and nothing is made', async () => {
    const agent = await f.agent(alice);
    const token = tg.addBot();
    tg.revoke(token);
    const refused = await t.gql(
      Deploy,
      { agentId: agent.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } } } },
      alice.apiKey,
    );
    const error = expectGraphQLError(refused, 'BAD_USER_INPUT');
    expect(error.extensions?.field).toBe('secrets.telegram.token');
    expect(error.message).toBe('secrets.telegram.token: Telegram refused this bot token (getMe answered Unauthorized)');
    expect(await t.db.deployment.count({ where: { agentId: agent.id } })).toBe(0);
  });

  it('deployAgent and updateDeployment refuse a bot deployed to another agent with CONFLICT, saying where; nothing changes', async () => {
    const [first, second] = [await f.agent(alice, { name: 'First' }), await f.agent(alice, { name: 'Second' })];
    const token = tg.addBot('held_bot');
    expectData(await t.gql(Deploy, { agentId: first.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } } } }, alice.apiKey));
    const refused = await t.gql(
      Deploy,
      { agentId: second.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } } } },
      alice.apiKey,
    );
    expect(expectGraphQLError(refused, 'CONFLICT').message).toBe(
      `@held_bot on telegram is already deployed to your agent "First" (${first.id}): delete that deployment first, or deploy it there`,
    );
    expect(await t.db.deployment.count({ where: { agentId: second.id } })).toBe(0);
    const other = tg.addBot('other_bot');
    expectData(
      await t.gql(Deploy, { agentId: second.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token: other } } } }, alice.apiKey),
    );
    const swapped = await t.gql(
      UpdateDeployment,
      { agentId: second.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } } } },
      alice.apiKey,
    );
    expectGraphQLError(swapped, 'CONFLICT');
    expect((await t.db.deployment.findFirstOrThrow({ where: { agentId: second.id } })).account).toBe('@other_bot');
  });

  it('deploys, shows the state and chats on Agent.deployments for the owner only, changes, stops and deletes', async () => {
    const agent = await f.agent(alice, { public: true });
    const token = tg.addBot('gql_bot');
    const { status, text } = await postDocument(
      t,
      Deploy,
      { agentId: agent.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } }, config: { daily_manna_cap: 3 } } },
      alice.apiKey,
    );
    expect(status).toBe(200);
    expect(text).not.toContain(token.split(':')[1]);
    const deployed = JSON.parse(text).data.deployAgent;
    expect(deployed).toMatchObject({
      platform: 'TELEGRAM',
      state: 'RUNNING',
      valid: true,
      lastError: null,
      account: '@gql_bot',
      config: { daily_manna_cap: 3 },
      agent: { rawId: agent.id },
      owner: { username: 'alice' },
    });
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'a long poll');

    expect(expectData(await t.gql(AgentDeployments, { id: agent.id }, alice.apiKey)).agent.deployments).toEqual([
      { rawId: deployed.rawId, state: 'RUNNING', account: '@gql_bot', chats: [] },
    ]);
    expect(expectData(await t.gql(AgentDeployments, { id: agent.id }, bob.apiKey)).agent.deployments).toEqual([]);
    expectGraphQLError(await t.gql(StopDeployment, { agentId: agent.id }, bob.apiKey), 'FORBIDDEN');

    const updated = expectData(
      await t.gql(
        UpdateDeployment,
        { agentId: agent.id, input: { platform: 'TELEGRAM', config: { daily_manna_cap: null } } },
        alice.apiKey,
      ),
    ).updateDeployment;
    expect(updated).toEqual({ rawId: deployed.rawId, state: 'RUNNING', config: {} });
    expect(expectData(await t.gql(StopDeployment, { agentId: agent.id }, alice.apiKey)).stopDeployment.state).toBe('STOPPED');
    await tg.until(() => tg.polling(token).now === 0, 20_000, 'polling to stop');

    const deleted = expectData(await t.gql(DeleteDeployment, { agentId: agent.id }, alice.apiKey)).deleteDeployment;
    expect(deleted).toBe(deployed.id);
    expectGraphQLError(await t.gql(DeploymentNode, { id: deployed.id }, alice.apiKey), 'NOT_FOUND');
    expectGraphQLError(await t.gql(DeleteDeployment, { agentId: agent.id }, alice.apiKey), 'NOT_FOUND');
  });

  it("follows the owner's deployments' state live: deployed, then INVALID with why once Telegram refuses the token; no one else's, never the token", async () => {
    const agent = await f.agent(alice);
    const other = await f.agent(alice);
    const token = tg.addBot('live_bot');
    const before = t.services.bus.subscriberCount();
    const mine = wsSubscribe(ws.connect(alice.apiKey), DeploymentUpdates, { agentId: agent.id });
    const all = wsSubscribe(ws.connect(alice.apiKey), DeploymentUpdates, {});
    const bobs = wsSubscribe(ws.connect(bob.apiKey), DeploymentUpdates, {});
    // Each follows the feed from the moment it is open: all three are, before anything is deployed.
    await expect.poll(() => t.services.bus.subscriberCount()).toBe(before + 3);

    const deployed = expectData(
      await t.gql(Deploy, { agentId: agent.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token } } } }, alice.apiKey),
    ).deployAgent;
    await t.gql(
      Deploy,
      { agentId: other.id, input: { platform: 'TELEGRAM', secrets: { telegram: { token: tg.addBot() } } } },
      alice.apiKey,
    );
    await tg.until(() => tg.polling(token).now === 1, 20_000, 'a long poll');
    tg.revoke(token);

    const invalid = await mine.waitFor((r) => (r.data as any)?.deploymentUpdates.state === 'INVALID');
    const states = mine.results.map((r) => (r.data as any).deploymentUpdates);
    expect(states.map((e) => [e.__typename, e.type, e.deploymentId, e.agentId, e.platform, e.state, e.valid])).toEqual([
      ['DeploymentStateChanged', 'deployment_state', deployed.rawId, agent.id, 'TELEGRAM', 'RUNNING', true],
      ['DeploymentStateChanged', 'deployment_state', deployed.rawId, agent.id, 'TELEGRAM', 'INVALID', false],
    ]);
    expect((invalid.data as any).deploymentUpdates.lastError).toBe('Telegram refused the bot token (it was revoked or changed)');
    // Without agentId, every one of the owner's deployments; another user hears of none of them.
    await all.waitFor((r) => (r.data as any)?.deploymentUpdates.state === 'INVALID');
    expect(new Set(all.results.map((r) => (r.data as any).deploymentUpdates.agentId))).toEqual(new Set([agent.id, other.id]));
    // Deleted: its last event says so, in the state it ended in.
    expectData(await t.gql(DeleteDeployment, { agentId: agent.id }, alice.apiKey));
    const gone = await mine.waitFor((r) => (r.data as any)?.deploymentUpdates.deleted === true);
    expect((gone.data as any).deploymentUpdates).toMatchObject({ deploymentId: deployed.rawId, state: 'INVALID', deleted: true });
    expect(mine.results.filter((r) => (r.data as any).deploymentUpdates.deleted)).toHaveLength(1);
    expect(bobs.results).toEqual([]);
    expect(JSON.stringify([mine.results, all.results])).not.toContain(token.split(':')[1]);
  });
});
