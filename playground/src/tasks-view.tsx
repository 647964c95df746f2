import type { Client } from 'graphql-ws';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

/** The GraphQL this view sends; every field it shows comes from here. */
const TOOLS = `query TaskTools { tools { key name description parameters } }`;
const TASK = `id rawId toolKey status progress cost error result args createdAt outputs { id name url thumbnail mediaAttributes }`;
const MY_TASKS = `query MyTasks { me { balance } tasks(first: 20) { edges { node { ${TASK} } } } }`;
const BALANCE = `query TaskBalance { me { balance } }`;
const ESTIMATE = `query EstimateTaskCost($tool: String!, $args: JSON) { estimateTaskCost(tool: $tool, args: $args) }`;
const CREATE = `mutation CreateTask($tool: String!, $args: JSON) { createTask(tool: $tool, args: $args) { ${TASK} } }`;
const CANCEL = `mutation CancelTask($taskId: ID!) { cancelTask(taskId: $taskId) { ${TASK} } }`;
const UPDATES = `subscription TaskUpdates($after: Seq) { taskUpdates(after: $after) {
  __typename seq
  ... on TaskCreated { taskId task { ${TASK} } }
  ... on TaskStarted { taskId }
  ... on TaskProgressed { taskId progress message }
  ... on TaskCompleted { taskId cost result task { ${TASK} } }
  ... on TaskFailed { taskId error }
  ... on TaskCancelled { taskId }
} }`;

interface Parameter {
  name: string;
  type: string;
  label?: string;
  description: string;
  required: boolean;
  default?: unknown;
  min?: number;
  max?: number;
  step?: number;
  choices?: (string | number)[];
}
interface Tool {
  key: string;
  name: string;
  description: string;
  parameters: Parameter[];
}
interface Task {
  id: string;
  rawId: string;
  toolKey: string;
  status: 'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  progress: number;
  cost: number | null;
  error: string | null;
  result: unknown;
  args: unknown;
  createdAt: string;
  /** The creations it made (pictures, sounds, films), once completed. */
  outputs?: Output[];
  /** What the tool last said it was doing (TaskProgressed), shown while it runs. */
  message?: string | null;
}
interface Output {
  id: string;
  name: string;
  url: string;
  thumbnail: string | null;
  mediaAttributes: { mimeType?: string };
}
type TaskEvent = { __typename: string; seq: number; taskId: string } & Partial<{
  task: Task;
  progress: number;
  message: string | null;
  cost: number;
  result: unknown;
  error: string;
}>;

/** Statuses only move forward: whatever order a list and the events arrive in, the furthest one wins. */
const RANK: Record<Task['status'], number> = { PENDING: 0, RUNNING: 1, COMPLETED: 2, FAILED: 2, CANCELLED: 2 };
const ended = (task: Task) => RANK[task.status] === 2;

function merge(old: Task | undefined, next: Partial<Task> & { id: string }): Task {
  if (!old) return next as Task;
  if (ended(old) && next.status && !ended(next as Task)) return old;
  const status = next.status && RANK[next.status] >= RANK[old.status] ? next.status : old.status;
  return { ...old, ...next, status, progress: Math.max(old.progress, next.progress ?? 0) };
}

/** The arguments as the form holds them (text), turned into what the tool takes; empty fields are left to their defaults. */
function argsOf(tool: Tool, values: Record<string, string>): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const p of tool.parameters) {
    const raw = values[p.name]?.trim() ?? '';
    if (raw === '') continue;
    if (p.type === 'integer' || p.type === 'float') args[p.name] = Number(raw);
    else if (p.type === 'boolean') args[p.name] = raw === 'true';
    else if (p.type === 'array') {
      try {
        args[p.name] = JSON.parse(raw);
      } catch {
        args[p.name] = raw;
      }
    } else args[p.name] = raw;
  }
  return args;
}

function ParameterField({ p, value, onChange }: { p: Parameter; value: string; onChange: (v: string) => void }) {
  const label = `${p.label ?? p.name}${p.required ? ' *' : ''}`;
  const name = `arg-${p.name}`;
  const placeholder = p.default === undefined ? '' : String(p.default);
  const unset = <option value="">{placeholder ? `default (${placeholder})` : '—'}</option>;
  return (
    <label title={p.description} for={name}>
      {label}{' '}
      {p.choices ? (
        <select id={name} name={name} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
          {unset}
          {p.choices.map((c) => (
            <option key={c} value={String(c)}>
              {c}
            </option>
          ))}
        </select>
      ) : p.type === 'boolean' ? (
        <select id={name} name={name} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
          {unset}
          <option value="true">yes</option>
          <option value="false">no</option>
        </select>
      ) : p.type === 'integer' || p.type === 'float' ? (
        <input
          id={name}
          name={name}
          type="number"
          min={p.min}
          max={p.max}
          step={p.step ?? (p.type === 'integer' ? 1 : 'any')}
          placeholder={placeholder}
          value={value}
          onInput={(e) => onChange(e.currentTarget.value)}
        />
      ) : (
        <input
          id={name}
          name={name}
          placeholder={p.type === 'array' ? 'JSON, e.g. ["…"]' : placeholder || p.type}
          value={value}
          onInput={(e) => onChange(e.currentTarget.value)}
        />
      )}
    </label>
  );
}

function NewTask({
  apiKey,
  tools,
  onCreated,
  onProblem,
}: {
  apiKey: string;
  tools: Tool[];
  onCreated: (task: Task) => void;
  onProblem: (p: Problem) => void;
}) {
  const [toolKey, setToolKey] = useState('');
  const [values, setValues] = useState<Record<string, string>>({});
  const [estimate, setEstimate] = useState<{ cost: number } | { error: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const tool = tools.find((x) => x.key === toolKey) ?? tools[0];
  const args = tool ? argsOf(tool, values) : {};
  const argsKey = JSON.stringify(args);

  // The cost before creating: asked again a moment after the tool or an argument changes.
  useEffect(() => {
    if (!tool) return;
    let live = true;
    setEstimate(null);
    const timer = setTimeout(() => {
      request<{ estimateTaskCost: number }>(apiKey, ESTIMATE, { tool: tool.key, args })
        .then((data) => live && setEstimate({ cost: data.estimateTaskCost }))
        .catch((e) => live && setEstimate({ error: problemOf(e).message }));
    }, 250);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [apiKey, tool?.key, argsKey]);

  if (!tool) return <p class="hint">Loading tools…</p>;
  return (
    <form
      class="new-task"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        try {
          const { createTask } = await request<{ createTask: Task }>(apiKey, CREATE, { tool: tool.key, args });
          onCreated(createTask);
        } catch (err) {
          onProblem(problemOf(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <h3>New task</h3>
      <label>
        Tool{' '}
        <select
          name="tool"
          value={tool.key}
          onChange={(e) => {
            setToolKey(e.currentTarget.value);
            setValues({});
          }}
        >
          {tools.map((x) => (
            <option key={x.key} value={x.key}>
              {x.name}
            </option>
          ))}
        </select>
      </label>
      <p class="muted">{tool.description}</p>
      <fieldset class="task-args">
        {tool.parameters.map((p) => (
          <ParameterField
            key={`${tool.key}-${p.name}`}
            p={p}
            value={values[p.name] ?? ''}
            onChange={(v) => setValues((s) => ({ ...s, [p.name]: v }))}
          />
        ))}
      </fieldset>
      <p class="estimate" data-estimate={estimate && 'cost' in estimate ? estimate.cost : ''}>
        {estimate === null ? 'Cost: …' : 'cost' in estimate ? `Cost: ${estimate.cost} manna` : <span class="muted">{estimate.error}</span>}
      </p>
      <button type="submit" disabled={busy || !estimate || !('cost' in estimate)}>
        Create task
      </button>
    </form>
  );
}

const money = (task: Task) =>
  task.cost == null
    ? ''
    : task.status === 'COMPLETED'
      ? `charged ${task.cost} manna`
      : ended(task)
        ? `${task.cost} manna returned`
        : `${task.cost} manna held`;

/** Pictures a task made, each a thumbnail linking to the picture at full size. */
function Pictures({ outputs }: { outputs: Output[] }) {
  return (
    <ul class="pictures">
      {outputs.map((o) => (
        <li key={o.id}>
          <a href={o.url} target="_blank" rel="noopener" title={o.name}>
            <img src={o.thumbnail ?? o.url} alt={o.name} loading="lazy" />
          </a>
        </li>
      ))}
    </ul>
  );
}

const isPicture = (o: Output) => o.mediaAttributes?.mimeType?.startsWith('image/') ?? false;

function TaskCard({ task, onCancel }: { task: Task; onCancel: () => void }) {
  const pictures = (task.outputs ?? []).filter(isPicture);
  return (
    <li class="task" data-task-id={task.rawId} data-tool={task.toolKey} data-status={task.status} data-progress={task.progress}>
      <h4>
        {task.toolKey} <span class="muted status">{task.status.toLowerCase()}</span>{' '}
        <span class="muted cost" data-cost={task.cost ?? ''}>
          {money(task)}
        </span>
      </h4>
      <p class="muted">
        {new Date(task.createdAt).toLocaleString()} · <code>{JSON.stringify(task.args)}</code>
      </p>
      {!ended(task) && (
        <div class="actions">
          <progress max={1} value={task.progress} /> <span class="progress">{Math.round(task.progress * 100)}%</span>
          {task.message && <span class="muted"> {task.message}</span>}
          <button type="button" name="cancel-task" onClick={onCancel}>
            Cancel
          </button>
        </div>
      )}
      {task.status === 'COMPLETED' && pictures.length > 0 && <Pictures outputs={pictures} />}
      {task.status === 'COMPLETED' &&
        (pictures.length > 0 ? (
          <details class="raw-result">
            <summary>what the tool answered</summary>
            <pre class="result">{JSON.stringify(task.result, null, 2)}</pre>
          </details>
        ) : (
          <pre class="result">{JSON.stringify(task.result, null, 2)}</pre>
        ))}
      {task.error && <p class="error task-error">{task.error}</p>}
    </li>
  );
}

/** Run a tool as a task: its cost before, its progress live, its result or error, and cancel while it runs. */
export function TasksView({
  apiKey,
  client,
  onProblem,
  onBalance,
}: {
  apiKey: string;
  client: Client;
  onProblem: (p: Problem) => void;
  /** The balance as this view last read it: the page's header shows the same. */
  onBalance: (balance: number) => void;
}) {
  const [tools, setTools] = useState<Tool[]>([]);
  const [tasks, setTasks] = useState<Record<string, Task>>({});
  const [order, setOrder] = useState<string[]>([]);
  const [balance, setShownBalance] = useState<number | null>(null);
  const setBalance = (n: number) => {
    setShownBalance(n);
    onBalance(n);
  };
  /** The tasks the page has whole (from the list, a mutation or TaskCreated), not only an event's change. */
  const whole = useRef(new Set<string>());

  const show = useCallback((task: Partial<Task> & { id: string }) => {
    if ('toolKey' in task) whole.current.add(task.id);
    setTasks((all) => ({ ...all, [task.id]: merge(all[task.id], task) }));
    setOrder((ids) => (ids.includes(task.id) ? ids : [task.id, ...ids]));
  }, []);
  const loadBalance = useCallback(async () => {
    try {
      setBalance((await request<{ me: { balance: number | null } }>(apiKey, BALANCE)).me.balance ?? 0);
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  const load = useCallback(async () => {
    try {
      const data = await request<{ me: { balance: number | null }; tasks: { edges: { node: Task }[] } }>(apiKey, MY_TASKS);
      setBalance(data.me.balance ?? 0);
      const listed = data.tasks.edges.map((e) => e.node);
      for (const task of listed) whole.current.add(task.id);
      setTasks((all) => {
        const next = { ...all };
        for (const task of listed) next[task.id] = merge(all[task.id], task);
        return next;
      });
      // The list's order (newest first), with any task only the live feed has named yet in front.
      setOrder((ids) => [...ids.filter((id) => !listed.some((x) => x.id === id)), ...listed.map((x) => x.id)]);
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);

  useEffect(() => {
    request<{ tools: Tool[] }>(apiKey, TOOLS)
      .then((data) => setTools(data.tools))
      .catch((e) => onProblem(problemOf(e)));
  }, [apiKey]);

  // Live first, then the list: whichever arrives first, merge keeps the furthest state of each task.
  useEffect(() => {
    // graphql-ws sends these variables again on every reconnection: keeping `after` at the last seq resumes the feed there.
    const variables: { after?: number } = {};
    const unsubscribe = client.subscribe<{ taskUpdates: TaskEvent }>(
      { query: UPDATES, variables },
      {
        next: ({ data, errors }) => {
          if (errors?.length) return onProblem({ kind: 'other', message: errors[0]!.message });
          const event = data?.taskUpdates;
          if (!event) return;
          variables.after = event.seq;
          const id = event.taskId;
          switch (event.__typename) {
            case 'TaskCreated':
            case 'TaskCompleted':
              show({ ...event.task!, ...(event.__typename === 'TaskCompleted' ? { result: event.result, cost: event.cost! } : {}) });
              break;
            case 'TaskStarted':
              show({ id, status: 'RUNNING' });
              break;
            case 'TaskProgressed':
              show({ id, status: 'RUNNING', progress: event.progress!, message: event.message ?? null });
              break;
            case 'TaskFailed':
              show({ id, status: 'FAILED', error: event.error! });
              break;
            case 'TaskCancelled':
              show({ id, status: 'CANCELLED' });
              break;
          }
          // A change of a task the page has not read yet (made in another tab before this one listened): read the list again.
          if (!whole.current.has(id)) void load();
          // The balance moves when a task is created (the hold) and when it ends (charged or returned).
          if (event.__typename !== 'TaskStarted' && event.__typename !== 'TaskProgressed') void loadBalance();
        },
        error: (e) => onProblem(problemOf(e)),
        complete: () => {},
      },
    );
    void load();
    return () => unsubscribe();
  }, [client, load]);

  const cancel = (task: Task) => async () => {
    try {
      show((await request<{ cancelTask: Task }>(apiKey, CANCEL, { taskId: task.id })).cancelTask);
      void loadBalance();
    } catch (err) {
      onProblem(problemOf(err));
    }
  };

  return (
    <div class="tasks-view">
      <h2>Tasks</h2>
      <p>
        Your balance:{' '}
        <span class="task-balance" data-balance={balance ?? ''}>
          {balance ?? '…'}
        </span>{' '}
        manna
      </p>
      <NewTask
        apiKey={apiKey}
        tools={tools}
        onCreated={(task) => {
          show(task);
          void loadBalance();
        }}
        onProblem={onProblem}
      />
      <h3>Your tasks</h3>
      {order.length === 0 && <p class="hint">None yet: a task runs one tool once, and its cost is held until it ends.</p>}
      <ul class="task-list">
        {order.map((id) => whole.current.has(id) && tasks[id] && <TaskCard key={id} task={tasks[id]!} onCancel={cancel(tasks[id]!)} />)}
      </ul>
    </div>
  );
}
