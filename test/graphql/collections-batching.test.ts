import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { describe, expect, it } from 'vitest';
import type { GraphQLResponse, TestApp, TestUser } from '../helpers/app.ts';
import { fixtures } from '../helpers/fixtures.ts';
import { setUp } from '../helpers/set-up.ts';
import { graphql } from './generated/gql.ts';

const CollectionsWithEverything = graphql(`
  query CollectionsWithEverything {
    me {
      collections(first: 20) {
        edges {
          node {
            name
            creationCount
            owner { username }
            cover { name creator { username } }
            creations(first: 3) { edges { node { name creator { username } agent { key } } } }
          }
        }
      }
    }
  }
`);

const CreationsWithCollections = graphql(`
  query CreationsWithCollections {
    me { creations(first: 50) { edges { node { name collections(first: 2) { edges { node { name owner { username } } } } } } } }
  }
`);

/**
 * The new lists over GraphQL cost a fixed number of SQL statements however many rows they hold:
 * a collection's count, cover and page of creations are planned into the statement that reads the
 * collections, not read one collection at a time.
 */
describe('collections in GraphQL lists: no statement per row', () => {
  let t: TestApp;
  let f: ReturnType<typeof fixtures>;
  let alice: TestUser;

  setUp(async (start) => {
    t = await start.app();
    f = fixtures(t);
    alice = await t.createUser('alice');
  });

  async function statementsFor<R>(document: TypedDocumentNode<R, Record<string, never>>, user = alice) {
    let result: GraphQLResponse<R> | undefined;
    const count = await t.countQueries(async () => {
      result = await t.gql(document, {}, user.apiKey);
    });
    expect(result!.errors).toBeUndefined();
    return { count, data: result!.data! };
  }

  /** `n` collections of alice's, each with three creations (one private), made by an agent. */
  async function collections(n: number) {
    const agent = await f.agent(alice);
    for (let i = 0; i < n; i++) {
      const creations = [
        await f.creation(alice, { agentId: agent.id }),
        await f.creation(alice, { public: false, agentId: agent.id }),
        await f.creation(alice),
      ];
      await t.services.collections.create({ id: alice.id }, { name: `C${i}`, creationIds: creations.map((c) => c.id) });
    }
  }

  it('me { collections { creationCount cover creations { creator agent } } }: 20 collections cost what 2 do', async () => {
    await collections(2);
    const small = await statementsFor(CollectionsWithEverything);
    expect(small.data.me.collections.edges).toHaveLength(2);
    await collections(18);
    const large = await statementsFor(CollectionsWithEverything);
    expect(large.data.me.collections.edges).toHaveLength(20);
    for (const { node } of large.data.me.collections.edges) {
      expect(node.creationCount).toBe(3);
      expect(node.creations.edges).toHaveLength(3);
      expect(node.cover?.creator.username).toBe('alice');
    }
    expect(large.count).toBe(small.count);
    // The key, then the profile with its collections, counts, covers and pages joined in.
    expect(large.count).toBeLessThanOrEqual(4);
  });

  it('me { creations { collections { owner } } }: 50 creations cost what 5 do', async () => {
    const bob = await t.createUser('bob');
    const carol = await t.createUser('carol');
    const add = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const c = await f.creation(carol);
        await t.services.collections.create({ id: bob.id }, { name: `Bob's ${i}`, creationIds: [c.id] });
      }
    };
    await add(5);
    const small = await statementsFor(CreationsWithCollections, carol);
    expect(small.data.me.creations.edges).toHaveLength(5);
    await add(45);
    const large = await statementsFor(CreationsWithCollections, carol);
    expect(large.data.me.creations.edges.length).toBe(50);
    expect(large.data.me.creations.edges.filter((e) => e.node.collections.edges[0]?.node.owner.username === 'bob')).toHaveLength(50);
    expect(large.count).toBe(small.count);
    expect(large.count).toBeLessThanOrEqual(3);
  });
});
