import { openSse } from './sse.ts';

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or the text when it is not JSON. */
  body: any;
}

/**
 * REST, GraphQL and prompt streams over fetch, as the holder of one API key, against a server
 * that may be a child process (`baseUrl` is read at each call: a restarted one listens elsewhere).
 */
export function apiClient(baseUrl: () => string, apiKey: string) {
  async function rest(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse> {
    const res = await fetch(`${baseUrl()}${path}`, {
      method,
      headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: the text shows what came back
    }
    return { status: res.status, headers: res.headers, body: parsed };
  }
  return {
    rest,
    /** GraphQL over HTTP, asking for the GraphQL-over-HTTP media type (whose statuses follow the errors). */
    graphql: (query: string, variables?: Record<string, unknown>) =>
      rest('POST', '/graphql', { query, variables }, { accept: 'application/graphql-response+json' }),
    /** `POST /v2/sessions` with `stream: true`: the prompt's events as SSE. */
    stream: (body: Record<string, unknown>) =>
      openSse(`${baseUrl()}/v2/sessions`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ stream: true, ...body }),
      }),
  };
}
