import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

/**
 * The GraphQL of an agent's triggers; every field the panel shows comes from here. A page of
 * triggers with each one's latest runs stays within the server's document cost limit
 * (docs/security.md; test/playground/playground-queries.test.ts checks every document of the page).
 */
const TRIGGER = `id rawId name prompt status nextScheduledRun lastRunTime errorCount lastError
  schedule { second minute hour dayOfMonth month dayOfWeek timezone }
  runs(first: 3) { edges { node { rawId status scheduledFor startedAt error session { rawId } } } }`;
const AGENT_TRIGGERS = `query AgentTriggers($id: ID!, $after: String) { agent(id: $id) { id name
  triggers(first: 20, after: $after) { pageInfo { hasNextPage endCursor } edges { node { ${TRIGGER} } } }
} }`;
const CREATE_TRIGGER = `mutation CreateTrigger($agentId: ID!, $input: CreateTriggerInput!) { createTrigger(agentId: $agentId, input: $input) { id } }`;
const UPDATE_TRIGGER = `mutation UpdateTrigger($id: ID!, $input: UpdateTriggerInput!) { updateTrigger(id: $id, input: $input) { id status } }`;
const RUN_TRIGGER = `mutation RunTrigger($id: ID!) { runTrigger(id: $id) { rawId } }`;
const DELETE_TRIGGER = `mutation DeleteTrigger($id: ID!) { deleteTrigger(id: $id) }`;

/** While the panel is open it reads the triggers again this often: runs start and end on their own. */
const REFRESH_MS = 2_000;

interface Run {
  rawId: string;
  status: string;
  scheduledFor: string | null;
  startedAt: string;
  error: string | null;
  session: { rawId: string } | null;
}
interface Trigger {
  id: string;
  rawId: string;
  name: string;
  prompt: string;
  status: string;
  nextScheduledRun: string | null;
  lastRunTime: string | null;
  errorCount: number;
  lastError: string | null;
  schedule: Record<'second' | 'minute' | 'hour' | 'dayOfMonth' | 'month' | 'dayOfWeek' | 'timezone', string> | null;
  runs: { edges: { node: Run }[] };
}

const FIELDS = [
  ['second', 'Second'],
  ['minute', 'Minute'],
  ['hour', 'Hour'],
  ['dayOfMonth', 'Day of month'],
  ['month', 'Month'],
  ['dayOfWeek', 'Day of week'],
] as const;

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');
const cron = (s: NonNullable<Trigger['schedule']>) => `${FIELDS.map(([f]) => s[f]).join(' ')} (${s.timezone})`;

function NewTrigger({
  apiKey,
  agentId,
  onMade,
  onProblem,
}: {
  apiKey: string;
  agentId: string;
  onMade: () => void;
  onProblem: (p: Problem) => void;
}) {
  const [name, setName] = useState('');
  const [prompt, setPrompt] = useState('');
  const [byHand, setByHand] = useState(false);
  const [fields, setFields] = useState<Record<string, string>>({
    second: '0',
    minute: '0',
    hour: '9',
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  });
  return (
    <form
      class="new-trigger"
      onSubmit={async (e) => {
        e.preventDefault();
        const schedule = byHand ? null : Object.fromEntries(Object.entries(fields).filter(([, v]) => v.trim() !== ''));
        try {
          await request(apiKey, CREATE_TRIGGER, { agentId, input: { name: name || undefined, prompt, schedule } });
          setName('');
          setPrompt('');
          onMade();
        } catch (err) {
          onProblem(problemOf(err));
        }
      }}
    >
      <h3>New trigger</h3>
      <input name="trigger-name" placeholder="Name (Untitled Task)" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <textarea
        name="trigger-prompt"
        rows={2}
        required
        placeholder="What the agent is asked each time"
        value={prompt}
        onInput={(e) => setPrompt(e.currentTarget.value)}
      />
      <label>
        <input name="trigger-by-hand" type="checkbox" checked={byHand} onChange={(e) => setByHand(e.currentTarget.checked)} /> Run by hand
        only
      </label>
      {!byHand && (
        <fieldset class="schedule">
          {[...FIELDS, ['timezone', 'Time zone'] as const].map(([field, label]) => (
            <label key={field}>
              {label}{' '}
              <input
                name={`schedule-${field}`}
                placeholder="*"
                value={fields[field] ?? ''}
                onInput={(e) => setFields((f) => ({ ...f, [field]: e.currentTarget.value }))}
              />
            </label>
          ))}
        </fieldset>
      )}
      <button type="submit" disabled={!prompt.trim()}>
        Create trigger
      </button>
    </form>
  );
}

function TriggerCard({
  apiKey,
  trigger,
  onChanged,
  onProblem,
}: {
  apiKey: string;
  trigger: Trigger;
  onChanged: () => void;
  onProblem: (p: Problem) => void;
}) {
  const act = (query: string, variables: Record<string, unknown>) => async () => {
    try {
      await request(apiKey, query, variables);
      onChanged();
    } catch (err) {
      onProblem(problemOf(err));
    }
  };
  const paused = trigger.status === 'PAUSED';
  return (
    <li class="trigger" data-trigger={trigger.name} data-status={trigger.status}>
      <h4>
        {trigger.name} <span class="muted status">{trigger.status.toLowerCase()}</span>
      </h4>
      <p class="muted">{trigger.schedule ? cron(trigger.schedule) : 'by hand only'}</p>
      <p>
        Next run: <span class="next-run">{when(trigger.nextScheduledRun)}</span> · last run: {when(trigger.lastRunTime)}
      </p>
      {trigger.lastError && (
        <p class="problem problem-other">
          {trigger.errorCount} failed in a row: {trigger.lastError}
        </p>
      )}
      <div class="actions">
        <button type="button" name="run-now" onClick={act(RUN_TRIGGER, { id: trigger.id })}>
          Run now
        </button>
        <button
          type="button"
          name={paused ? 'resume' : 'pause'}
          onClick={act(UPDATE_TRIGGER, { id: trigger.id, input: { status: paused ? 'ACTIVE' : 'PAUSED' } })}
        >
          {paused ? 'Resume' : 'Pause'}
        </button>
        <button type="button" name="delete" class="link" onClick={act(DELETE_TRIGGER, { id: trigger.id })}>
          delete
        </button>
      </div>
      <ol class="runs">
        {trigger.runs.edges.map(({ node: run }) => (
          <li key={run.rawId} class="run" data-run-status={run.status}>
            {when(run.startedAt)} · {run.status.toLowerCase()}
            {run.scheduledFor ? '' : ' (by hand)'}
            {run.error && <span class="muted"> — {run.error}</span>}{' '}
            {run.session && <a href={`#/session/${encodeURIComponent(run.session.rawId)}`}>session</a>}
          </li>
        ))}
      </ol>
    </li>
  );
}

type Page = { name: string; triggers: { pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: Trigger }[] } | null };

/** An agent's triggers: make one with a schedule, see its next run and runs, pause, resume, run it now. */
export function TriggersPanel({ apiKey, agentId, onProblem }: { apiKey: string; agentId: string; onProblem: (p: Problem) => void }) {
  const [agent, setAgent] = useState<{ name: string; triggers: Trigger[]; more: boolean } | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  // How many pages the person has opened: each read reads them all again, so runs stay current.
  const [pages, setPages] = useState(1);
  const load = useCallback(async () => {
    try {
      let after: string | null = null;
      let name = '';
      const triggers: Trigger[] = [];
      let more = false;
      for (let page = 0; page < pages; page++) {
        const data: { agent: Page } = await request<{ agent: Page }>(apiKey, AGENT_TRIGGERS, { id: agentId, after });
        name = data.agent.name;
        triggers.push(...(data.agent.triggers?.edges.map((e) => e.node) ?? []));
        more = data.agent.triggers?.pageInfo.hasNextPage ?? false;
        after = data.agent.triggers?.pageInfo.endCursor ?? null;
        if (!more) break;
      }
      setFailed(null);
      setAgent({ name, triggers, more });
    } catch (err) {
      const problem = problemOf(err);
      setFailed(problem.message);
      onProblem(problem);
    }
  }, [apiKey, agentId, pages]);
  useEffect(() => {
    void load();
    const timer = setInterval(load, REFRESH_MS);
    return () => clearInterval(timer);
  }, [load]);
  if (!agent)
    return failed ? (
      <p class="problem problem-other triggers-failed">The triggers could not be read: {failed}</p>
    ) : (
      <p class="hint">Loading triggers…</p>
    );
  return (
    <div class="triggers" data-agent-id={agentId}>
      <h2>Triggers of {agent.name}</h2>
      {agent.triggers.length === 0 && (
        <p class="hint">None yet: a trigger sends the agent a prompt on a schedule, in a new session each time.</p>
      )}
      <ul class="trigger-list">
        {agent.triggers.map((t) => (
          <TriggerCard key={t.id} apiKey={apiKey} trigger={t} onChanged={load} onProblem={onProblem} />
        ))}
      </ul>
      {agent.more && (
        <button type="button" name="more-triggers" class="link" onClick={() => setPages((n) => n + 1)}>
          more triggers
        </button>
      )}
      <NewTrigger apiKey={apiKey} agentId={agentId} onMade={load} onProblem={onProblem} />
    </div>
  );
}
