import { z } from 'zod';
import { type FeedEvent, feedFamilies } from '../domain/core/feed-events.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { deploySchema, platformSchema, type DeploymentRow, stateOf } from '../domain/deployments/index.ts';
import { DeploymentPlatform } from '../domain/core/vocabulary.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { type RestAgentRow, restAgentQuery, restAgentSchema, toRestAgent } from './agents.ts';
import { resumeHeaders, resumePoint, resumeQuery } from './event-stream.ts';
import { feedFrameSchema, streamFeed } from './feed-stream.ts';
import { operation } from './operation.ts';

/** Under `/v2/agents/{agentId}`, deployments answer as agents do: `{error}`, and 401 to someone who does not own the agent. */
const errors: RestErrorStyle = { bodyKey: 'error', status: { FORBIDDEN: 401 } };

const allowlist = z.array(z.object({ id: z.string(), note: z.string().optional() }));

/**
 * `config` as the original's SDK reads it (both platforms' allowlists always there, empty when
 * not set), with parley's bounds when the owner set them.
 */
const restConfigSchema = z
  .object({
    discord: z.looseObject({ channel_allowlist: allowlist }),
    telegram: z.looseObject({ topic_allowlist: allowlist }),
    daily_manna_cap: z.number().optional(),
    chat_messages_per_minute: z.number().optional(),
  })
  .catchall(z.unknown())
  .meta({ id: 'DeploymentConfig' });

function toRestConfig(config: unknown): z.input<typeof restConfigSchema> {
  const c = (typeof config === 'object' && config !== null && !Array.isArray(config) ? config : {}) as Record<string, any>;
  return {
    ...c,
    discord: { ...c.discord, channel_allowlist: c.discord?.channel_allowlist ?? [] },
    telegram: { ...c.telegram, topic_allowlist: c.telegram?.topic_allowlist ?? [] },
  };
}

/** Built field by field: `secrets` is never part of a response. */
const deploymentFields = {
  _id: z.string().meta({ description: 'The same as id, as the original named it' }),
  id: z.string(),
  user: z.string(),
  platform: z.enum(DeploymentPlatform),
  config: restConfigSchema,
  valid: z.boolean().meta({ description: 'False once the platform refused its secrets (a revoked bot token)' }),
  state: z.enum(['running', 'stopped', 'invalid']).meta({
    description: 'stopped: by its owner, or unable to run here (last_error says why: its secrets key left behind in a move, say)',
  }),
  last_error: z
    .string()
    .nullable()
    .meta({ description: 'What it last failed at, or why it does not run here (never a secret), null while all is well' }),
  account: z.string().nullable().meta({ description: "The account its secrets open on the platform (a bot's @username)" }),
  createdAt: z.date(),
  updatedAt: z.date(),
};

export const restDeploymentSchema = z.object({ ...deploymentFields, agent: z.string() }).meta({ id: 'Deployment' });
/** A deployment with its agent populated, as the original's SDK reads `agents.getDeployments`. */
const restAgentDeploymentSchema = z.object({ ...deploymentFields, agent: restAgentSchema }).meta({ id: 'AgentDeployment' });

const commonFields = (d: DeploymentRow) => ({
  _id: d.id,
  id: d.id,
  user: d.userId,
  platform: d.platform,
  config: toRestConfig(d.config),
  valid: d.valid,
  state: stateOf(d),
  last_error: d.lastError,
  account: d.account,
  createdAt: d.createdAt,
  updatedAt: d.updatedAt,
});

export const toRestDeployment = (d: DeploymentRow): z.input<typeof restDeploymentSchema> => ({ ...commonFields(d), agent: d.agentId });

const withAgent = { include: { agent: { include: { ...restAgentQuery.include, user: { select: { username: true } } } } } } as const;
const toRestAgentDeployment = (d: DeploymentRow & { agent: RestAgentRow }, viewer: Viewer) => ({
  ...commonFields(d),
  agent: toRestAgent(d.agent, viewer),
});

/** A deployment's change of state as REST streams it: the feed's fields, in snake case. */
const restDeploymentEventSchema = z
  .object({
    type: z.enum(feedFamilies.deployment),
    deployment_id: z.string(),
    agent_id: z.string(),
    platform: z.enum(DeploymentPlatform),
    state: deploymentFields.state,
    valid: z.boolean(),
    last_error: z.string().nullable(),
    deleted: z.boolean().meta({ description: 'The deployment was deleted: this is its last event, with the state it ended in' }),
  })
  .meta({ id: 'DeploymentEvent' });

const toRestDeploymentEvent = (e: Extract<FeedEvent, { type: 'deployment_state' }>): z.infer<typeof restDeploymentEventSchema> => ({
  type: e.type,
  deployment_id: e.deploymentId,
  agent_id: e.agentId,
  platform: e.platform,
  state: e.state,
  valid: e.valid,
  last_error: e.lastError,
  deleted: e.deleted,
});

const path = '/v2/agents/:agentId/deployments';
const tag = 'Agents - Deployments';
const body = deploySchema.extend({
  agentId: z.string().optional().meta({ description: "Ignored: the path names the agent (the original's SDK sends it in the body too)" }),
});
const success = z.object({ success: z.boolean() });

export const deploymentOperations = [
  operation({
    operationId: 'streamDeploymentEvents',
    method: 'get',
    path: '/v2/agents/deployments/events',
    tag,
    summary:
      "Your deployments' changes of state, live (SSE): deployed, stopped, found invalid (with why), deleted; `agent_id` narrows it to one agent of yours; resume with Last-Event-ID or `after`",
    query: resumeQuery.extend({ agent_id: z.string().optional() }),
    headers: resumeHeaders,
    ok: { events: feedFrameSchema('DeploymentStream', restDeploymentEventSchema) },
    errors: { style: errors, codes: ['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, reply, { services, stream }) => {
      const { agent_id: agentId } = request.query;
      if (agentId !== undefined) await services.deployments.listForAgent(request.viewer, agentId);
      const events = await services.feeds.watch(request.viewer, {
        after: resumePoint(request.headers['last-event-id'], request.query.after),
        types: feedFamilies.deployment,
        where: agentId === undefined ? undefined : (e) => e.agentId === agentId,
      });
      return streamFeed(reply, events, stream, toRestDeploymentEvent);
    },
  }),
  operation({
    operationId: 'listDeployments',
    method: 'get',
    path: '/v2/agents/deployments',
    tag,
    summary: 'Deployments of the agents you own, newest first',
    ok: { json: z.object({ deployments: z.array(restDeploymentSchema) }) },
    handler: async (request, _reply, { services }) => ({
      deployments: (await services.deployments.listMine(request.viewer)).map(toRestDeployment),
    }),
  }),
  operation({
    operationId: 'deployAgent',
    method: 'post',
    path,
    tag,
    summary:
      'Deploy an agent you own to a platform and start it (one deployment per platform: deploying again changes and restarts it). Secrets are checked with the platform, sealed and never shown again; an account (a bot) deployed elsewhere already is a 409 saying where',
    body,
    ok: { json: z.object({ deploymentId: z.string(), deployment_id: z.string().meta({ description: 'The same, as the SDK reads it' }) }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => {
      const deployment = await services.deployments.deploy(request.viewer, request.params.agentId, request.body);
      return { deploymentId: deployment.id, deployment_id: deployment.id };
    },
  }),
  operation({
    operationId: 'listAgentDeployments',
    method: 'get',
    path,
    tag,
    summary: 'The deployments of an agent you own, its agent populated',
    ok: { json: z.object({ deployments: z.array(restAgentDeploymentSchema) }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND'] },
    handler: async (request, _reply, { services }) => ({
      deployments: (await services.deployments.listForAgent(request.viewer, request.params.agentId, withAgent)).map((d) =>
        toRestAgentDeployment(d as DeploymentRow & { agent: RestAgentRow }, request.viewer),
      ),
    }),
  }),
  operation({
    operationId: 'updateDeployment',
    method: 'patch',
    path,
    tag,
    summary: "Change a deployment's config (the keys sent; null takes a bound back to the default) or its secrets (checked again)",
    body,
    ok: { json: z.object({ deploymentId: z.string() }) },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT', 'CONFLICT', 'UNAVAILABLE'] },
    handler: async (request, _reply, { services }) => ({
      deploymentId: (await services.deployments.update(request.viewer, request.params.agentId, request.body)).id,
    }),
  }),
  operation({
    operationId: 'stopDeployment',
    method: 'post',
    path: `${path}/stop`,
    tag,
    summary: 'Stop reading the platform (deploy again to start it)',
    body: platformSchema.extend({ agentId: z.string().optional() }),
    ok: { json: success },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      await services.deployments.stop(request.viewer, request.params.agentId, request.body);
      return { success: true };
    },
  }),
  operation({
    operationId: 'deleteDeployment',
    method: 'delete',
    path: `${path}/:platform`,
    tag,
    summary: 'Delete a deployment and its sealed secrets',
    ok: { json: success },
    errors: { style: errors, codes: ['FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT'] },
    handler: async (request, _reply, { services }) => {
      await services.deployments.remove(request.viewer, request.params.agentId, { platform: request.params.platform });
      return { success: true };
    },
  }),
];
