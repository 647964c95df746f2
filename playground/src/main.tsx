import type { Client } from 'graphql-ws';
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { type ConnectionState, liveClient, type Problem, problemOf, request } from './api.ts';
import { CollectionsView } from './collections-view.tsx';
import { DeployPanel } from './deploy-panel.tsx';
import { McpView } from './mcp-view.tsx';
import { AGENTS, type Agent, CREATE_AGENT, ME, SEND, SESSIONS } from './operations.ts';
import { ApprovalsPanel } from './approvals-panel.tsx';
import { AutonomySwitch } from './autonomy-switch.tsx';
import { save } from './session-state.ts';
import { SessionView } from './session-view.tsx';
import { SharePage } from './share-page.tsx';
import { TasksView } from './tasks-view.tsx';
import { WebhooksView } from './webhooks-view.tsx';
import { TriggersPanel } from './triggers.tsx';
import './style.css';

const KEY = 'parley.apiKey';

interface Me {
  id: string;
  username: string;
  balance: number | null;
}
interface SessionSummary {
  id: string;
  title: string | null;
  agents: { id: string; name: string }[];
}

const useRoute = () => {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  if (hash === '#/collections') return { kind: 'collections', id: undefined };
  const [, deployId] = hash.match(/^#\/deploy\/([^/]+)$/) ?? [];
  if (deployId) return { kind: 'deploy', id: decodeURIComponent(deployId) };
  if (hash === '#/tasks') return { kind: 'tasks', id: undefined };
  if (hash === '#/webhooks') return { kind: 'webhooks', id: undefined };
  if (hash === '#/mcp') return { kind: 'mcp', id: undefined };
  const [, kind, id] = hash.match(/^#\/(session|share|triggers|approvals)\/([^/]+)$/) ?? [];
  return { kind, id: id && decodeURIComponent(id) };
};

export function ProblemBanner({ problem, onClose }: { problem: Problem | null; onClose?: () => void }) {
  if (!problem) return null;
  return (
    <div class={`problem problem-${problem.kind}`} role="alert" data-problem={problem.kind}>
      {problem.message}
      {onClose && (
        <button type="button" class="link" onClick={onClose}>
          dismiss
        </button>
      )}
    </div>
  );
}

function KeyForm({ onKey }: { onKey: (key: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="key-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim()) onKey(value.trim());
      }}
    >
      <label>
        API key{' '}
        <input
          name="key"
          type="password"
          autocomplete="off"
          placeholder="pk_…"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
      </label>
      <button type="submit">Use key</button>
      <p class="hint">
        Create one while the service runs: <code>npx parley keys create alice</code>. It stays in this browser (localStorage).
      </p>
    </form>
  );
}

function CreateAgent({ apiKey, onCreated, onProblem }: { apiKey: string; onCreated: () => void; onProblem: (p: Problem) => void }) {
  const [name, setName] = useState('');
  const [persona, setPersona] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="create-agent"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        // The key (a handle) must be unique across users: a slug of the name and a random tail.
        const slug =
          name
            .toLowerCase()
            .replace(/[^a-z0-9]+/g, '-')
            .replace(/^-|-$/g, '')
            .slice(0, 20) || 'agent';
        const key = `${slug}-${crypto.randomUUID().slice(0, 6)}`;
        try {
          await request(apiKey, CREATE_AGENT, { input: { key, name, persona: persona || undefined } });
          setName('');
          setPersona('');
          onCreated();
        } catch (err) {
          onProblem(problemOf(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <h3>New agent</h3>
      <input name="agent-name" required placeholder="Name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <textarea
        name="agent-persona"
        rows={3}
        placeholder="Persona: who is this agent?"
        value={persona}
        onInput={(e) => setPersona(e.currentTarget.value)}
      />
      <button type="submit" disabled={busy || !name.trim()}>
        Create agent
      </button>
    </form>
  );
}

function NewSession({
  apiKey,
  agents,
  selected,
  onProblem,
}: {
  apiKey: string;
  agents: Agent[];
  selected: string[];
  onProblem: (p: Problem) => void;
}) {
  const [text, setText] = useState('');
  const names = agents.filter((a) => selected.includes(a.id)).map((a) => a.name);
  return (
    <div class="new-session">
      <h2>New session</h2>
      <p>{names.length ? `With ${names.join(', ')}.` : 'Tick one or more agents on the left to talk to.'}</p>
      <form
        class="composer"
        onSubmit={async (e) => {
          e.preventDefault();
          try {
            const { sendMessage } = await request<{ sendMessage: { seq: number; session: { id: string } } }>(apiKey, SEND, {
              input: { agentIds: selected, content: text },
            });
            // Watch from just before this prompt: the page then shows it and every reply whole.
            save(sendMessage.session.id, { seq: sendMessage.seq - 1, order: [], messages: {} });
            location.hash = `#/session/${encodeURIComponent(sendMessage.session.id)}`;
          } catch (err) {
            onProblem(problemOf(err));
          }
        }}
      >
        <textarea name="message" rows={3} placeholder="Say something…" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        <button type="submit" disabled={!selected.length || !text.trim()}>
          Start session
        </button>
      </form>
    </div>
  );
}

function Workspace({
  apiKey,
  me,
  onProblem,
  onBalance,
}: {
  apiKey: string;
  me: Me;
  onProblem: (p: Problem | null) => void;
  onBalance: (balance: number) => void;
}) {
  const route = useRoute();
  const [agents, setAgents] = useState<Agent[]>([]);
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [selected, setSelected] = useState<string[]>([]);
  const [connection, setConnection] = useState<ConnectionState>('connecting');
  const client: Client = useMemo(() => liveClient(apiKey, setConnection), [apiKey]);
  useEffect(() => () => void client.dispose(), [client]);

  const loadAgents = useCallback(async () => {
    try {
      const data = await request<{ agents: { edges: { node: Agent }[] } }>(apiKey, AGENTS);
      setAgents(data.agents.edges.map((e) => e.node));
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  const loadSessions = useCallback(async () => {
    try {
      const data = await request<{ sessions: { edges: { node: SessionSummary }[] } }>(apiKey, SESSIONS);
      setSessions(data.sessions.edges.map((e) => e.node));
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  useEffect(() => {
    void loadAgents();
  }, [loadAgents]);
  useEffect(() => {
    void loadSessions();
  }, [loadSessions, route.id]);

  return (
    <div class="workspace">
      <aside>
        <section>
          <h3>Agents</h3>
          {agents.length === 0 && <p class="hint">No agents yet: create one below.</p>}
          <ul class="agents">
            {agents.map((a) => (
              <li key={a.id} data-agent={a.name}>
                <label title={a.persona ?? ''}>
                  <input
                    type="checkbox"
                    checked={selected.includes(a.id)}
                    onChange={(e) => setSelected((s) => (e.currentTarget.checked ? [...s, a.id] : s.filter((id) => id !== a.id)))}
                  />{' '}
                  {a.name} <span class="muted">{a.owner.username === me.username ? 'yours' : `by ${a.owner.username}`}</span>
                </label>
                {a.owner.username === me.username && (
                  <span class="agent-links">
                    {' · '}
                    <a class="triggers-link" href={`#/triggers/${encodeURIComponent(a.id)}`}>
                      triggers
                    </a>
                    {' · '}
                    <a class="deploy-link" href={`#/deploy/${encodeURIComponent(a.id)}`}>
                      telegram
                    </a>
                    {' · '}
                    <a class="approvals-link" href={`#/approvals/${encodeURIComponent(a.id)}`}>
                      approvals
                    </a>
                  </span>
                )}
              </li>
            ))}
          </ul>
          <CreateAgent apiKey={apiKey} onCreated={loadAgents} onProblem={onProblem} />
        </section>
        <section>
          <h3>
            <a href="#/collections" class={route.kind === 'collections' ? 'current' : ''}>
              Collections
            </a>
          </h3>
        </section>
        <section>
          <h3>
            <a href="#/tasks" class={route.kind === 'tasks' ? 'current' : ''}>
              Tasks
            </a>
          </h3>
        </section>
        <section>
          <h3>
            <a href="#/webhooks" class={route.kind === 'webhooks' ? 'current' : ''}>
              Webhooks
            </a>
          </h3>
        </section>
        <section>
          <h3>
            <a href="#/mcp" class={route.kind === 'mcp' ? 'current' : ''}>
              MCP servers
            </a>
          </h3>
        </section>
        <section>
          <h3>
            Sessions <a href="#/">+ new</a>
          </h3>
          <ul class="sessions">
            {sessions.map((s) => (
              <li key={s.id}>
                <a href={`#/session/${encodeURIComponent(s.id)}`} class={route.id === s.id ? 'current' : ''}>
                  {s.title || s.agents.map((a) => a.name).join(', ') || 'Session'}
                </a>
              </li>
            ))}
          </ul>
        </section>
      </aside>
      <main>
        {connection === 'lost' && (
          <div class="problem problem-connection" role="alert" data-problem="connection">
            Connection to the service lost: reconnecting…
          </div>
        )}
        {route.kind === 'collections' ? (
          <CollectionsView apiKey={apiKey} onProblem={onProblem} />
        ) : route.kind === 'deploy' && route.id ? (
          <DeployPanel key={route.id} apiKey={apiKey} client={client} agentId={route.id} onChats={loadSessions} onProblem={onProblem} />
        ) : route.kind === 'webhooks' ? (
          <WebhooksView apiKey={apiKey} onProblem={onProblem} />
        ) : route.kind === 'mcp' ? (
          <McpView apiKey={apiKey} onProblem={onProblem} />
        ) : route.kind === 'tasks' ? (
          <TasksView apiKey={apiKey} client={client} onProblem={onProblem} onBalance={onBalance} />
        ) : route.kind === 'triggers' && route.id ? (
          <TriggersPanel key={route.id} apiKey={apiKey} agentId={route.id} onProblem={onProblem} />
        ) : route.kind === 'approvals' && route.id ? (
          <ApprovalsPanel key={route.id} apiKey={apiKey} agentId={route.id} onProblem={onProblem} />
        ) : route.kind === 'session' && route.id ? (
          <>
            <AutonomySwitch key={`autonomy-${route.id}`} apiKey={apiKey} client={client} sessionId={route.id} onProblem={onProblem} />
            <SessionView key={route.id} apiKey={apiKey} client={client} sessionId={route.id} agents={agents} onProblem={onProblem} />
          </>
        ) : (
          <NewSession apiKey={apiKey} agents={agents} selected={selected} onProblem={onProblem} />
        )}
      </main>
    </div>
  );
}

function App() {
  const route = useRoute();
  const [apiKey, setApiKey] = useState(() => localStorage.getItem(KEY) ?? '');
  const [me, setMe] = useState<Me | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);

  const refreshMe = useCallback(async () => {
    if (!apiKey) return;
    try {
      setMe((await request<{ me: Me }>(apiKey, ME)).me);
    } catch (e) {
      setMe(null);
      setProblem(problemOf(e));
    }
  }, [apiKey]);
  useEffect(() => {
    void refreshMe();
  }, [refreshMe]);

  const useKey = (key: string) => {
    localStorage.setItem(KEY, key);
    setProblem(null);
    setApiKey(key);
  };
  const forgetKey = () => {
    localStorage.removeItem(KEY);
    setApiKey('');
    setMe(null);
  };

  if (route.kind === 'share' && route.id) return <SharePage shareId={route.id} />;
  return (
    <div class="app">
      <header>
        <h1>
          parley <span class="muted">playground</span>
        </h1>
        {me && (
          <div class="whoami" data-username={me.username}>
            {me.username} · balance <span class="balance">{me.balance ?? 0}</span> manna{' '}
            <button type="button" class="link" onClick={refreshMe}>
              refresh
            </button>{' '}
            <button type="button" class="link" onClick={forgetKey}>
              change key
            </button>
          </div>
        )}
        <a href="/graphql" class="muted">
          GraphiQL
        </a>
      </header>
      <ProblemBanner problem={problem} onClose={() => setProblem(null)} />
      {!apiKey || !me ? (
        <KeyForm onKey={useKey} />
      ) : (
        <Workspace
          apiKey={apiKey}
          me={me}
          onBalance={(balance) => setMe((m) => (m && m.balance !== balance ? { ...m, balance } : m))}
          onProblem={(p) => {
            setProblem(p);
            if (p?.kind === 'budget') void refreshMe();
          }}
        />
      )}
    </div>
  );
}

render(<App />, document.getElementById('app')!);
