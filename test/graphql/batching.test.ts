import { describe, expect, it } from 'vitest';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import type { GraphQLResponse, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';

const CreationsWithRelations = graphql(`
  query CreationsWithRelations($first: Int!) {
    me {
      creations(first: $first) {
        edges {
          node {
            id
            name
            likedByMe
            creator { username }
            agent { key owner { username } }
          }
        }
      }
    }
  }
`);

const AgentsWithOwners = graphql(`
  query AgentsWithOwners {
    me {
      agents(first: 100) {
        edges { node { key owner { username } creator { username } } }
      }
    }
  }
`);

const TasksWithRelations = graphql(`
  query TasksWithRelations($first: Int!) {
    tasks(first: $first) {
      edges { node { rawId status args result owner { username } agent { key owner { username } } outputs { url task { rawId } } } }
    }
  }
`);

/**
 * Relations resolve through Prisma's relation loading and per-request DataLoaders, so the
 * number of SQL statements must not grow with the number of rows.
 */
describe('query batching', () => {
  let t: TestApp;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    alice = await t.createUser('alice');
  });

  async function statementsFor<R, V>(document: TypedDocumentNode<R, V>, variables?: V) {
    let result: GraphQLResponse<R> | undefined;
    const count = await t.countQueries(async () => {
      result = await t.gql(document as TypedDocumentNode<R, Record<string, never>>, variables as Record<string, never>, alice.apiKey);
    });
    expect(result!.errors).toBeUndefined();
    return { count, data: result!.data! };
  }

  it('50 creations with creator and agent cost the same number of statements as 5', async () => {
    const f = fixtures(t);
    const agents = [await f.agent(alice), await f.agent(alice)];
    for (let i = 0; i < 5; i++) await f.creation(alice, { agentId: agents[i % 2]!.id });
    const small = await statementsFor(CreationsWithRelations, { first: 50 });
    expect(small.data.me.creations.edges).toHaveLength(5);

    for (let i = 0; i < 45; i++) await f.creation(alice, { agentId: agents[i % 2]!.id });
    const large = await statementsFor(CreationsWithRelations, { first: 50 });
    expect(large.data.me.creations.edges).toHaveLength(50);
    expect(
      large.data.me.creations.edges.every((e) => e.node.creator.username === 'alice' && e.node.agent?.owner.username === 'alice'),
    ).toBe(true);

    expect(large.count).toBe(small.count);
    // auth, me, creations, then one per relation level and one for likedByMe.
    expect(large.count).toBeLessThanOrEqual(8);
  });

  it('me { agents { owner { username } } } is a fixed number of statements', async () => {
    const f = fixtures(t);
    const small = await statementsFor(AgentsWithOwners);
    for (let i = 0; i < 30; i++) await f.agent(alice);
    const large = await statementsFor(AgentsWithOwners);
    expect(large.data.me.agents.edges.length).toBe(small.data.me.agents.edges.length + 30);
    expect(large.count).toBe(small.count);
  });

  it('50 tasks with owner, agent and outputs cost the same statements as 5, on GraphQL and on REST', async () => {
    const f = fixtures(t);
    const agent = await f.agent(alice);
    const addTasks = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const task = await t.db.task.create({
          data: { userId: alice.id, agentId: agent.id, tool: 'flux_dev', args: { prompt: `p${i}` }, status: 'completed', result: { i } },
        });
        await t.db.creation.create({
          data: { userId: alice.id, taskId: task.id, tool: 'flux_dev', name: `c${i}`, url: `https://cdn.example.com/${i}.png` },
        });
      }
    };
    await addTasks(5);
    const small = await statementsFor(TasksWithRelations, { first: 50 });
    const smallRest = await t.countQueries(() => t.rest('GET', '/v2/tasks?limit=50', { key: alice.apiKey }));
    await addTasks(45);
    const large = await statementsFor(TasksWithRelations, { first: 50 });
    expect(large.data.tasks.edges).toHaveLength(50);
    expect(large.data.tasks.edges.every((e) => e.node.outputs.length === 1 && e.node.agent?.owner.username === 'alice')).toBe(true);
    expect(large.count).toBe(small.count);
    const largeRest = await t.countQueries(async () => {
      const res = await t.rest('GET', '/v2/tasks?limit=50', { key: alice.apiKey });
      expect(res.body.docs).toHaveLength(50);
    });
    expect(largeRest).toBe(smallRest);
    // auth, the page, its bounded fields, then one per relation level (owner, agent, its owner, outputs).
    expect(large.count).toBeLessThanOrEqual(9);
  });
});
