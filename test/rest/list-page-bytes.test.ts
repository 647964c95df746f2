import { EdenClient } from '@edenlabs/eden-sdk';
import { describe, expect, it } from 'vitest';
import type { TestApp, TestUser } from '../helpers/app.ts';
import { expectData } from '../graphql/support.ts';
import { graphql } from '../graphql/generated/gql.ts';
import { setUp } from '../helpers/set-up.ts';

const TaskPage = graphql(`
  query TaskPage($first: Int, $after: String) {
    tasks(first: $first, after: $after) { edges { node { rawId } } pageInfo { hasNextPage endCursor } }
  }
`);

/**
 * Numbered lists are bounded in bytes as well as rows (LIST_PAGE_MAX_BYTES): a page of large rows
 * stops before the budget, and following `nextPage` with the same limit reads every row exactly
 * once, in order, through REST and through the SDK that calls these routes; GraphQL's `tasks`
 * pages by cursor within the same budget.
 */
const PAGE_BYTES = 12_000;
/** A day's distance back on the real clock, which the rows the service makes are stamped by. */
const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000);

describe('numbered lists cut by bytes', () => {
  let t: TestApp;
  let alice: TestUser;
  let sdk: EdenClient;

  setUp(async (start) => {
    t = await start.app({ work: { listPageMaxBytes: PAGE_BYTES } });
    alice = await t.createUser('alice');
    sdk = new EdenClient({ edenApiUrl: t.url, apiKey: alice.apiKey });
  });

  type NumberedPage = {
    docs: { _id: string }[];
    total: number;
    page: number;
    pages: number;
    pagingCounter: number;
    nextPage?: number | null;
  };

  /** Every page from the first, following nextPage with the same limit; each page checked against the budget. */
  async function walk(read: (page: number) => Promise<NumberedPage>) {
    const pages: NumberedPage[] = [];
    for (let page: number | null | undefined = 1; page; ) {
      const body = await read(page);
      expect(body.page).toBe(page);
      expect(body.docs.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(JSON.stringify(body.docs))).toBeLessThanOrEqual(PAGE_BYTES);
      expect(body.pagingCounter).toBe(pages.reduce((n, p) => n + p.docs.length, 0) + 1);
      pages.push(body);
      page = body.nextPage;
    }
    for (const p of pages) expect(p.pages).toBe(pages.length);
    return pages;
  }

  it('GET /v2/models and models.list: pages of models with large arguments stop before the budget and together hold each once', async () => {
    const made: string[] = [];
    for (let i = 0; i < 7; i++) {
      const m = await t.db.model.create({
        data: {
          userId: alice.id,
          name: `LoRA ${i}`,
          baseModel: 'flux-dev',
          args: { notes: 'n'.repeat(1500 + 300 * i) },
          createdAt: daysAgo(7 - i),
        },
      });
      made.unshift(m.id);
    }
    const rest = await walk(async (page) => {
      const res = await t.rest('GET', `/v2/models?limit=5&page=${page}`, { key: alice.apiKey });
      expect(res.status).toBe(200);
      return res.body;
    });
    expect(rest.length).toBeGreaterThan(2);
    // Cut by bytes, not rows: the first page holds fewer than the 5 asked for.
    expect(rest[0]!.docs.length).toBeLessThan(5);
    expect(rest.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);
    expect(rest.every((p) => p.total === 7)).toBe(true);

    const viaSdk = await walk(async (page) => (await sdk.models.list({ page, limit: 5 })) as unknown as NumberedPage);
    expect(viaSdk.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);

    // Past the last page: nothing, and the numbers still say where the list ends.
    const past = (await t.rest('GET', `/v2/models?limit=5&page=${rest.length + 1}`, { key: alice.apiKey })).body;
    expect(past).toMatchObject({ docs: [], total: 7, pages: rest.length, hasNextPage: false, prevPage: rest.length });
  });

  it('GET /v2/threads and threads.list: pages of threads with long titles and scenarios (sized as GET /v2/sessions shows them) stop before the budget and together hold each once', async () => {
    const carol = await t.createUser('carol');
    const made: string[] = [];
    for (let i = 0; i < 7; i++) {
      const s = await t.db.session.create({
        data: {
          ownerId: carol.id,
          title: `${i} ${'t'.repeat(990)}`,
          scenario: 's'.repeat(2000 + 200 * i),
          updatedAt: daysAgo(7 - i),
        },
      });
      made.unshift(s.id);
    }
    const read = async (page: number) => {
      const res = await t.rest('GET', `/v2/threads?limit=5&page=${page}`, { key: carol.apiKey });
      expect(res.status).toBe(200);
      return res.body as NumberedPage;
    };
    const rest = await walk(read);
    expect(rest[0]!.docs.length).toBeLessThan(5);
    expect(rest.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);
    const carolSdk = new EdenClient({ edenApiUrl: t.url, apiKey: carol.apiKey });
    const viaSdk = await walk(async (page) => (await carolSdk.threads.list({ page, limit: 5 } as never)) as unknown as NumberedPage);
    expect(viaSdk.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);
  });

  it('GET /v2/models with small rows: pages of the limit asked for, as before', async () => {
    const bob = await t.createUser('bob');
    for (let i = 0; i < 5; i++) await t.db.model.create({ data: { userId: bob.id, name: `Small ${i}`, baseModel: 'flux-dev' } });
    const res = await t.rest('GET', `/v2/models?limit=2&page=2&userId=${bob.id}`, { key: bob.apiKey });
    expect(res.body).toMatchObject({ total: 5, limit: 2, page: 2, pages: 3, pagingCounter: 3, nextPage: 3, prevPage: 1 });
    expect(res.body.docs).toHaveLength(2);
  });

  it('GET /v2/tasks, tasks.listV2 and GraphQL tasks: pages of tasks with large arguments and answers stop before the budget and together hold each once', async () => {
    const made: string[] = [];
    for (let i = 0; i < 8; i++) {
      const task = await t.db.task.create({
        data: {
          userId: alice.id,
          tool: 'flux_schnell',
          status: 'completed',
          progress: 1,
          args: { prompt: 'p'.repeat(1000 + 250 * i) },
          result: { text: 'r'.repeat(1500) },
          createdAt: daysAgo(7 - i),
        },
      });
      made.unshift(task.id);
    }
    const rest = await walk(async (page) => {
      const res = await t.rest('GET', `/v2/tasks?limit=6&page=${page}`, { key: alice.apiKey });
      expect(res.status).toBe(200);
      return res.body;
    });
    expect(rest[0]!.docs.length).toBeLessThan(6);
    expect(rest.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);

    const viaSdk = await walk(async (page) => (await sdk.tasks.listV2({ page, limit: 6 })) as unknown as NumberedPage);
    expect(viaSdk.flatMap((p) => p.docs.map((d) => d._id))).toEqual(made);

    const connection: string[][] = [];
    for (let after: string | null | undefined; ; ) {
      const { edges, pageInfo } = expectData(await t.gql(TaskPage, { first: 6, after }, alice.apiKey)).tasks;
      expect(edges.length).toBeGreaterThan(0);
      connection.push(edges.map((e) => e.node.rawId));
      if (!pageInfo.hasNextPage) break;
      after = pageInfo.endCursor;
    }
    expect(connection[0]!.length).toBeLessThan(6);
    expect(connection.flat()).toEqual(made);
  });
});
