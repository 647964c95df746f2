import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { type FakeTelegram, startFakeTelegram } from '../helpers/fake-telegram.ts';
import { fixtures } from '../helpers/fixtures.ts';
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
const DeploymentNode = graphql(`
  query DeploymentNode($id: ID!) { node(id: $id) { __typename ... on Deployment { rawId state } } }
`);

let t: TestApp;
let tg: FakeTelegram;
let f: ReturnType<typeof fixtures>;
let alice: TestUser;
let bob: TestUser;

setUp(async (start) => {
  tg = await start.service(startFakeTelegram());
  t = await start.app({ deployments: { leaseMs: 1_500, telegram: { apiUrl: tg.apiUrl, pollTimeoutS: 1 } } });
  f = fixtures(t);
  alice = await t.createUser('alice');
  bob = await t.createUser('bob');
});

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
});
