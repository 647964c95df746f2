import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import { type McpEndpoint, McpServerFailed } from '../../src/domain/mcp-servers/ports.ts';
import { mcpAgentTools, UNREACHABLE_FOR_MS } from '../../src/domain/mcp-servers/agent-tools.ts';
import { MCP_SERVER_NOT_FOUND, mcpServerService } from '../../src/domain/mcp-servers/service.ts';
import type { McpServerView } from '../../src/domain/mcp-servers/store.ts';
import { memoryMcpSealer, memoryMcpServerStore } from './support/mcp-servers.ts';

/**
 * The MCP servers' rules over a store in memory: a URL the guard refuses is never saved, the
 * authorization header is stored only sealed for its row and never shown, headers the MCP client
 * sets itself are refused, a server is its owner's alone (a stranger's request names nothing),
 * names are one per owner, and a user has a bounded number. Listing and calling a server's tools
 * is tested against the SDK's own server in test/mcp/.
 */
const owner: Viewer = { id: 'owner' };
const stranger: Viewer = { id: 'stranger' };
const TOKEN = 'Bearer s3cret-token-value';

function world(options: { refuse?: string; problem?: string; perUser?: number; failing?: string } = {}) {
  const { store, rows, rules } = memoryMcpServerStore();
  const reached: McpEndpoint[] = [];
  const forgotten: string[] = [];
  const clients = {
    async tools(endpoint: McpEndpoint) {
      reached.push(endpoint);
      if (options.failing) throw new McpServerFailed(options.failing);
      return [{ name: 'echo', title: null, description: 'Says it back', inputSchema: { type: 'object' } }];
    },
    call: async () => ({ isError: false, text: '', images: [] }),
    check: () => null,
    forget: (id: string) => void forgotten.push(id),
  };
  const sealer = memoryMcpSealer(options.problem ?? null);
  const checked: string[] = [];
  const guard = {
    async refusal(url: string) {
      checked.push(url);
      return options.refuse && url.includes('inside') ? options.refuse : null;
    },
  };
  const servers = mcpServerService({ store, sealer, guard, clients, limits: { perUser: options.perUser ?? 3 } });
  return { servers, store, rows, rules, sealer, checked, reached, forgotten };
}

const refusal = (code: string, message: string | RegExp, fieldPath?: (string | number)[]) =>
  expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message), fieldPath });
const input = { name: 'search', url: 'https://tools.example/mcp' };

describe('registering a server', () => {
  it('keeps its headers, seals its authorization header for its row and never shows it', async () => {
    const { servers, rows, sealer } = world();
    const server = await servers.create(owner, { ...input, headers: { 'X-Team': 'blue', Authorization: TOKEN }, pricePerCall: 3 });
    expect(server).toMatchObject({
      userId: owner.id,
      name: 'search',
      url: input.url,
      headers: { 'x-team': 'blue' },
      hasAuthorization: true,
      pricePerCall: 3,
    });
    const stored = rows.get(server.id)!.authorization!;
    expect(stored).not.toContain(TOKEN);
    expect(sealer.open(stored, server.id)).toBe(TOKEN);
    for (const shown of [server, await servers.get(owner, server.id), await servers.list(owner)])
      expect(JSON.stringify(shown)).not.toContain('s3cret');
  });

  it('costs nothing a call and keeps no authorization unless given', async () => {
    const { servers, rows } = world();
    const server = await servers.create(owner, input);
    expect(server).toMatchObject({ headers: {}, hasAuthorization: false, pricePerCall: 0 });
    expect(rows.get(server.id)!.authorization).toBeNull();
  });

  it('refuses a URL the guard refuses, naming the url, and saves nothing', async () => {
    const { servers, rows, checked } = world({ refuse: 'resolves to a private address' });
    await expect(servers.create(owner, { ...input, url: 'https://inside.example/mcp' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'resolves to a private address', ['url']),
    );
    expect(checked).toEqual(['https://inside.example/mcp']);
    expect(rows.size).toBe(0);
  });

  it('refuses headers the MCP client sets itself, a value on two lines and a bad name, saving nothing', async () => {
    const { servers, rows } = world();
    await expect(servers.create(owner, { ...input, headers: { 'Mcp-Session-Id': 'x', Host: 'evil.example' } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'Mcp-Session-Id, Host: set by the MCP client itself', ['headers', 'Mcp-Session-Id']),
    );
    await expect(servers.create(owner, { ...input, headers: { 'X-A': 'one\r\nX-Injected: two' } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be on one line', ['headers', 'X-A']),
    );
    await expect(servers.create(owner, { ...input, headers: { 'bad name': 'x' } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be an HTTP header name (at most 100 characters)', ['headers', 'bad name']),
    );
    await expect(servers.create(owner, { ...input, headers: { 'X-A': 'one', 'x-a': 'two' } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'names a header twice', ['headers']),
    );
    await expect(servers.create(owner, { ...input, name: 'Web Search' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /^must be 1 to 24/, ['name']),
    );
    await expect(servers.create(owner, { ...input, name: 'a__b' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /separates the server/, ['name']),
    );
    await expect(servers.create(owner, { ...input, pricePerCall: -1 })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must not be negative', ['pricePerCall']),
    );
    expect(rows.size).toBe(0);
  });

  it('keeps one server of a name for each owner; another user may use it', async () => {
    const { servers, rows } = world();
    await servers.create(owner, input);
    await expect(servers.create(owner, { ...input, url: 'https://other.example/mcp' })).rejects.toEqual(
      refusal('CONFLICT', 'You already have an MCP server named search'),
    );
    await expect(servers.create(stranger, input)).resolves.toMatchObject({ userId: stranger.id, name: 'search' });
    expect(rows.size).toBe(2);
  });

  it('allows a user a bounded number of servers, others unaffected', async () => {
    const { servers, rows } = world({ perUser: 2 });
    await servers.create(owner, { ...input, name: 'a' });
    await servers.create(owner, { ...input, name: 'b' });
    await expect(servers.create(owner, { ...input, name: 'c' })).rejects.toEqual(refusal('UNPROCESSABLE', /at most 2$/));
    expect(rows.size).toBe(2);
    await expect(servers.create(stranger, { ...input, name: 'c' })).resolves.toMatchObject({ userId: stranger.id });
  });

  it('is unavailable, saving nothing, when an authorization header cannot be sealed here; one without it is made', async () => {
    const { servers, rows } = world({ problem: 'SECRETS_KEY is not set' });
    await expect(servers.create(owner, { ...input, headers: { authorization: TOKEN } })).rejects.toEqual(
      refusal('UNAVAILABLE', 'SECRETS_KEY is not set'),
    );
    expect(rows.size).toBe(0);
    await expect(servers.create(owner, input)).resolves.toMatchObject({ hasAuthorization: false });
  });
});

describe('changing a server', () => {
  it('changes only the headers named: null removes one, the authorization header sealed again or removed', async () => {
    const { servers, rows, sealer } = world();
    const { id } = await servers.create(owner, { ...input, headers: { 'x-a': '1', 'x-b': '2', authorization: TOKEN } });
    const changed = await servers.update(owner, id, { headers: { 'X-B': null, 'x-c': '3', Authorization: 'Bearer next' } });
    expect(changed.headers).toEqual({ 'x-a': '1', 'x-c': '3' });
    expect(sealer.open(rows.get(id)!.authorization!, id)).toBe('Bearer next');
    const kept = await servers.update(owner, id, { headers: { 'x-a': 'one' } });
    expect(kept).toMatchObject({ headers: { 'x-a': 'one', 'x-c': '3' }, hasAuthorization: true });
    expect(sealer.open(rows.get(id)!.authorization!, id)).toBe('Bearer next');
    await expect(servers.update(owner, id, { headers: { authorization: null } })).resolves.toMatchObject({ hasAuthorization: false });
    expect(rows.get(id)!.authorization).toBeNull();
  });

  it('checks a new URL with the guard and leaves the server as it was when refused', async () => {
    const { servers, rows, checked } = world({ refuse: 'resolves to 10.0.0.1' });
    const { id } = await servers.create(owner, input);
    const before = structuredClone(rows.get(id));
    await expect(servers.update(owner, id, { url: 'https://inside.example/mcp' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'resolves to 10.0.0.1', ['url']),
    );
    expect(checked.at(-1)).toBe('https://inside.example/mcp');
    expect(rows.get(id)).toEqual(before);
    await expect(servers.update(owner, id, { url: 'https://moved.example/mcp', pricePerCall: 5 })).resolves.toMatchObject({
      url: 'https://moved.example/mcp',
      pricePerCall: 5,
    });
  });

  it('refuses a change that names nothing, or a name the owner has, and changes nothing', async () => {
    const { servers, rows } = world();
    const { id } = await servers.create(owner, input);
    await servers.create(owner, { ...input, name: 'other' });
    const before = structuredClone(rows.get(id));
    await expect(servers.update(owner, id, {})).rejects.toEqual(refusal('BAD_USER_INPUT', /^names nothing to change/, []));
    await expect(servers.update(owner, id, { name: 'other' })).rejects.toEqual(refusal('CONFLICT', /named other$/));
    expect(rows.get(id)).toEqual(before);
  });
});

describe('renaming a server', () => {
  it('is refused while approval rules of the owner’s agents name its tools by its name, and changes nothing', async () => {
    const { servers, rows, rules } = world();
    const { id } = await servers.create(owner, input);
    rules.push({ userId: owner.id, agent: 'Ada', tool: 'search__web' }, { userId: stranger.id, agent: 'Eve', tool: 'other__web' });
    const before = structuredClone(rows.get(id));
    await expect(servers.update(owner, id, { name: 'finder', pricePerCall: 3 })).rejects.toEqual(
      refusal('CONFLICT', /name this server's tools by its name: Ada \(search__web\)\. Change those rules first/),
    );
    expect(rows.get(id)).toEqual(before);
    // What keeps its name is not a rename; and once the rules are gone, the name may change.
    await expect(servers.update(owner, id, { name: 'search', pricePerCall: 3 })).resolves.toMatchObject({ pricePerCall: 3 });
    rules.splice(0, 1);
    await expect(servers.update(owner, id, { name: 'finder' })).resolves.toMatchObject({ name: 'finder' });
  });

  it('is not found when the server is deleted while the change is made', async () => {
    const { servers, store, rows } = world();
    const { id } = await servers.create(owner, input);
    const update = store.update;
    store.update = async (...args) => {
      rows.delete(id);
      return update(...args);
    };
    await expect(servers.update(owner, id, { pricePerCall: 1 })).rejects.toEqual(refusal('NOT_FOUND', MCP_SERVER_NOT_FOUND));
    expect(rows.size).toBe(0);
  });
});

describe("someone else's server", () => {
  it('is not found for every operation, as one that does not exist, and is left as it was', async () => {
    const { servers, rows } = world();
    const server = await servers.create(owner, { ...input, headers: { authorization: TOKEN } });
    const before = structuredClone(rows.get(server.id));
    const attempts = [
      servers.get(stranger, server.id),
      servers.update(stranger, server.id, { pricePerCall: 0 }),
      servers.remove(stranger, server.id),
      servers.get(owner, 'no-such-server'),
      servers.get(owner, 'bad\u0000id'),
    ];
    for (const attempt of attempts) await expect(attempt).rejects.toEqual(refusal('NOT_FOUND', MCP_SERVER_NOT_FOUND));
    expect(rows.get(server.id)).toEqual(before);
    expect(await servers.list(stranger)).toEqual([]);
  });

  it('is gone once its owner deletes it', async () => {
    const { servers, rows } = world();
    const { id } = await servers.create(owner, input);
    await expect(servers.remove(owner, id)).resolves.toBe(id);
    expect(rows.size).toBe(0);
    await expect(servers.get(owner, id)).rejects.toEqual(refusal('NOT_FOUND', MCP_SERVER_NOT_FOUND));
  });
});

describe("a server's tools", () => {
  it('are asked of the server with its headers and its authorization header opened, a new version after a change', async () => {
    const { servers, reached } = world();
    const { id, updatedAt } = await servers.create(owner, { ...input, headers: { authorization: TOKEN, 'x-team': 'blue' } });
    await expect(servers.tools(owner, id)).resolves.toEqual([
      { name: 'echo', title: null, description: 'Says it back', inputSchema: { type: 'object' } },
    ]);
    expect(reached).toEqual([
      { id, url: input.url, headers: { 'x-team': 'blue', authorization: TOKEN }, version: updatedAt.toISOString() },
    ]);
  });

  it("are unavailable with the server's reason when it cannot be used", async () => {
    const { servers } = world({ failing: 'no answer within 30000 ms' });
    const { id } = await servers.create(owner, input);
    await expect(servers.tools(owner, id)).rejects.toEqual(
      refusal('UNAVAILABLE', 'The MCP server search could not be used: no answer within 30000 ms'),
    );
  });

  it('are not found for a stranger, whose request reaches no server', async () => {
    const { servers, reached } = world();
    const { id } = await servers.create(owner, input);
    await expect(servers.tools(stranger, id)).rejects.toEqual(refusal('NOT_FOUND', MCP_SERVER_NOT_FOUND));
    expect(reached).toEqual([]);
  });

  it('are forgotten, with the connection, when the server is changed or deleted', async () => {
    const { servers, forgotten } = world();
    const { id } = await servers.create(owner, input);
    await servers.update(owner, id, { pricePerCall: 1 });
    await servers.remove(owner, id);
    expect(forgotten).toEqual([id, id]);
  });
});

describe("a server's tools offered in replies", () => {
  const server = (updatedAt = new Date('2026-01-01T00:00:00Z')): McpServerView => ({
    id: 'server-1',
    userId: owner.id,
    name: 'search',
    url: input.url,
    headers: {},
    hasAuthorization: false,
    pricePerCall: 1,
    createdAt: updatedAt,
    updatedAt,
  });
  const echo = { name: 'echo', title: null, description: 'Says it back', inputSchema: { type: 'object' } };

  /**
   * The agent has `echo` of one server enabled; each listing the clients are asked for answers
   * as `answer` says when asked: held (settled by the test), a list, or a failure.
   */
  function replies() {
    let current = server();
    const held: { resolve: (tools: (typeof echo)[]) => void }[] = [];
    const state = { asked: 0, answer: 'hold' as 'hold' | (typeof echo)[] | Error };
    const warned: string[] = [];
    const source = mcpAgentTools({
      store: { enabledOn: async () => [{ server: current, tool: 'echo' }] },
      endpointOf: async (s) => ({ id: s.id, url: s.url, headers: {}, version: s.updatedAt.toISOString() }),
      clients: {
        tools: () => {
          state.asked++;
          const { answer } = state;
          if (answer instanceof Error) return Promise.reject(answer);
          return answer === 'hold' ? new Promise((resolve) => held.push({ resolve })) : Promise.resolve(answer);
        },
        call: async () => ({ isError: false, text: '', images: [] }),
        check: () => null,
        forget: () => {},
      },
      media: { write: async () => {} } as never,
      log: { warn: (_obj, msg) => void warned.push(String(msg)), error: () => {} },
      offerWaitMs: 20,
    });
    const offered = async () => [...(await source.forAgent('agent')).keys()];
    return { offered, state, held, warned, change: () => (current = server(new Date(current.updatedAt.getTime() + 1000))) };
  }

  afterEach(() => {
    vi.restoreAllMocks();
    vi.useRealTimers();
  });

  it('start without a list that is late, waited for by the first reply only, and offered once it comes', async () => {
    const { offered, state, held, warned } = replies();
    expect(await offered()).toEqual([]);
    expect(warned).toEqual(['an MCP server’s tools are not offered in replies: not listed in time']);
    // The replies after it neither wait for the same listing (a timer of none) nor start another.
    const waits: number[] = [];
    const setTimeout = globalThis.setTimeout;
    vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms?: number) => {
      waits.push(ms ?? 0);
      return setTimeout(fn, ms);
    }) as typeof globalThis.setTimeout);
    expect(await offered()).toEqual([]);
    expect(await offered()).toEqual([]);
    vi.restoreAllMocks();
    expect(waits).toEqual([0, 0]);
    expect(state.asked).toBe(1);
    state.answer = [echo];
    held[0]!.resolve([echo]);
    expect(await offered()).toEqual(['search__echo']);
    expect(warned).toHaveLength(1);
  });

  it('leave out a server that could not list them for a while, then ask it again; at once when the server was changed', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { offered, state, change } = replies();
    state.answer = new McpServerFailed('no answer within 30000 ms');
    expect(await offered()).toEqual([]);
    expect(await offered()).toEqual([]);
    expect(state.asked).toBe(1);
    vi.setSystemTime(Date.now() + UNREACHABLE_FOR_MS);
    expect(await offered()).toEqual([]);
    expect(state.asked).toBe(2);
    state.answer = [echo];
    expect(await offered()).toEqual([]);
    change();
    expect(await offered()).toEqual(['search__echo']);
    expect(state.asked).toBe(3);
  });
});
