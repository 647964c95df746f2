import { stateOf } from '../../domain/deployments/index.ts';
import type { Deployment as DeploymentRow } from '../../generated/prisma/client.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { Agent } from './agent.ts';
import { DeploymentPlatformEnum } from './enums.ts';
import { nodeInterfaces, RAW_ID } from './node.ts';

export const DeploymentStateEnum = builder.enumType('DeploymentState', {
  description: 'What a deployment is doing.',
  values: {
    RUNNING: { value: 'running', description: 'Reading and answering what people write on the platform.' },
    STOPPED: {
      value: 'stopped',
      description:
        'Not running: stopped by its owner (deploy again to start it), or unable to run here (lastError says why: its secrets key left behind in a move, say).',
    },
    INVALID: { value: 'invalid', description: 'The platform refused its secrets (a revoked bot token): give new ones.' },
  } as const,
});

export const DeploymentChat = builder.prismaObject('DeploymentChat', {
  description: "A conversation on the platform (a Telegram chat) and the session of the agent it became, owned by the deployment's owner.",
  fields: (t) => ({
    conversationId: t.exposeString('conversationId', { description: "The platform's id of the chat." }),
    title: t.exposeString('title'),
    session: t.relation('session', {
      nullable: true,
      description: 'Null until its first message is answered, or after its session was deleted.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const Deployment = builder.prismaObject('Deployment', {
  interfaces: nodeInterfaces,
  description: 'An agent deployed to a platform. Its secrets are write-only and never shown.',
  fields: (t) => ({
    id: t.globalID({ resolve: (x) => ({ type: 'Deployment', id: x.id }) }),
    rawId: t.exposeID('id', { description: RAW_ID }),
    platform: t.expose('platform', { type: DeploymentPlatformEnum }),
    config: t.expose('config', { type: 'JSON' }),
    valid: t.exposeBoolean('valid', { description: 'False once the platform refused its secrets.' }),
    state: t.field({ type: DeploymentStateEnum, resolve: stateOf }),
    lastError: t.exposeString('lastError', {
      nullable: true,
      description: 'What it last failed at, or why it does not run here (never a secret); null while all is well.',
    }),
    account: t.exposeString('account', {
      nullable: true,
      description: "The account its secrets open on the platform (a bot's @username).",
    }),
    agent: t.relation('agent'),
    owner: t.relation('user'),
    chats: t.relation('chats', {
      description: 'Its conversations on the platform, newest first.',
      query: { orderBy: { createdAt: 'desc' } },
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

builder.queryField('deployments', (t) =>
  t.prismaField({
    type: ['Deployment'],
    description: 'Deployments of all the agents you own, newest first.',
    // The client omits `secrets` from every read; Pothos's model type still lists the column.
    resolve: async (query, _root, _args, ctx) => (await ctx.services.deployments.listMine(viewerOf(ctx), query)) as DeploymentRow[],
  }),
);

builder.objectField(Agent, 'deployments', (t) =>
  t.prismaField({
    type: ['Deployment'],
    description: "The agent's deployments, newest first: for its owner; empty for anyone else.",
    resolve: async (query, agent, _args, ctx) => {
      const viewer = viewerOf(ctx);
      if (agent.ownerId !== viewer.id) return [];
      return (await ctx.services.deployments.listForAgent(viewer, agent.id, query)) as DeploymentRow[];
    },
  }),
);

const TelegramSecretsInput = builder.inputType('TelegramSecretsInput', {
  fields: (t) => ({ token: t.string({ required: true, description: "The bot's token from BotFather." }) }),
});
const DeploymentSecretsInput = builder.inputType('DeploymentSecretsInput', {
  description: 'Write-only: checked with the platform, sealed, never shown again.',
  fields: (t) => ({ telegram: t.field({ type: TelegramSecretsInput }) }),
});
const deploymentInput = (name: string, description: string) =>
  builder.inputType(name, {
    description,
    fields: (t) => ({
      platform: t.field({ type: DeploymentPlatformEnum, required: true }),
      config: t.field({
        type: 'JSON',
        description:
          'As the original spells it: `telegram.topic_allowlist` ([{id, note}]: the only chats answered), `daily_manna_cap`, `chat_messages_per_minute` (null: back to the default).',
      }),
      secrets: t.field({ type: DeploymentSecretsInput }),
    }),
  });
const DeployInput = deploymentInput(
  'DeployInput',
  'Deploys an agent to a platform and starts it (the one deployment there, changed and restarted if it exists).',
);
const UpdateDeploymentInput = deploymentInput('UpdateDeploymentInput', "Changes a deployment's config (the keys given) or secrets.");

/** GraphQL leaves an input's unset fields out or null; the domain's schema reads only what is there. */
const defined = <T extends object>(input: T) => Object.fromEntries(Object.entries(input).filter(([, v]) => v != null));

builder.mutationFields((t) => ({
  deployAgent: t.prismaField({
    type: 'Deployment',
    description:
      'Deploys an agent you own; its secrets are checked with the platform first (a refused one changes nothing). An account (a bot) deployed elsewhere already is CONFLICT, saying where; so is such a token given to updateDeployment.',
    args: { agentId: t.arg.id({ required: true }), input: t.arg({ type: DeployInput, required: true }) },
    resolve: async (query, _root, { agentId, input }, ctx) =>
      (await ctx.services.deployments.deploy(viewerOf(ctx), String(agentId), defined(input), query)) as DeploymentRow,
  }),
  updateDeployment: t.prismaField({
    type: 'Deployment',
    args: { agentId: t.arg.id({ required: true }), input: t.arg({ type: UpdateDeploymentInput, required: true }) },
    resolve: async (query, _root, { agentId, input }, ctx) =>
      (await ctx.services.deployments.update(viewerOf(ctx), String(agentId), defined(input), query)) as DeploymentRow,
  }),
  stopDeployment: t.prismaField({
    type: 'Deployment',
    description: 'Stops reading the platform (deployAgent starts it again).',
    args: { agentId: t.arg.id({ required: true }), platform: t.arg({ type: DeploymentPlatformEnum, required: true }) },
    resolve: async (query, _root, { agentId, platform }, ctx) =>
      (await ctx.services.deployments.stop(viewerOf(ctx), String(agentId), { platform }, query)) as DeploymentRow,
  }),
  deleteDeployment: t.globalID({
    description: 'Deletes a deployment and its sealed secrets; the id it had.',
    args: { agentId: t.arg.id({ required: true }), platform: t.arg({ type: DeploymentPlatformEnum, required: true }) },
    resolve: async (_root, { agentId, platform }, ctx) => ({
      type: 'Deployment',
      id: await ctx.services.deployments.remove(viewerOf(ctx), String(agentId), { platform }),
    }),
  }),
}));
