import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

/** The GraphQL this view sends. */
const MY_SERVERS = `query MyMcpServers { me { mcpServers { id name url pricePerCall hasAuthorization headers { name value } } } }`;
// Each server's tools are read on their own: one that cannot be reached fails its own read, with its reason, and no other.
const SERVER_TOOLS = `query McpServerTools($id: ID!) { node(id: $id) { ... on McpServer { tools { name title description inputSchema } } } }`;
// The authorization header travels only in the body of this request; the page keeps it nowhere.
const CREATE_SERVER = `mutation CreateMcpServer($input: CreateMcpServerInput!) { createMcpServer(input: $input) { id } }`;
const DELETE_SERVER = `mutation DeleteMcpServer($id: ID!) { deleteMcpServer(id: $id) }`;
const MY_AGENTS = `query MyAgents { me { agents(first: 50) { edges { node { id name } } } } }`;
const AGENT_TOOLS = `query AgentMcpTools($id: ID!) { agent(id: $id) { id mcpTools { server { id } tool } } }`;
const SET_AGENT_TOOLS = `mutation SetAgentMcpTools($id: ID!, $input: UpdateAgentInput!) { updateAgent(id: $id, input: $input) { id mcpTools { server { id } tool } } }`;

interface Server {
  id: string;
  name: string;
  url: string;
  pricePerCall: number;
  hasAuthorization: boolean;
  headers: { name: string; value: string }[];
}
interface Tool {
  name: string;
  title: string | null;
  description: string;
  inputSchema: unknown;
}
/** A server's tools as last read, or why they could not be. */
type Tools = { tools: Tool[] } | { reason: string };
interface Enabled {
  server: { id: string };
  tool: string;
}

const enabledKey = (serverId: string, tool: string) => `${serverId} ${tool}`;

/** "Name: value" lines, as a person writes headers, into the API's list (blank lines skipped). */
function headersOf(text: string): { name: string; value: string }[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const at = line.indexOf(':');
      return at < 0 ? { name: line, value: '' } : { name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() };
    });
}

function AddServer({ onAdd }: { onAdd: (input: Record<string, unknown>) => Promise<boolean> }) {
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  // The authorization lives only here while it is typed: it is sent once and the field emptied.
  const [authorization, setAuthorization] = useState('');
  const [headers, setHeaders] = useState('');
  const [price, setPrice] = useState('0');
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="add-mcp-server"
      onSubmit={async (e) => {
        e.preventDefault();
        const given = [...headersOf(headers), ...(authorization.trim() ? [{ name: 'authorization', value: authorization.trim() }] : [])];
        setAuthorization('');
        setBusy(true);
        const added = await onAdd({ name, url, pricePerCall: Number(price) || 0, headers: given.length ? given : undefined });
        setBusy(false);
        if (!added) return;
        setName('');
        setUrl('');
        setHeaders('');
        setPrice('0');
      }}
    >
      <input name="mcp-name" placeholder="name (a-z 0-9 - _)" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <input name="mcp-url" placeholder="https://tools.example/mcp" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      <label>
        Authorization header{' '}
        <input
          name="mcp-authorization"
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="Bearer …"
          value={authorization}
          onInput={(e) => setAuthorization(e.currentTarget.value)}
        />
      </label>
      <textarea
        name="mcp-headers"
        rows={2}
        placeholder="Other headers, one a line: X-Team: blue"
        value={headers}
        onInput={(e) => setHeaders(e.currentTarget.value)}
      />
      <label>
        Price per call{' '}
        <input name="mcp-price" type="number" min={0} step={1} value={price} onInput={(e) => setPrice(e.currentTarget.value)} /> manna
      </label>
      <p class="hint">The authorization header is kept sealed and never shown again; the other headers are shown back.</p>
      <button type="submit" disabled={busy || !name.trim() || !url.trim()}>
        Add server
      </button>
    </form>
  );
}

function ServerCard({ server, tools, onDelete }: { server: Server; tools: Tools | undefined; onDelete: () => void }) {
  return (
    <li class="mcp-server" data-mcp-server={server.name}>
      <strong>{server.name}</strong> <span class="muted url">{server.url}</span> ·{' '}
      <span class="price" data-price={server.pricePerCall}>
        {server.pricePerCall} manna a call
      </span>
      {server.hasAuthorization && <span class="muted has-authorization"> · authorization kept (sealed)</span>}
      {server.headers.length > 0 && <span class="muted headers"> · {server.headers.map((h) => `${h.name}: ${h.value}`).join(', ')}</span>}{' '}
      <button type="button" name="delete-mcp-server" class="link" onClick={onDelete}>
        delete
      </button>
      {!tools ? (
        <p class="hint">Asking the server for its tools…</p>
      ) : 'reason' in tools ? (
        <p class="unreachable" role="status">
          {tools.reason}
        </p>
      ) : (
        <ul class="mcp-tools">
          {tools.tools.length === 0 && <li class="muted">It lists no tools.</li>}
          {tools.tools.map((tool) => (
            <li key={tool.name} data-tool={tool.name}>
              <code>{tool.name}</code> {tool.title && <span>{tool.title}</span>} <span class="description">{tool.description}</span>
              <details class="input-schema">
                <summary>input schema</summary>
                <pre>{JSON.stringify(tool.inputSchema, null, 2)}</pre>
              </details>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/** Ticks of one agent's MCP tools: every tool a server lists, and those enabled that it no longer lists (kept unless unticked). */
function AgentTools({
  apiKey,
  servers,
  tools,
  onProblem,
}: {
  apiKey: string;
  servers: Server[];
  tools: Record<string, Tools>;
  onProblem: (p: Problem) => void;
}) {
  const [agents, setAgents] = useState<{ id: string; name: string }[]>([]);
  const [agentId, setAgentId] = useState('');
  const [ticked, setTicked] = useState<Set<string> | null>(null);
  const [saved, setSaved] = useState(false);

  useEffect(() => {
    request<{ me: { agents: { edges: { node: { id: string; name: string } }[] } } }>(apiKey, MY_AGENTS)
      .then((data) => {
        const mine = data.me.agents.edges.map((e) => e.node);
        setAgents(mine);
        setAgentId((id) => id || mine[0]?.id || '');
      })
      .catch((e) => onProblem(problemOf(e)));
  }, [apiKey]);
  const show = (enabled: Enabled[]) => setTicked(new Set(enabled.map((m) => enabledKey(m.server.id, m.tool))));
  useEffect(() => {
    if (!agentId) return;
    setTicked(null);
    setSaved(false);
    request<{ agent: { mcpTools: Enabled[] | null } }>(apiKey, AGENT_TOOLS, { id: agentId })
      .then((data) => show(data.agent.mcpTools ?? []))
      .catch((e) => onProblem(problemOf(e)));
  }, [apiKey, agentId]);

  if (!agents.length) return <p class="hint">You have no agents yet: make one on the left, then enable tools on it here.</p>;
  const save = async () => {
    const mcpTools = [...(ticked ?? [])].map((k) => {
      const [serverId, tool] = k.split(' ') as [string, string];
      return { serverId, tool };
    });
    try {
      const data = await request<{ updateAgent: { mcpTools: Enabled[] | null } }>(apiKey, SET_AGENT_TOOLS, {
        id: agentId,
        input: { mcpTools },
      });
      show(data.updateAgent.mcpTools ?? []);
      setSaved(true);
    } catch (e) {
      onProblem(problemOf(e));
    }
  };
  const toggle = (key: string, on: boolean) => {
    setSaved(false);
    setTicked((t) => {
      const next = new Set(t);
      if (on) next.add(key);
      else next.delete(key);
      return next;
    });
  };
  return (
    <div class="agent-mcp-tools" data-agent-id={agentId} data-loaded={String(ticked !== null)}>
      <label>
        Agent{' '}
        <select name="mcp-agent" value={agentId} onChange={(e) => setAgentId(e.currentTarget.value)}>
          {agents.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name}
            </option>
          ))}
        </select>
      </label>
      {ticked &&
        servers.map((server) => {
          const listed = tools[server.id];
          const names = new Set('tools' in (listed ?? {}) ? (listed as { tools: Tool[] }).tools.map((t) => t.name) : []);
          for (const key of ticked) if (key.startsWith(`${server.id} `)) names.add(key.slice(server.id.length + 1));
          return (
            <fieldset key={server.id} data-mcp-server={server.name}>
              <legend>{server.name}</legend>
              {names.size === 0 && <span class="muted">no tools to enable</span>}
              {[...names].sort().map((name) => (
                <label key={name}>
                  <input
                    type="checkbox"
                    name={`mcp-tool-${name}`}
                    checked={ticked.has(enabledKey(server.id, name))}
                    onChange={(e) => toggle(enabledKey(server.id, name), e.currentTarget.checked)}
                  />{' '}
                  {name}
                </label>
              ))}
            </fieldset>
          );
        })}
      <button type="button" name="save-mcp-tools" disabled={!ticked} onClick={save}>
        Save
      </button>
      {saved && <span class="muted saved"> Saved.</span>}
    </div>
  );
}

/** Your MCP servers: add one (its authorization sent once), see each one's tools with their schemas, delete one, and enable tools on an agent. */
export function McpView({ apiKey, onProblem }: { apiKey: string; onProblem: (p: Problem) => void }) {
  const [servers, setServers] = useState<Server[]>([]);
  const [tools, setTools] = useState<Record<string, Tools>>({});
  const [loaded, setLoaded] = useState(false);

  const load = useCallback(async () => {
    try {
      const data = await request<{ me: { mcpServers: Server[] } }>(apiKey, MY_SERVERS);
      setServers(data.me.mcpServers);
      setLoaded(true);
      for (const server of data.me.mcpServers)
        request<{ node: { tools: Tool[] } }>(apiKey, SERVER_TOOLS, { id: server.id })
          .then((found) => ({ tools: found.node.tools }))
          .catch((e) => ({ reason: problemOf(e).message }))
          .then((read) => setTools((all) => ({ ...all, [server.id]: read })));
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  useEffect(() => {
    void load();
  }, [load]);

  const add = async (input: Record<string, unknown>) => {
    try {
      await request(apiKey, CREATE_SERVER, { input });
      await load();
      return true;
    } catch (e) {
      onProblem(problemOf(e));
      return false;
    }
  };
  const remove = async (id: string) => {
    try {
      await request(apiKey, DELETE_SERVER, { id });
      await load();
    } catch (e) {
      onProblem(problemOf(e));
    }
  };

  return (
    <section class="mcp">
      <h2>MCP servers</h2>
      <AddServer onAdd={add} />
      {loaded && !servers.length && <p class="hint">No MCP servers yet.</p>}
      <ul class="mcp-servers">
        {servers.map((s) => (
          <ServerCard key={s.id} server={s} tools={tools[s.id]} onDelete={() => remove(s.id)} />
        ))}
      </ul>
      <h3>Tools enabled on an agent</h3>
      <AgentTools apiKey={apiKey} servers={servers} tools={tools} onProblem={onProblem} />
    </section>
  );
}
