import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mcpSessions } from '../../src/mcp/sessions.ts';

/**
 * The registry of MCP sessions behind `/mcp`: which key finds a session, how many a key holds,
 * and when a session closes (its key deleted, or left idle). On the fake clock throughout.
 */
beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const IDLE_MS = 60_000;

function session(id: string, keyId: string) {
  const server = { close: vi.fn(async () => {}) };
  return {
    id,
    keyId,
    server: server as unknown as McpServer,
    transport: {} as StreamableHTTPServerTransport,
    closed: () => server.close.mock.calls.length > 0,
  };
}

describe('MCP sessions', () => {
  it('a session is found only with the key that opened it', () => {
    const sessions = mcpSessions({ maxPerKey: 5, idleMs: IDLE_MS });
    const mine = session('s1', 'key-a');
    sessions.add(mine);
    expect(sessions.get('s1', 'key-a')?.id).toBe('s1');
    expect(sessions.get('s1', 'key-b')).toBeNull();
    expect(sessions.get('s2', 'key-a')).toBeNull();
  });

  it('a key holds at most maxPerKey sessions; one ended makes room, and other keys are not counted', () => {
    const sessions = mcpSessions({ maxPerKey: 2, idleMs: IDLE_MS });
    sessions.add(session('s1', 'key-a'));
    sessions.add(session('s2', 'key-a'));
    expect(sessions.hasRoomFor('key-a')).toBe(false);
    expect(sessions.hasRoomFor('key-b')).toBe(true);
    sessions.closed('s1');
    expect(sessions.hasRoomFor('key-a')).toBe(true);
  });

  it("a deleted key closes its idle sessions at once, and one answering a call once the answer is written; other keys' stay", () => {
    const sessions = mcpSessions({ maxPerKey: 5, idleMs: IDLE_MS });
    const [idle, busy, others] = [session('s1', 'key-a'), session('s2', 'key-a'), session('s3', 'key-b')];
    for (const s of [idle, busy, others]) sessions.add(s);
    const answered = sessions.answering(sessions.get('s2', 'key-a')!);
    sessions.closeKey('key-a');
    expect(idle.closed()).toBe(true);
    expect(busy.closed()).toBe(false);
    answered();
    expect(busy.closed()).toBe(true);
    expect(others.closed()).toBe(false);
    expect(sessions.size).toBe(1);
  });

  it('a session without a request for idleMs closes; each request starts its clock again', () => {
    const sessions = mcpSessions({ maxPerKey: 5, idleMs: IDLE_MS });
    const s = session('s1', 'key-a');
    sessions.add(s);
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(sessions.get('s1', 'key-a')).not.toBeNull();
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(s.closed()).toBe(false);
    vi.advanceTimersByTime(1);
    expect(s.closed()).toBe(true);
    expect(sessions.get('s1', 'key-a')).toBeNull();
  });
});
