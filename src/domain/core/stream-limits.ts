import type { Viewer } from './viewer.ts';

/**
 * What one API key may hold open at once, whatever the transport: subscriptions and event
 * streams of any kind, and among them replies being streamed (each keeps a model busy). The
 * counting itself is an adapter's (in process, or shared through Redis).
 */
export interface StreamLimits {
  /** Takes the caller's slots, or throws TOO_MANY_SUBSCRIPTIONS / TOO_MANY_STREAMS; call the result once to give them back. */
  hold(viewer: Viewer, kind: 'subscription' | 'stream'): Promise<() => void>;
}
