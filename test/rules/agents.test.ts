import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { AGENT_KEY_TAKEN, AGENT_NOT_FOUND, agentService, visiblePersona } from '../../src/domain/agents/service.ts';
import { agentToolApproval } from '../../src/domain/agents/fields.ts';
import { mannaOf } from '../../src/domain/core/manna.ts';
import { needsApproval } from '../../src/domain/tools/approval.ts';
import { checkArguments } from '../../src/domain/tools/arguments.ts';
import { costOf } from '../../src/domain/tools/cost-of.ts';
import { loadToolRegistry, type ToolRegistry } from '../../src/domain/tools/registry.ts';
import { Catalog, memoryAgentStore } from './support/catalog.ts';

/**
 * The agents' rules over a store in memory: what input is refused and where, who may read,
 * change and delete an agent (a stranger never learns a private one exists), the owner's cap,
 * and a key that is unique among agents and users.
 */
let tools: ToolRegistry;
beforeAll(async () => {
  tools = await loadToolRegistry(fileURLToPath(new URL('../../tools', import.meta.url)));
});

function world(maxAgentsPerUser = 3) {
  const c = new Catalog();
  const agents = agentService(memoryAgentStore(c), tools, { maxAgentsPerUser });
  return { c, agents, owner: c.user('owner'), stranger: c.user('stranger') };
}

const refusal = (code: string, message: string | RegExp, fieldPath?: (string | number)[]) =>
  expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message), fieldPath });

describe('creating an agent', () => {
  it('saves it with its key and the owner as given', async () => {
    const { agents, owner } = world();
    const made = await agents.create(owner, { name: 'Ada', key: 'ada-bot', public: true });
    expect(made).toMatchObject({ name: 'Ada', ownerId: owner.id, public: true, user: { username: 'ada-bot' } });
    expect(await agents.get(owner, made.id)).toMatchObject({ id: made.id });
  });

  it('names the field at fault and writes nothing', async () => {
    const { c, agents, owner } = world();
    await expect(agents.create(owner, { name: 'Ada' })).rejects.toEqual(refusal('BAD_USER_INPUT', /./, ['key']));
    await expect(agents.create(owner, { name: 'Ada', key: '-dash' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', /must be 2 to 39 letters/, ['key']),
    );
    await expect(agents.create(owner, { name: 'Ada', key: 'ada', tools: { no_such_tool: true } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'unknown tool "no_such_tool" (see the tools list)', ['tools', 'no_such_tool']),
    );
    await expect(agents.create(owner, { name: '  ', key: 'ada' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must not be empty', ['name']),
    );
    expect(c.writes).toEqual([]);
  });

  it('takes only models that exist and the owner may use', async () => {
    const { c, agents, owner, stranger } = world();
    const mine = c.model(owner);
    const theirs = c.model(stranger);
    const shared = c.model(stranger, { public: true });
    await expect(agents.create(owner, { name: 'Ada', key: 'ada', models: [{ lora: mine.id }, { lora: theirs.id }] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'model not found or not usable by you', ['models', 1, 'lora']),
    );
    await expect(agents.create(owner, { name: 'Ada', key: 'ada', models: [{ lora: 'no-such-model' }] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'model not found or not usable by you', ['models', 0, 'lora']),
    );
    expect(c.writes).toEqual([]);
    const made = await agents.create(owner, { name: 'Ada', key: 'ada', models: [{ lora: mine.id }, { lora: shared.id }] });
    expect(made.models).toEqual([
      { lora: mine.id, useWhen: '' },
      { lora: shared.id, useWhen: '' },
    ]);
  });

  it('refuses more than ten models as over a limit (422), not as malformed', async () => {
    const { c, agents, owner } = world();
    const models = Array.from({ length: 11 }, () => ({ lora: c.model(owner).id }));
    await expect(agents.create(owner, { name: 'Ada', key: 'ada', models })).rejects.toEqual(
      refusal('UNPROCESSABLE', 'must have at most 10 models', ['models']),
    );
  });

  it('stops at the owner’s cap, counting only their own agents', async () => {
    const { c, agents, owner, stranger } = world(2);
    await agents.create(stranger, { name: 'S', key: 's-bot' });
    await agents.create(owner, { name: 'A', key: 'a-bot' });
    await agents.create(owner, { name: 'B', key: 'b-bot' });
    const before = c.writes.length;
    await expect(agents.create(owner, { name: 'C', key: 'c-bot' })).rejects.toEqual(
      refusal('UNPROCESSABLE', 'Agent limit reached: a user may own at most 2 agents'),
    );
    expect(c.writes).toHaveLength(before);
  });

  it('refuses a key an agent or a user already has, whatever its case', async () => {
    const { agents, owner, stranger } = world();
    await agents.create(stranger, { name: 'S', key: 'Shared-Key' });
    await expect(agents.create(owner, { name: 'A', key: 'shared-key' })).rejects.toEqual(refusal('CONFLICT', AGENT_KEY_TAKEN));
    await expect(agents.create(owner, { name: 'A', key: 'stranger' })).rejects.toEqual(refusal('CONFLICT', AGENT_KEY_TAKEN));
  });
});

describe('who may see, change and delete an agent', () => {
  async function agentsOf() {
    const w = world();
    const hidden = await w.agents.create(w.owner, { name: 'Hidden', key: 'hidden', persona: 'secret', isPersonaPublic: false });
    const shown = await w.agents.create(w.owner, { name: 'Shown', key: 'shown', public: true });
    return { ...w, hidden, shown };
  }

  it('shows a public agent to anyone and a private one to its owner only', async () => {
    const { agents, owner, stranger, hidden, shown } = await agentsOf();
    expect(await agents.get(stranger, shown.id)).toMatchObject({ id: shown.id });
    expect(await agents.get(owner, hidden.id)).toMatchObject({ id: hidden.id });
    await expect(agents.get(stranger, hidden.id)).rejects.toEqual(refusal('FORBIDDEN', 'You do not have access to this agent'));
    await expect(agents.get(owner, 'no-such-agent')).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
    await expect(agents.get(owner, 'nul\u0000id')).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
  });

  it('shows a private persona to the owner only, and a public persona to anyone', async () => {
    const { agents, owner, stranger } = world();
    const secret = await agents.create(owner, { name: 'Pirate', key: 'pirate', public: true, persona: 'Secretly a pirate' });
    const open = await agents.create(owner, { name: 'Open', key: 'open', public: true, persona: 'Openly a pirate', isPersonaPublic: true });
    expect(visiblePersona(stranger, await agents.get(stranger, secret.id))).toBeNull();
    expect(visiblePersona(null, secret)).toBeNull();
    expect(visiblePersona(owner, await agents.get(owner, secret.id))).toBe('Secretly a pirate');
    expect(visiblePersona(stranger, await agents.get(stranger, open.id))).toBe('Openly a pirate');
  });

  it('lets only the owner delete: a stranger is told a private agent is not there, a public one is not theirs', async () => {
    const { c, agents, owner, stranger, hidden, shown } = await agentsOf();
    await expect(agents.delete(stranger, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
    await expect(agents.delete(stranger, shown.id)).rejects.toEqual(refusal('FORBIDDEN', 'Only the owner of this agent can delete it'));
    expect(c.agents.size).toBe(2);
    await agents.delete(owner, hidden.id);
    await expect(agents.get(owner, hidden.id)).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
  });

  it('lets only the owner change it, and only with something to change', async () => {
    const { c, agents, owner, stranger, shown } = await agentsOf();
    const before = c.writes.length;
    await expect(agents.update(stranger, shown.id, { name: 'Mine now' })).rejects.toEqual(
      refusal('FORBIDDEN', 'Only the owner of this agent can update it'),
    );
    await expect(agents.update(owner, 'no-such-agent', { name: 'x' })).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
    await expect(agents.update(owner, shown.id, {})).rejects.toEqual(refusal('BAD_USER_INPUT', 'No agent fields to update in the request'));
    await expect(agents.update(owner, shown.id, { tools: { nope: true } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'unknown tool "nope" (see the tools list)', ['tools', 'nope']),
    );
    expect(c.writes).toHaveLength(before);
    expect(c.agents.get(shown.id)?.name).toBe('Shown');
  });

  it('changes only the fields given, merging the model settings field by field', async () => {
    const { agents, owner, shown } = await agentsOf();
    await agents.update(owner, shown.id, { llmSettings: { modelProfile: 'high', thinkingPolicy: 'off' } });
    const changed = await agents.update(owner, shown.id, { llmSettings: { thinkingPolicy: 'always' }, description: 'new' });
    expect(changed).toMatchObject({ name: 'Shown', public: true, llmSettings: { modelProfile: 'high', thinkingPolicy: 'always' } });
  });
});

describe('the list of agents a viewer may read', () => {
  /** The agents service over the memory store, with the filters its list asked the store for. */
  function listing() {
    const c = new Catalog();
    const store = memoryAgentStore(c);
    const asked: unknown[] = [];
    const list: typeof store.list = (viewer, filter, page) => {
      asked.push(filter);
      return store.list(viewer, filter, page);
    };
    const agents = agentService({ ...store, list }, tools, { maxAgentsPerUser: 3 });
    const viewer = c.user('viewer');
    // The list checks its filter before it returns the store's promise: a refusal is thrown, not a rejection.
    const listed = async (filter: Parameters<typeof agents.list>[1]) => agents.list(viewer, filter, {});
    return { listed, asked };
  }

  it('reads blank text and null fields as no filter, and trims the text it keeps', async () => {
    const { listed, asked } = listing();
    await listed({ text: '  ' });
    await listed({ text: null, owner: null, public: null });
    await listed(null);
    await listed({ text: '  Lighthouse ', public: false });
    expect(asked).toEqual([{}, {}, {}, { text: 'Lighthouse', public: false }]);
  });

  it('refuses text over 200 characters and an owner that names no row, naming the filter field, before reading', async () => {
    const { listed, asked } = listing();
    await expect(listed({ text: 'x'.repeat(201) })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must be at most 200 characters', ['text']));
    await expect(listed({ owner: '' })).rejects.toEqual(refusal('BAD_USER_INPUT', 'must not be empty', ['owner']));
    await expect(listed({ owner: 'nul\u0000id' })).rejects.toEqual(refusal('BAD_USER_INPUT', 'names no row', ['owner']));
    expect(asked).toEqual([]);
    await listed({ text: 'x'.repeat(200) });
    expect(asked).toHaveLength(1);
  });
});

describe('what an agent’s fields may be', () => {
  async function anAgent() {
    const w = world();
    const agent = await w.agents.create(w.owner, {
      name: 'Ada',
      key: 'ada',
      greeting: 'Hello',
      llmSettings: { modelProfile: 'medium', thinkingPolicy: 'always', thinkingEffortCap: 'high' },
    });
    return { ...w, agent };
  }

  it.each([
    [['name'], { name: 5 }],
    [['name'], { name: '' }],
    [['name'], { name: '   ' }],
    [['name'], { name: 'x'.repeat(101) }],
    [['name'], { name: null }],
    [['key'], { key: 'has space' }],
    [['key'], { key: '-leading-dash' }],
    [['key'], { key: 'x' }],
    [['key'], { key: 'x'.repeat(40) }],
    [['description'], { description: 'x'.repeat(2001) }],
    [['image'], { image: 'not a url' }],
    [['image'], { image: 42 }],
    [['public'], { public: 'yes' }],
    [['models'], { models: 'flux' }],
    [['models', 0, 'lora'], { models: [{ lora: 5 }] }],
    [['models', 0, 'lora'], { models: [{ lora: '' }] }],
    [['models', 0, 'useWhen'], { models: [{ lora: 'some-model', useWhen: 5 }] }],
    [['persona'], { persona: 7 }],
    [['persona'], { persona: 'p'.repeat(20001) }],
    [['isPersonaPublic'], { isPersonaPublic: 'true' }],
    [['greeting'], { greeting: 'x'.repeat(2001) }],
    [['voice'], { voice: 'x'.repeat(101) }],
    [['suggestions'], { suggestions: Array.from({ length: 11 }, (_, i) => ({ label: `L${i}`, prompt: `P${i}` })) }],
    [['suggestions'], { suggestions: { label: 'a', prompt: 'b' } }],
    [['suggestions', 0, 'label'], { suggestions: [{ label: '', prompt: 'p' }] }],
    [['suggestions', 1, 'prompt'], { suggestions: [{ label: 'a', prompt: 'p' }, { label: 'b' }] }],
    [['ownerPays'], { ownerPays: 'sometimes' }],
    [['ownerPays'], { ownerPays: true }],
    [['tools'], { tools: ['flux_dev'] }],
    [['tools', 'flux_dev'], { tools: { flux_dev: 'yes' } }],
    [['llmSettings'], { llmSettings: 'low' }],
    [['llmSettings'], { llmSettings: null }],
    [['llmSettings', 'modelProfile'], { llmSettings: { modelProfile: 'ultra' } }],
    [['llmSettings', 'thinkingPolicy'], { llmSettings: { thinkingPolicy: 'never' } }],
    [['llmSettings', 'thinkingEffortCap'], { llmSettings: { thinkingEffortCap: 'max' } }],
    [['llmSettings', 'thinkingEffortInstructions'], { llmSettings: { thinkingEffortInstructions: 5 } }],
    [['llmSettings', 'thinkingEffortInstructions'], { llmSettings: { thinkingEffortInstructions: 'x'.repeat(2001) } }],
    [['toolApproval'], { toolApproval: 'always' }],
    [['toolApproval', 'tools', 'flux_dev'], { toolApproval: { tools: { flux_dev: 'sometimes' } } }],
    [['toolApproval', 'tools', 'flux_dev', 'above'], { toolApproval: { tools: { flux_dev: { above: -1 } } } }],
    [['toolApproval', 'tools', 'flux_dev'], { toolApproval: { tools: { flux_dev: { above: '5' } } } }],
    [['toolApproval', 'tools', 'flux_dev'], { toolApproval: { tools: { flux_dev: { above: 5, below: 9 } } } }],
    [['toolApproval', 'tools', 'teleport'], { toolApproval: { tools: { teleport: 'always' } } }],
    [['toolApproval', 'timeoutSeconds'], { toolApproval: { timeoutSeconds: 4 } }],
    [['toolApproval', 'timeoutSeconds'], { toolApproval: { timeoutSeconds: 7 * 24 * 3600 + 1 } }],
    [['toolApproval', 'timeoutSeconds'], { toolApproval: { timeoutSeconds: 60.5 } }],
  ])('refuses a bad %j naming it, the valid field beside it not applied either', async (fieldPath, bad) => {
    const { c, agents, owner, agent } = await anAgent();
    const before = c.writes.length;
    const beside = fieldPath[0] === 'greeting' ? { knowledge: 'SHOULD NOT APPLY' } : { greeting: 'SHOULD NOT APPLY' };
    await expect(agents.update(owner, agent.id, { ...beside, ...bad })).rejects.toEqual(
      expect.objectContaining({ code: 'BAD_USER_INPUT', fieldPath }),
    );
    expect(c.writes).toHaveLength(before);
    expect(c.agents.get(agent.id)).toMatchObject({ name: 'Ada', key: 'ada' });
  });

  it.each([
    ['modelProfile', ['low', 'medium', 'high']],
    ['thinkingPolicy', ['auto', 'off', 'always']],
    ['thinkingEffortCap', ['low', 'medium', 'high']],
  ])('takes every value of llmSettings.%s', async (field, values) => {
    const { agents, owner, agent } = await anAgent();
    for (const value of values) {
      const changed = await agents.update(owner, agent.id, { llmSettings: { [field]: value } });
      expect(changed.llmSettings).toMatchObject({ [field]: value });
    }
  });

  it('takes every value of ownerPays, and a model’s useWhen defaults to ""', async () => {
    const { c, agents, owner, agent } = await anAgent();
    for (const ownerPays of ['off', 'deployments', 'full'])
      expect(await agents.update(owner, agent.id, { ownerPays })).toMatchObject({ ownerPays });
    const model = c.model(owner);
    expect((await agents.update(owner, agent.id, { models: [{ lora: model.id }] })).models).toEqual([{ lora: model.id, useWhen: '' }]);
  });

  it('takes ten models and refuses eleven as over a limit, changing nothing', async () => {
    const { c, agents, owner, agent } = await anAgent();
    const models = Array.from({ length: 11 }, () => ({ lora: c.model(owner).id, useWhen: 'x' }));
    expect((await agents.update(owner, agent.id, { models: models.slice(0, 10) })).models).toHaveLength(10);
    const before = c.writes.length;
    await expect(agents.update(owner, agent.id, { greeting: 'SHOULD NOT APPLY', models })).rejects.toEqual(
      refusal('UNPROCESSABLE', 'must have at most 10 models', ['models']),
    );
    expect(c.writes).toHaveLength(before);
    expect(c.agents.get(agent.id)?.models).toHaveLength(10);
  });

  it('takes on update only models the owner may use, naming the element', async () => {
    const { c, agents, owner, stranger, agent } = await anAgent();
    const mine = c.model(owner);
    const theirs = c.model(stranger);
    const before = c.writes.length;
    await expect(agents.update(owner, agent.id, { models: [{ lora: theirs.id, useWhen: 'x' }] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'model not found or not usable by you', ['models', 0, 'lora']),
    );
    await expect(agents.update(owner, agent.id, { models: [{ lora: mine.id }, { lora: 'no-such-model' }] })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'model not found or not usable by you', ['models', 1, 'lora']),
    );
    expect(c.writes).toHaveLength(before);
  });

  it('refuses tools that are unknown or inactive (deprecated sdxl), and lets the owner turn on the hidden helper prompt_enhance', async () => {
    const { agents, owner, agent } = await anAgent();
    for (const key of ['sdxl', 'teleport'])
      await expect(agents.update(owner, agent.id, { tools: { flux_dev: true, [key]: true } })).rejects.toEqual(
        refusal('BAD_USER_INPUT', `unknown tool "${key}" (see the tools list)`, ['tools', key]),
      );
    expect((await agents.update(owner, agent.id, { tools: { prompt_enhance: true } })).tools).toMatchObject({ prompt_enhance: true });
  });
});

describe('tools whose calls wait for the owner’s approval', () => {
  it('asks nothing of any tool, and waits ten minutes, until the owner says', async () => {
    const { agents, owner } = world();
    const agent = await agents.create(owner, { name: 'Ada', key: 'ada', tools: { flux_dev: true } });
    expect(agentToolApproval(agent)).toEqual({ tools: {}, timeoutSeconds: 600 });
  });

  it('keeps the rules and the timeout the owner set, merging a later change field by field', async () => {
    const { agents, owner } = world();
    const made = await agents.create(owner, {
      name: 'Ada',
      key: 'ada',
      toolApproval: { tools: { flux_dev: { above: 1.5 }, prompt_enhance: 'always' }, timeoutSeconds: 120 },
    });
    expect(agentToolApproval(made)).toEqual({ tools: { flux_dev: { above: 1.5 }, prompt_enhance: 'always' }, timeoutSeconds: 120 });
    const timeoutOnly = await agents.update(owner, made.id, { toolApproval: { timeoutSeconds: 30 } });
    expect(agentToolApproval(timeoutOnly)).toEqual({ tools: { flux_dev: { above: 1.5 }, prompt_enhance: 'always' }, timeoutSeconds: 30 });
    // The rules are one field: a new set replaces the old, and none leaves none.
    const rulesOnly = await agents.update(owner, made.id, { toolApproval: { tools: { flux_schnell: 'always' } } });
    expect(agentToolApproval(rulesOnly)).toEqual({ tools: { flux_schnell: 'always' }, timeoutSeconds: 30 });
    expect(agentToolApproval(await agents.update(owner, made.id, { toolApproval: { tools: {} } })).tools).toEqual({});
  });

  it('says what a rule may be', async () => {
    const { agents, owner } = world();
    const made = await agents.create(owner, { name: 'Ada', key: 'ada' });
    await expect(agents.update(owner, made.id, { toolApproval: { tools: { flux_dev: 'sometimes' } } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be "always" or {"above": <an amount of manna>}', ['toolApproval', 'tools', 'flux_dev']),
    );
    await expect(agents.update(owner, made.id, { toolApproval: { tools: { flux_dev: { above: -1 } } } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'must be at least 0', ['toolApproval', 'tools', 'flux_dev', 'above']),
    );
  });

  it('names an MCP tool as the model calls it, <server>__<tool>, on a server of the owner’s own', async () => {
    const { c, agents, owner, stranger } = world();
    c.mcpServerNames.set(owner.id, ['loop']);
    c.mcpServerNames.set(stranger.id, ['theirs']);
    const made = await agents.create(owner, { name: 'Ada', key: 'ada' });
    const rules = { loop__echo: 'always' as const, flux_dev: { above: 2 } };
    expect(agentToolApproval(await agents.update(owner, made.id, { toolApproval: { tools: rules } })).tools).toEqual(rules);
    const writes = c.writes.length;
    for (const key of ['theirs__echo', 'gone__echo', 'loop__', 'loop_echo', 'Loop__echo', `loop__${'x'.repeat(60)}`])
      await expect(agents.update(owner, made.id, { toolApproval: { tools: { [key]: 'always' } } })).rejects.toEqual(
        refusal(
          'BAD_USER_INPUT',
          `unknown tool "${key}" (see the tools list; an MCP tool is named <server>__<tool>, on a server of yours)`,
          ['toolApproval', 'tools', key],
        ),
      );
    expect(c.writes.length).toBe(writes);
  });

  it('lets only the owner change them', async () => {
    const { c, agents, owner, stranger } = world();
    const made = await agents.create(owner, { name: 'Ada', key: 'ada', public: true });
    const before = c.writes.length;
    await expect(agents.update(stranger, made.id, { toolApproval: { tools: { flux_dev: 'always' } } })).rejects.toEqual(
      refusal('FORBIDDEN', 'Only the owner of this agent can update it'),
    );
    expect(c.writes).toHaveLength(before);
  });

  it('asks for a call always, or when the tool’s cost on the call’s arguments is above the amount, and never for other tools', () => {
    // A call's arguments as the tool host prices them: checked, with the tool's defaults filled in.
    const priced = (key: string, args: Record<string, unknown>) => {
      const checked = checkArguments(tools.get(key)!, JSON.stringify({ prompt: 'a lighthouse', ...args }));
      if ('error' in checked) throw new Error(checked.error);
      return costOf(tools.get(key)!, checked.args);
    };
    const setting = agentToolApproval({ toolApproval: { tools: { flux_dev: { above: 2 }, flux_schnell: 'always' } } });
    // flux_dev costs n_samples * max(1, steps / 28): 1, 2 (at the line: not above), 3 and 2.1429.
    expect(needsApproval(setting, 'flux_dev', priced('flux_dev', { n_samples: 1 }))).toBe(false);
    expect(needsApproval(setting, 'flux_dev', priced('flux_dev', { n_samples: 2 }))).toBe(false);
    expect(needsApproval(setting, 'flux_dev', priced('flux_dev', { n_samples: 3 }))).toBe(true);
    expect(needsApproval(setting, 'flux_dev', priced('flux_dev', { n_samples: 2, num_inference_steps: 30 }))).toBe(true);
    expect(needsApproval(setting, 'flux_schnell', priced('flux_schnell', {}))).toBe(true);
    expect(needsApproval(setting, 'prompt_enhance', priced('prompt_enhance', {}))).toBe(false);
    const above = (amount: number) => agentToolApproval({ toolApproval: { tools: { flux_dev: { above: amount } } } });
    expect(needsApproval(above(0), 'flux_dev', priced('flux_dev', {}))).toBe(true);
    // Compared as the ledger's decimals: a cost that comes to 0.1 + 0.2 in floats is not above 0.3.
    expect(needsApproval(above(0.3), 'flux_dev', mannaOf(0.1 + 0.2))).toBe(false);
  });
});

describe('an agent’s key', () => {
  it('on update, refuses a key another agent or a user has, changing nothing', async () => {
    const { c, agents, owner, stranger } = world();
    const ada = await agents.create(owner, { name: 'Ada', key: 'ada' });
    await agents.create(stranger, { name: 'Taken', key: 'taken' });
    const before = c.writes.length;
    for (const key of ['taken', 'stranger', 'owner'])
      await expect(agents.update(owner, ada.id, { name: 'SHOULD NOT APPLY', key })).rejects.toEqual(refusal('CONFLICT', AGENT_KEY_TAKEN));
    expect(c.writes).toHaveLength(before);
    expect(c.agents.get(ada.id)).toMatchObject({ name: 'Ada', key: 'ada' });
  });

  it('is changed by the owner alone, on a private agent as on a public one', async () => {
    const { agents, owner, stranger } = world();
    const hidden = await agents.create(owner, { name: 'Hidden', key: 'hidden' });
    await expect(agents.update(stranger, hidden.id, { name: 'Hijacked', key: 'hijack' })).rejects.toEqual(
      refusal('FORBIDDEN', 'Only the owner of this agent can update it'),
    );
  });
});
