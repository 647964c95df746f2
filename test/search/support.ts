import type { TestApp, TestUser } from '../helpers/app.ts';

let seq = 0;
/** A month back on the real clock: fixtures are older than what the service makes while a test runs. */
const monthAgo = Date.now() - 30 * 86_400_000;

/** A creation made searchable the way the service does it: stored, then embedded by the active provider. */
export async function searchableCreation(
  t: TestApp,
  owner: TestUser,
  fields: { name: string; prompt?: string; public?: boolean; deleted?: boolean; agentId?: string; tool?: string; createdAt?: Date },
) {
  const creation = await t.db.creation.create({
    data: {
      userId: owner.id,
      agentId: fields.agentId,
      tool: fields.tool ?? 'flux_dev',
      name: fields.name,
      url: `https://cdn.example.com/${++seq}.png`,
      public: fields.public ?? true,
      deleted: fields.deleted ?? false,
      args: fields.prompt ? { prompt: fields.prompt } : {},
      // Distinct, increasing times, so orderings by date are well defined.
      createdAt: fields.createdAt ?? new Date(monthAgo + seq * 60_000),
    },
  });
  await t.services.search.indexCreations([creation.id]);
  return creation;
}

/** The query string of a search request. */
export const searchPath = (params: Record<string, string | number | undefined>) =>
  `/v2/creations/search?${new URLSearchParams(Object.entries(params).flatMap(([k, v]) => (v === undefined ? [] : [[k, String(v)]])))}`;
