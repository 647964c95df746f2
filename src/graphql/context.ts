import type DataLoader from 'dataloader';
import { likedByViewerLoader } from '../domain/creations/loaders.ts';
import { isDomainError, unauthenticated } from '../domain/errors.ts';
import type { Services } from '../domain/services.ts';
import type { Viewer } from '../domain/viewer.ts';

export interface GraphQLContext {
  services: Services;
  viewer: Viewer | null;
  /** Why there is no viewer (missing or invalid key), for the UNAUTHENTICATED error. */
  authProblem: string;
  loaders: { likedByViewer: DataLoader<string, boolean> } | null;
}

/** Builds the per-operation context from an API key (HTTP header or graphql-ws connectionParams). */
export async function createContext(services: Services, apiKey: string | null | undefined): Promise<GraphQLContext> {
  try {
    const viewer = await services.apiKeys.authenticate(apiKey);
    return { services, viewer, authProblem: '', loaders: { likedByViewer: likedByViewerLoader(services.db, viewer) } };
  } catch (e) {
    if (!isDomainError(e)) throw e;
    return { services, viewer: null, authProblem: e.message, loaders: null };
  }
}

/** The caller, or UNAUTHENTICATED: every root field but public ones starts here. */
export function viewerOf(ctx: GraphQLContext): Viewer {
  if (!ctx.viewer) throw unauthenticated(ctx.authProblem);
  return ctx.viewer;
}

export function loadersOf(ctx: GraphQLContext) {
  viewerOf(ctx);
  return ctx.loaders!;
}
