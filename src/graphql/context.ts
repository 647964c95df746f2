import type DataLoader from 'dataloader';
import { likedByViewerLoader } from '../domain/creations/loaders.ts';
import { isDomainError, unauthenticated } from '../domain/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';

export interface GraphQLContext {
  services: Services;
  /** The caller, or why there is none (missing or invalid key) for the UNAUTHENTICATED error. */
  auth: { viewer: Viewer } | { problem: string };
  /** Per-operation DataLoaders, made on first use. */
  loaders?: { likedByViewer: DataLoader<string, boolean> };
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

export function loadersOf(ctx: GraphQLContext) {
  const viewer = viewerOf(ctx);
  ctx.loaders ??= { likedByViewer: likedByViewerLoader(ctx.services.db, viewer) };
  return ctx.loaders;
}
