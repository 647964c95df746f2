import { describe, expect, it } from 'vitest';
import type { Viewer } from '../../src/domain/core/viewer.ts';
import {
  AGENT_NOT_FOUND,
  DEPLOYMENT_NOT_FOUND,
  type DeploymentRow,
  deploymentService,
  NOT_THE_OWNER,
  stateOf,
} from '../../src/domain/deployments/service.ts';
import { noSealer, type SecretSealer } from '../../src/domain/deployments/ports.ts';
import { Deployments, fakePlatform, memoryDeploymentStore, memorySealer } from './support/deployments.ts';

/**
 * The deployments' rules over a store in memory: one deployment per platform per agent, its
 * agent's owner's alone (a stranger never reads one), input and config refused naming the field
 * with nothing saved, the secrets checked with the platform before anything is written, a bot
 * held by one deployment only, and what a change keeps.
 */
function world(options: { sealer?: SecretSealer } = {}) {
  const d = new Deployments();
  const platform = fakePlatform();
  const changed: { row: DeploymentRow; deleted: boolean }[] = [];
  const deployments = deploymentService({
    store: memoryDeploymentStore(d),
    sealer: options.sealer ?? memorySealer(),
    connectors: [platform.connector],
    changed: (row, deleted) => changed.push({ row, deleted: deleted ?? false }),
  });
  const owner = d.user();
  return { d, platform, changed, deployments, owner, stranger: d.user(), agent: d.agent(owner) };
}

const refusal = (code: string, message: string | RegExp, fieldPath?: (string | number)[]) =>
  expect.objectContaining({ code, message: typeof message === 'string' ? message : expect.stringMatching(message), fieldPath });
const telegram = (token: string, config?: unknown) => ({ platform: 'telegram', secrets: { telegram: { token } }, config });

describe('deploying an agent', () => {
  it('makes one running deployment with the account its token opens, the token sealed and never shown', async () => {
    const { d, deployments, owner, agent, changed } = world();
    const made = await deployments.deploy(owner, agent, telegram('7:secret-part'));
    expect(made).toMatchObject({ agentId: agent, userId: owner.id, platform: 'telegram', account: '@bot7', accountId: '7', running: true });
    expect(stateOf(made)).toBe('running');
    expect(made).not.toHaveProperty('sealed');
    expect(JSON.stringify(made)).not.toContain('secret-part');
    const kept = d.of(agent)[0]!;
    expect(kept.sealed).toMatch(/^v1\./);
    expect(kept.sealed).not.toContain('secret-part');
    expect(changed.map((c) => [c.row.id, c.deleted])).toEqual([[made.id, false]]);
  });

  it('keeps one deployment per platform per agent: deploying again changes the same one and starts it', async () => {
    const { d, deployments, owner, agent } = world();
    const made = await deployments.deploy(owner, agent, telegram('7:a', { chat_messages_per_minute: 3 }));
    await deployments.stop(owner, agent, { platform: 'telegram' });
    // No token needed the second time: the one kept is used, and a null bound goes back to the default.
    const again = await deployments.deploy(owner, agent, {
      platform: 'telegram',
      config: { chat_messages_per_minute: null, daily_manna_cap: 5 },
    });
    expect(again.id).toBe(made.id);
    expect(again.running).toBe(true);
    expect(again.config).toEqual({ daily_manna_cap: 5 });
    expect(d.of(agent)).toHaveLength(1);
  });

  it('asks for a token the first time, naming the field, and saves nothing', async () => {
    const { d, deployments, owner, agent, platform } = world();
    await expect(deployments.deploy(owner, agent, { platform: 'telegram' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'is required to deploy to telegram', ['secrets', 'telegram', 'token']),
    );
    expect(platform.asked).toEqual([]);
    expect(d.writes).toEqual([]);
  });

  it('refuses a token the platform refuses on the field it names, and one it cannot check as unavailable; nothing saved', async () => {
    const { d, deployments, owner, agent, platform } = world();
    platform.refused.add('7:revoked');
    await expect(deployments.deploy(owner, agent, telegram('7:revoked'))).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'the platform refused this token', ['secrets', 'telegram', 'token']),
    );
    platform.state.away = true;
    await expect(deployments.deploy(owner, agent, telegram('7:fine'))).rejects.toEqual(refusal('UNAVAILABLE', 'the platform is away'));
    expect(d.writes).toEqual([]);
  });

  it('refuses with the reason when no secret can be sealed here, before asking the platform', async () => {
    const { d, deployments, owner, agent, platform } = world({ sealer: noSealer('SECRETS_KEY is not set') });
    await expect(deployments.deploy(owner, agent, telegram('7:a'))).rejects.toEqual(refusal('UNAVAILABLE', 'SECRETS_KEY is not set'));
    expect(platform.asked).toEqual([]);
    expect(d.writes).toEqual([]);
  });
});

describe('what a deployment’s input may be', () => {
  it.each([
    [{ platform: 'myspace' }, ['platform'], /^must be one of /],
    [{}, ['platform'], /^must be one of /],
    [
      telegram('7:a', { telegram: { topic_allowlist: [{ id: 'general' }] } }),
      ['config', 'telegram', 'topic_allowlist', 0, 'id'],
      /^must be a Telegram chat id/,
    ],
    [telegram('7:a', { chat_messages_per_minute: 0 }), ['config', 'chat_messages_per_minute'], 'must be at least 1'],
    [telegram('7:a', { chat_messages_per_minute: 1.5 }), ['config', 'chat_messages_per_minute'], 'must be a whole number'],
    [telegram('7:a', { daily_manna_cap: -1 }), ['config', 'daily_manna_cap'], 'must be at least 0'],
    [telegram('7:a', { daily_manna_cap: 'lots' }), ['config', 'daily_manna_cap'], 'must be a number'],
    [telegram(''), ['secrets', 'telegram', 'token'], 'must not be empty'],
  ] as const)('refuses %j naming the field, asking no platform and saving nothing', async (input, fieldPath, message) => {
    const { d, deployments, owner, agent, platform } = world();
    await expect(deployments.deploy(owner, agent, input)).rejects.toEqual(refusal('BAD_USER_INPUT', message, [...fieldPath]));
    expect(platform.asked).toEqual([]);
    expect(d.writes).toEqual([]);
  });

  it('refuses a platform not offered yet, saying which are', async () => {
    const { d, deployments, owner, agent } = world();
    await expect(deployments.deploy(owner, agent, { platform: 'discord', secrets: { discord: { token: 'x' } } })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'deployments to discord are not available yet (available: telegram)', ['platform']),
    );
    expect(d.writes).toEqual([]);
  });

  it('refuses an update that changes nothing', async () => {
    const { deployments, owner, agent } = world();
    await deployments.deploy(owner, agent, telegram('7:a'));
    await expect(deployments.update(owner, agent, { platform: 'telegram' })).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'No deployment fields to update in the request (config, secrets)'),
    );
  });
});

describe('who may deploy, read and change', () => {
  async function deployed() {
    const w = world();
    const made = await w.deployments.deploy(w.owner, w.agent, telegram('7:a'));
    w.d.writes.length = 0;
    return { ...w, made };
  }

  it('tells a stranger a deployment is not there, and lists them none of the owner’s', async () => {
    const { deployments, stranger, owner, made } = await deployed();
    await expect(deployments.get(stranger, made.id)).rejects.toEqual(refusal('NOT_FOUND', DEPLOYMENT_NOT_FOUND));
    expect(await deployments.listMine(stranger)).toEqual([]);
    expect((await deployments.get(owner, made.id)).id).toBe(made.id);
    expect((await deployments.listMine(owner)).map((r) => r.id)).toEqual([made.id]);
  });

  it('refuses every change by anyone but the agent’s owner, and changes nothing', async () => {
    const { d, deployments, stranger, agent, platform } = await deployed();
    const asked = platform.asked.length;
    const attempts = [
      deployments.deploy(stranger, agent, telegram('8:b')),
      deployments.update(stranger, agent, { platform: 'telegram', config: {} }),
      deployments.stop(stranger, agent, { platform: 'telegram' }),
      deployments.remove(stranger, agent, { platform: 'telegram' }),
      deployments.listForAgent(stranger, agent),
    ];
    for (const attempt of attempts) await expect(attempt).rejects.toEqual(refusal('FORBIDDEN', NOT_THE_OWNER));
    expect(platform.asked).toHaveLength(asked);
    expect(d.writes).toEqual([]);
    expect(d.of(agent)[0]).toMatchObject({ running: true, account: '@bot7' });
  });

  it('says an unknown agent is not found, and a deployment its agent lacks is not found', async () => {
    const { d, deployments, owner } = await deployed();
    await expect(deployments.deploy(owner, 'no-such-agent', telegram('8:b'))).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
    await expect(deployments.listForAgent(owner, 'no-such-agent')).rejects.toEqual(refusal('NOT_FOUND', AGENT_NOT_FOUND));
    const undeployed = d.agent(owner, 'Babbage');
    for (const attempt of [
      deployments.update(owner, undeployed, { platform: 'telegram', config: {} }),
      deployments.stop(owner, undeployed, { platform: 'telegram' }),
      deployments.remove(owner, undeployed, { platform: 'telegram' }),
    ])
      await expect(attempt).rejects.toEqual(refusal('NOT_FOUND', DEPLOYMENT_NOT_FOUND));
    expect(d.of(undeployed)).toEqual([]);
  });
});

describe('changing, stopping and deleting', () => {
  it('keeps the config keys not sent, drops those sent as null, and keeps it running or stopped as it was', async () => {
    const { deployments, owner, agent } = world();
    await deployments.deploy(owner, agent, telegram('7:a', { daily_manna_cap: 10, chat_messages_per_minute: 4 }));
    await deployments.stop(owner, agent, { platform: 'telegram' });
    const changed = await deployments.update(owner, agent, { platform: 'telegram', config: { daily_manna_cap: null } });
    expect(changed.config).toEqual({ chat_messages_per_minute: 4 });
    expect(stateOf(changed)).toBe('stopped');
  });

  it('checks a new token with the platform and moves the deployment to the bot it opens', async () => {
    const { d, deployments, owner, agent, platform } = world();
    const made = await deployments.deploy(owner, agent, telegram('7:a'));
    const before = d.of(agent)[0]!.sealed;
    platform.refused.add('9:bad');
    await expect(deployments.update(owner, agent, telegram('9:bad'))).rejects.toEqual(
      refusal('BAD_USER_INPUT', 'the platform refused this token', ['secrets', 'telegram', 'token']),
    );
    expect(d.of(agent)[0]).toMatchObject({ account: '@bot7', sealed: before });
    const moved = await deployments.update(owner, agent, telegram('8:b'));
    expect(moved).toMatchObject({ id: made.id, account: '@bot8', accountId: '8' });
    expect(d.of(agent)[0]!.sealed).not.toBe(before);
  });

  it('stops and deletes, telling who listens, and a second delete is not found', async () => {
    const { d, deployments, owner, agent, changed } = world();
    const made = await deployments.deploy(owner, agent, telegram('7:a'));
    expect(stateOf(await deployments.stop(owner, agent, { platform: 'telegram' }))).toBe('stopped');
    expect(await deployments.remove(owner, agent, { platform: 'telegram' })).toBe(made.id);
    expect(d.of(agent)).toEqual([]);
    expect(changed.map((c) => [c.row.running, c.deleted])).toEqual([
      [true, false],
      [false, false],
      [false, true],
    ]);
    await expect(deployments.remove(owner, agent, { platform: 'telegram' })).rejects.toEqual(refusal('NOT_FOUND', DEPLOYMENT_NOT_FOUND));
  });
});

describe('one bot, one deployment', () => {
  it('refuses a bot another user’s agent holds, without naming that agent, and changes nothing', async () => {
    const { d, deployments, owner, agent } = world();
    const other: Viewer = d.user();
    const theirs = d.agent(other, 'Theirs');
    await deployments.deploy(other, theirs, telegram('7:a'));
    const writes = d.writes.length;
    await expect(deployments.deploy(owner, agent, telegram('7:another-token-of-the-same-bot'))).rejects.toEqual(
      refusal('CONFLICT', "@bot7 on telegram is already deployed to another user's agent: it can run in one place only"),
    );
    expect(d.writes).toHaveLength(writes);
    expect(d.of(agent)).toEqual([]);
  });

  it('tells the owner which of their own agents holds the bot, on deploy and on update', async () => {
    const { d, deployments, owner, agent } = world();
    const second = d.agent(owner, 'Babbage');
    await deployments.deploy(owner, second, telegram('7:a'));
    const expected = refusal(
      'CONFLICT',
      `@bot7 on telegram is already deployed to your agent "Babbage" (${second}): delete that deployment first, or deploy it there`,
    );
    await expect(deployments.deploy(owner, agent, telegram('7:a'))).rejects.toEqual(expected);
    await deployments.deploy(owner, agent, telegram('8:b'));
    await expect(deployments.update(owner, agent, telegram('7:a'))).rejects.toEqual(expected);
    expect(d.of(agent)[0]).toMatchObject({ account: '@bot8' });
  });

  it('lets the bot go to another agent once its deployment is deleted', async () => {
    const { d, deployments, owner, agent } = world();
    const second = d.agent(owner, 'Babbage');
    await deployments.deploy(owner, second, telegram('7:a'));
    await deployments.remove(owner, second, { platform: 'telegram' });
    expect(await deployments.deploy(owner, agent, telegram('7:a'))).toMatchObject({ agentId: agent, account: '@bot7' });
  });
});
