import { type Client, createClient } from 'graphql-ws';

/** An error the page can explain: what went wrong, in words a person can act on. */
export interface Problem {
  kind: 'key' | 'budget' | 'rate' | 'connection' | 'other';
  message: string;
}

interface GraphQLError {
  message: string;
  extensions?: { code?: string; retryAfter?: number };
}

export function describeProblem(errors: readonly GraphQLError[] | undefined, status?: number): Problem {
  const first = errors?.[0];
  const code = first?.extensions?.code;
  const message = first?.message ?? `The server answered ${status}`;
  if (code === 'UNAUTHENTICATED' || status === 401)
    return { kind: 'key', message: `This key was not accepted (${message}). Create one with: npx parley keys create <name>` };
  if (code === 'RATE_LIMITED' || status === 429) return { kind: 'rate', message: `Slow down: ${message}` };
  if (/manna|budget|balance/i.test(message)) return { kind: 'budget', message: `Budget spent: ${message}` };
  return { kind: 'other', message };
}

export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

/** Queries and mutations over HTTP, with the key in the X-Api-Key header. */
export async function request<T>(key: string, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetch('/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...(key ? { 'x-api-key': key } : {}) },
      body: JSON.stringify({ query, variables }),
    });
  } catch {
    throw new ProblemError({ kind: 'connection', message: 'The service cannot be reached. Is it running?' });
  }
  const body = (await response.json().catch(() => null)) as { data?: T; errors?: GraphQLError[] } | null;
  if (!body || body.errors?.length || !body.data) throw new ProblemError(describeProblem(body?.errors, response.status));
  return body.data;
}

export type ConnectionState = 'connecting' | 'connected' | 'lost';

/**
 * One graphql-ws connection per key, open and reconnecting for as long as the page is. graphql-ws
 * sends a subscription's payload again on every reconnection, so a subscription that keeps its
 * `after` variable current resumes where it was.
 */
export function liveClient(key: string, onState: (state: ConnectionState) => void): Client {
  const client = createClient({
    url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`,
    connectionParams: { 'X-Api-Key': key },
    // Open while the page is: a lazy one closes whenever no panel follows anything (the Triggers
    // panel, say), and that close read as a lost connection.
    lazy: false,
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: (event) => !(event instanceof CloseEvent && event.code === 4403),
    retryWait: async (retries) => new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** retries, 5_000))),
  });
  client.on('connecting', () => onState('connecting'));
  client.on('connected', () => onState('connected'));
  client.on('closed', () => onState('lost'));
  return client;
}

export const problemOf = (e: unknown): Problem =>
  e instanceof ProblemError ? e.problem : { kind: 'other', message: e instanceof Error ? e.message : String(e) };
