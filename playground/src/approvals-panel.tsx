import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

const APPROVAL = 'toolApproval { rules { tool always aboveManna } timeoutSeconds }';
const AGENT_APPROVALS = `query AgentApprovals($id: ID!) {
  agent(id: $id) { id name tools mcpTools { functionName tool server { name } } ${APPROVAL} }
  tools { key name }
}`;
const SET_APPROVALS = `mutation SetApprovals($id: ID!, $input: UpdateAgentInput!) { updateAgent(id: $id, input: $input) { id ${APPROVAL} } }`;

interface Rule {
  tool: string;
  always: boolean;
  aboveManna: number | null;
}
interface Setting {
  rules: Rule[];
  timeoutSeconds: number;
}
interface Loaded {
  name: string;
  /** The agent's enabled tools, its MCP servers' too (keyed as the model calls them), with the names the person knows them by. */
  tools: { key: string; name: string }[];
  setting: Setting;
}

type Mode = 'never' | 'always' | 'above';
interface Choice {
  mode: Mode;
  above: string;
}
type Unit = 'seconds' | 'minutes';

const choiceOf = (rule: Rule | undefined): Choice =>
  !rule ? { mode: 'never', above: '' } : rule.always ? { mode: 'always', above: '' } : { mode: 'above', above: String(rule.aboveManna) };

/** A wait in whole minutes shows in minutes, as the person most likely typed it; any other in seconds. */
const waitOf = (seconds: number): { value: string; unit: Unit } =>
  seconds % 60 === 0 ? { value: String(seconds / 60), unit: 'minutes' } : { value: String(seconds), unit: 'seconds' };

/**
 * What the service would refuse, said in the panel's words: its own refusal names a field
 * (`toolApproval.tools.<key>.above`) that the person never saw. Anything else it refuses is shown as it says it.
 */
function refusalOf(tools: Loaded['tools'], choices: Record<string, Choice>, wait: string, timeoutSeconds: number): string | null {
  for (const { key, name } of tools) {
    const c = choices[key];
    if (c?.mode !== 'above') continue;
    if (c.above.trim() === '' || !Number.isFinite(Number(c.above))) return `Say above how many manna a call of ${name} asks.`;
    if (Number(c.above) < 0) return `${name} cannot ask above ${c.above} manna: the amount must be at least 0.`;
  }
  if (wait.trim() === '' || !Number.isInteger(timeoutSeconds) || timeoutSeconds < 5 || timeoutSeconds > 7 * 24 * 3600)
    return 'The wait for an answer must be a whole number of seconds from 5 seconds to a week.';
  return null;
}

/**
 * Which of an agent's tools wait for its owner's approval before they run, and how long a call
 * waits before it counts as denied (`updateAgent` with `toolApproval`). Rules for tools the agent
 * no longer has enabled are sent back as they were, since the rules are replaced as a whole.
 */
export function ApprovalsPanel({
  apiKey,
  agentId,
  onProblem,
}: {
  apiKey: string;
  agentId: string;
  onProblem: (p: Problem | null) => void;
}) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const [choices, setChoices] = useState<Record<string, Choice>>({});
  const [wait, setWait] = useState<{ value: string; unit: Unit }>({ value: '10', unit: 'minutes' });
  const [saved, setSaved] = useState(false);

  const show = (name: string, tools: Loaded['tools'], setting: Setting) => {
    setLoaded({ name, tools, setting });
    setChoices(Object.fromEntries(tools.map((t) => [t.key, choiceOf(setting.rules.find((r) => r.tool === t.key))])));
    setWait(waitOf(setting.timeoutSeconds));
  };
  const load = useCallback(async () => {
    try {
      const data = await request<{
        agent: {
          name: string;
          tools: Record<string, unknown>;
          mcpTools: { functionName: string; tool: string; server: { name: string } }[] | null;
          toolApproval: Setting;
        };
        tools: { key: string; name: string }[];
      }>(apiKey, AGENT_APPROVALS, { id: agentId });
      const enabled = [
        ...Object.entries(data.agent.tools ?? {})
          .filter(([, on]) => on === true)
          .map(([key]) => ({ key, name: data.tools.find((t) => t.key === key)?.name ?? key })),
        ...(data.agent.mcpTools ?? []).map((t) => ({ key: t.functionName, name: `${t.tool} (MCP server ${t.server.name})` })),
      ];
      setFailed(null);
      show(data.agent.name, enabled, data.agent.toolApproval);
    } catch (err) {
      const problem = problemOf(err);
      setFailed(problem.message);
      onProblem(problem);
    }
  }, [apiKey, agentId]);
  useEffect(() => {
    void load();
  }, [load]);

  if (!loaded)
    return failed ? (
      <p class="problem problem-other approvals-failed">The approval settings could not be read: {failed}</p>
    ) : (
      <p class="hint">Loading approval settings…</p>
    );

  const shown = new Set(loaded.tools.map((t) => t.key));
  const save = async () => {
    const rules = [
      ...loaded.setting.rules.filter((r) => !shown.has(r.tool)).map((r) => ({ tool: r.tool, aboveManna: r.aboveManna })),
      ...loaded.tools.flatMap(({ key }) => {
        const c = choices[key];
        if (!c || c.mode === 'never') return [];
        return [{ tool: key, aboveManna: c.mode === 'above' ? Number(c.above) : null }];
      }),
    ];
    const timeoutSeconds = Number(wait.value) * (wait.unit === 'minutes' ? 60 : 1);
    const refusal = refusalOf(loaded.tools, choices, wait.value, timeoutSeconds);
    if (refusal) {
      setSaved(false);
      return onProblem({ kind: 'other', message: refusal });
    }
    try {
      const { updateAgent } = await request<{ updateAgent: { toolApproval: Setting } }>(apiKey, SET_APPROVALS, {
        id: agentId,
        input: { toolApproval: { rules, timeoutSeconds } },
      });
      onProblem(null);
      show(loaded.name, loaded.tools, updateAgent.toolApproval);
      setSaved(true);
    } catch (err) {
      setSaved(false);
      onProblem(problemOf(err));
    }
  };

  return (
    <form
      class="approvals"
      data-agent-id={agentId}
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
      onInput={() => setSaved(false)}
    >
      <h2>Approvals of {loaded.name}</h2>
      <p class="hint">
        A call that asks waits for the answer of whoever pays for it, in the session, before it runs or is charged (
        <code>docs/sessions.md</code>).
      </p>
      {loaded.tools.length === 0 ? (
        <p class="hint">This agent has no tools enabled: nothing to approve.</p>
      ) : (
        <ul class="approval-rules">
          {loaded.tools.map(({ key, name }) => {
            const c = choices[key] ?? { mode: 'never', above: '' };
            const set = (next: Partial<Choice>) => setChoices((all) => ({ ...all, [key]: { ...c, ...next } }));
            return (
              <li key={key} class="approval-rule" data-tool={key} data-mode={c.mode}>
                <strong>{name}</strong> <span class="muted">{key}</span>
                <select name={`mode-${key}`} value={c.mode} onChange={(e) => set({ mode: e.currentTarget.value as Mode })}>
                  <option value="never">runs at once</option>
                  <option value="always">always asks</option>
                  <option value="above">asks above…</option>
                </select>
                {c.mode === 'above' && (
                  <label>
                    <input
                      name={`above-${key}`}
                      type="number"
                      step="any"
                      value={c.above}
                      onInput={(e) => set({ above: e.currentTarget.value })}
                    />{' '}
                    manna
                  </label>
                )}
              </li>
            );
          })}
        </ul>
      )}
      <label class="approval-wait">
        Unanswered after{' '}
        <input
          name="wait"
          type="number"
          step="any"
          value={wait.value}
          onInput={(e) => setWait((w) => ({ ...w, value: e.currentTarget.value }))}
        />{' '}
        <select name="wait-unit" value={wait.unit} onChange={(e) => setWait((w) => ({ ...w, unit: e.currentTarget.value as Unit }))}>
          <option value="seconds">seconds</option>
          <option value="minutes">minutes</option>
        </select>
        , a call counts as denied (5 seconds to a week).
      </label>
      <div class="actions">
        <button type="submit" name="save">
          Save
        </button>
        {saved && <span class="muted saved">Saved.</span>}
      </div>
    </form>
  );
}
