import DataLoader from 'dataloader';
import { isDomainError, unauthenticated } from '../domain/core/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import type { Agent, User } from '../generated/prisma/client.ts';

interface Loaders {
  likedByViewer: DataLoader<string, boolean>;
  creatorById: DataLoader<string, User | null>;
  agentById: DataLoader<string, Agent | null>;
}

export interface GraphQLContext {
  services: Services;
  /** The caller, or why there is none (missing or invalid key) for the UNAUTHENTICATED error. */
  auth: { viewer: Viewer } | { problem: string };
  /** Per-operation DataLoaders, made on first use. */
  loaders?: Loaders;
}

/** Builds the per-operation context from an API key (HTTP header or graphql-ws connectionParams). */
export async function createContext(services: Services, apiKey: string | null | undefined): Promise<GraphQLContext> {
  try {
    return { services, auth: { viewer: await services.apiKeys.authenticate(apiKey) } };
  } catch (e) {
    if (!isDomainError(e)) throw e;
    return { services, auth: { problem: e.message } };
  }
}

/** The caller, or null for public fields that only adapt to who asks. */
export const maybeViewer = (ctx: GraphQLContext): Viewer | null => ('viewer' in ctx.auth ? ctx.auth.viewer : null);

/** The caller, or UNAUTHENTICATED: every root field but public ones starts here. */
export function viewerOf(ctx: GraphQLContext): Viewer {
  if ('problem' in ctx.auth) throw unauthenticated(ctx.auth.problem);
  return ctx.auth.viewer;
}

/** Rows by id, one query per model for everything an operation asks in the same tick. */
function byId<T extends { id: string }>(find: (ids: string[]) => Promise<T[]>) {
  return new DataLoader<string, T | null>(async (ids) => {
    const rows = new Map((await find([...ids])).map((r) => [r.id, r]));
    return ids.map((id) => rows.get(id) ?? null);
  });
}

export function loadersOf(ctx: GraphQLContext): Loaders {
  const viewer = viewerOf(ctx);
  const { db } = ctx.services;
  ctx.loaders ??= {
    likedByViewer: ctx.services.creations.likedByViewer(viewer),
    creatorById: byId((ids) => db.user.findMany({ where: { id: { in: ids } } })),
    agentById: byId((ids) => db.agent.findMany({ where: { id: { in: ids } } })),
  };
  return ctx.loaders;
}
