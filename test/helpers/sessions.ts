import { expect } from 'vitest';
import type { TestApp, TestUser } from './app.ts';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Reads the session until no reply is still being written, as an integration that sent a prompt
 * without `stream` would; returns that last read.
 */
export async function settledSession(t: TestApp, user: TestUser, sessionId: string, query = '') {
  for (;;) {
    const res = await t.rest('GET', `/v2/sessions/${sessionId}${query}`, { key: user.apiKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    if (!res.body.messages.some((m: { status: string }) => m.status === 'streaming')) return res.body;
    await pause(20);
  }
}

/**
 * `settledSession`, and also named: a new session's title is its last write after its first
 * exchange (and moves its activity), made once its replies are done.
 */
export async function titledSession(t: TestApp, user: TestUser, sessionId: string) {
  for (;;) {
    const body = await settledSession(t, user, sessionId);
    if (body.session.title) return body;
    await pause(20);
  }
}

/** Creates a session over REST with the given agents and first message; returns its id. */
export async function newSession(t: TestApp, user: TestUser, agentIds: string[], body: Record<string, unknown> = {}) {
  const res = await t.rest('POST', '/v2/sessions', { key: user.apiKey, body: { agent_ids: agentIds, content: 'Hello there', ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.session_id as string;
}
