import type { Client } from 'graphql-ws';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeProblem, type Problem, problemOf, request } from './api.ts';

/** The GraphQL of an agent's Telegram deployment; every field the panel shows comes from here. */
const DEPLOYMENT = `id rawId platform state valid lastError account updatedAt
  chats { conversationId title createdAt session { id title } }`;
const AGENT_DEPLOYMENTS = `query AgentDeployments($id: ID!) { agent(id: $id) { rawId name deployments { ${DEPLOYMENT} } } }`;
// The token travels only in the body of this request: never in an address, never kept by the page.
const DEPLOY = `mutation DeployToTelegram($agentId: ID!, $input: DeployInput!) { deployAgent(agentId: $agentId, input: $input) { ${DEPLOYMENT} } }`;
const STOP = `mutation StopTelegram($agentId: ID!) { stopDeployment(agentId: $agentId, platform: TELEGRAM) { ${DEPLOYMENT} } }`;
const DELETE = `mutation DeleteTelegram($agentId: ID!) { deleteDeployment(agentId: $agentId, platform: TELEGRAM) }`;
const UPDATES = `subscription DeploymentUpdates($agentId: ID, $after: Seq) { deploymentUpdates(agentId: $agentId, after: $after) {
  seq at ... on DeploymentStateChanged { deploymentId platform state valid lastError }
} }`;

/**
 * A chat's first message makes its session, and no event announces that: while the deployment
 * runs, the panel reads it again this often to show new chats (its state comes live).
 */
const REFRESH_MS = 2_000;
/** How many of the live state changes the panel lists. */
const SHOWN_CHANGES = 8;

interface Chat {
  conversationId: string;
  title: string;
  createdAt: string;
  session: { id: string; title: string | null } | null;
}
interface Deployment {
  id: string;
  rawId: string;
  platform: string;
  state: 'RUNNING' | 'STOPPED' | 'INVALID';
  valid: boolean;
  lastError: string | null;
  account: string | null;
  updatedAt: string;
  chats: Chat[];
}
interface StateChange {
  seq: number;
  at: string;
  deploymentId: string;
  platform: string;
  state: Deployment['state'];
  valid: boolean;
  lastError: string | null;
}

const SAYS: Record<Deployment['state'], string> = {
  RUNNING: 'Running: it reads what people write to the bot and answers them.',
  STOPPED: 'Stopped: the bot reads nothing until you start it again.',
  INVALID: 'Telegram refused its token: deploy again with a new one.',
};

/** A refusal of the deployment in words: the field the server names is this form's one field. */
const refusalOf = (p: Problem) => `Not deployed: ${p.message.replace(/^secrets\.telegram\.token: /, '')}`;

function TokenForm({ deployed, onDeploy }: { deployed: boolean; onDeploy: (token: string) => Promise<void> }) {
  // The token lives only here, while it is typed: it is sent once and the field emptied.
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="deploy-form"
      onSubmit={async (e) => {
        e.preventDefault();
        const given = token.trim();
        setToken('');
        setBusy(true);
        try {
          await onDeploy(given);
        } finally {
          setBusy(false);
        }
      }}
    >
      <label>
        Bot token{' '}
        <input
          name="telegram-token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="123456789:AA…"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
        />
      </label>
      <p class="hint">From Telegram's @BotFather. Parley checks it with Telegram, keeps it sealed, and never shows it again.</p>
      <button type="submit" name="deploy" disabled={busy || !token.trim()}>
        {deployed ? 'Deploy with this token' : 'Deploy to Telegram'}
      </button>
    </form>
  );
}

function DeploymentCard({
  deployment,
  changes,
  act,
}: {
  deployment: Deployment;
  changes: StateChange[];
  act: (query: string, variables?: Record<string, unknown>) => () => Promise<void>;
}) {
  const d = deployment;
  return (
    <section class="deployment" data-deployment-id={d.rawId} data-state={d.state} data-valid={String(d.valid)}>
      <h3>
        Telegram {d.account && <span class="account">{d.account}</span>} <span class="muted status">{d.state.toLowerCase()}</span>
      </h3>
      <p>{SAYS[d.state]}</p>
      {d.lastError && (
        <p class="problem problem-other last-error" role="status">
          Last error: {d.lastError}
        </p>
      )}
      <div class="actions">
        {d.state === 'RUNNING' && (
          <button type="button" name="stop" onClick={act(STOP)}>
            Stop
          </button>
        )}
        {d.state === 'STOPPED' && (
          <button type="button" name="start" onClick={act(DEPLOY, { input: { platform: 'TELEGRAM' } })}>
            Start again
          </button>
        )}
        <button type="button" name="delete" class="link" onClick={act(DELETE)}>
          delete
        </button>
      </div>
      <h4>Chats</h4>
      {d.chats.length === 0 && <p class="hint">None yet: each Telegram chat that writes to the bot becomes a session of yours.</p>}
      <ul class="chats">
        {d.chats.map((c) => (
          <li key={c.conversationId} data-chat={c.conversationId} data-session-id={c.session?.id ?? ''}>
            {c.title}{' '}
            {c.session ? (
              <a class="chat-session" href={`#/session/${encodeURIComponent(c.session.id)}`}>
                open session
              </a>
            ) : (
              <span class="muted">no session</span>
            )}
          </li>
        ))}
      </ul>
      {changes.length > 0 && (
        <>
          <h4>Live</h4>
          <ol class="state-changes">
            {changes.map((c) => (
              <li key={c.seq} data-change-state={c.state}>
                {new Date(c.at).toLocaleTimeString()} · {c.state.toLowerCase()}
                {c.lastError && <span class="muted"> — {c.lastError}</span>}
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  );
}

/**
 * An agent's Telegram deployment: deploy it with a bot token, watch its state change live
 * (`deploymentUpdates`), stop, start and delete it, and open the sessions its chats became.
 */
export function DeployPanel({
  apiKey,
  client,
  agentId,
  onChats,
  onProblem,
}: {
  apiKey: string;
  client: Client;
  agentId: string;
  /** Its chats made a session the page has not seen: the session list should be read again. */
  onChats: () => void;
  onProblem: (p: Problem) => void;
}) {
  const [agent, setAgent] = useState<{ rawId: string; name: string } | null>(null);
  const [deployment, setDeployment] = useState<Deployment | null>(null);
  const [changes, setChanges] = useState<StateChange[]>([]);
  const [refusal, setRefusal] = useState<string | null>(null);
  // Only the answer to the latest read or change is shown: an older one still on its way is stale.
  const latest = useRef(0);
  const sessions = useRef<Set<string> | null>(null);

  const show = useCallback(
    (found: Deployment | null) => {
      setDeployment(found);
      const ids = new Set((found?.chats ?? []).flatMap((c) => (c.session ? [c.session.id] : [])));
      if (sessions.current && [...ids].some((id) => !sessions.current!.has(id))) onChats();
      sessions.current = ids;
    },
    [onChats],
  );

  const load = useCallback(async () => {
    const mine = ++latest.current;
    try {
      const data = await request<{ agent: { rawId: string; name: string; deployments: Deployment[] } }>(apiKey, AGENT_DEPLOYMENTS, {
        id: agentId,
      });
      if (mine !== latest.current) return;
      setAgent({ rawId: data.agent.rawId, name: data.agent.name });
      show(data.agent.deployments.find((d) => d.platform === 'TELEGRAM') ?? null);
    } catch (err) {
      onProblem(problemOf(err));
    }
  }, [apiKey, agentId, show]);

  useEffect(() => {
    void load();
  }, [load]);

  const running = deployment?.state === 'RUNNING';
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, [running, load]);

  // The feed filters by the agent's raw id; graphql-ws sends `after` again on every reconnection.
  const rawId = agent?.rawId;
  useEffect(() => {
    if (!rawId) return;
    const variables: { agentId: string; after?: number } = { agentId: rawId };
    const unsubscribe = client.subscribe<{ deploymentUpdates: StateChange }>(
      { query: UPDATES, variables },
      {
        next: (result) => {
          const change = result.data?.deploymentUpdates;
          if (!change) return;
          variables.after = change.seq;
          if (change.platform !== 'TELEGRAM') return;
          setChanges((list) => [change, ...list].slice(0, SHOWN_CHANGES));
          // The event says the state; a read says the rest (a deletion, a new account).
          setDeployment((d) =>
            d && d.rawId === change.deploymentId ? { ...d, state: change.state, valid: change.valid, lastError: change.lastError } : d,
          );
          void load();
        },
        error: (errors) => {
          const list = Array.isArray(errors) ? errors : [];
          onProblem(
            list.length
              ? describeProblem(list as never)
              : { kind: 'connection', message: 'The live connection failed; reload the page to try again.' },
          );
        },
        complete: () => {},
      },
    );
    // A change made before the subscription was open is in this read.
    void load();
    return unsubscribe;
  }, [client, rawId, load]);

  const deploy = async (token: string) => {
    setRefusal(null);
    const mine = ++latest.current;
    try {
      const data = await request<{ deployAgent: Deployment }>(apiKey, DEPLOY, {
        agentId,
        input: { platform: 'TELEGRAM', secrets: { telegram: { token } } },
      });
      if (mine === latest.current) show(data.deployAgent);
    } catch (err) {
      const problem = problemOf(err);
      if (problem.kind === 'other') setRefusal(refusalOf(problem));
      else onProblem(problem);
    }
  };

  const act =
    (query: string, variables: Record<string, unknown> = {}) =>
    async () => {
      setRefusal(null);
      const mine = ++latest.current;
      try {
        const data = await request<Record<string, Deployment | string>>(apiKey, query, { agentId, ...variables });
        if (mine !== latest.current) return;
        const changed = Object.values(data)[0];
        show(typeof changed === 'object' ? changed : null);
      } catch (err) {
        onProblem(problemOf(err));
      }
    };

  if (!agent) return <p class="hint">Loading the deployment…</p>;
  return (
    <div class="deployments" data-agent-id={agentId}>
      <h2>Deploy {agent.name} to Telegram</h2>
      {deployment ? (
        <DeploymentCard deployment={deployment} changes={changes} act={act} />
      ) : (
        <p class="hint">
          Not deployed. Make a bot with Telegram's @BotFather and give its token: people who write to the bot talk to {agent.name}, and you
          pay for and watch their conversations here.
        </p>
      )}
      <TokenForm deployed={Boolean(deployment)} onDeploy={deploy} />
      {refusal && (
        <p class="problem problem-other" role="alert" data-refusal>
          {refusal}
        </p>
      )}
    </div>
  );
}
