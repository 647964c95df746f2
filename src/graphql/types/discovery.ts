import { viewerOf } from '../context.ts';
import { builder } from '../builder.ts';
import { guardedConnection } from '../connection-guard.ts';

/**
 * What a client may talk to or use, as cursor connections (forward with first/after, backward
 * with last/before): each lists what its single-row query (`agent`, `model`, `creation`) would
 * show, newest first, narrowed by its filter.
 */
const ownerArg = 'A creator id (raw or global): only their rows.';
const publicArg = 'true: only public rows; false: only your own private ones.';

const AgentFilter = builder.inputType('AgentFilter', {
  fields: (t) => ({
    owner: t.id({ description: ownerArg }),
    public: t.boolean({ description: publicArg }),
    text: t.string({ description: 'Case-insensitive substring of the name, key or description.' }),
  }),
});
const ModelFilter = builder.inputType('ModelFilter', {
  fields: (t) => ({
    owner: t.id({ description: ownerArg }),
    public: t.boolean({ description: publicArg }),
    text: t.string({ description: 'Case-insensitive substring of the name or trigger text.' }),
    baseModel: t.string({ description: 'Exactly this base model.' }),
  }),
});
const CreationFilter = builder.inputType('CreationFilter', {
  fields: (t) => ({
    owner: t.id({ description: ownerArg }),
    public: t.boolean({ description: publicArg }),
    text: t.string({ description: 'Case-insensitive substring of the name (see searchCreations for meaning).' }),
    agent: t.id({ description: 'An agent id (raw or global): only what it made.' }),
    tool: t.string({ description: 'Exactly this tool key.' }),
  }),
});

builder.queryFields((t) => ({
  agents: t.prismaConnection({
    type: 'Agent',
    cursor: 'id',
    description: 'Agents the viewer may talk to: their own and public ones, newest first; filters narrow it.',
    args: { filter: t.arg({ type: AgentFilter }) },
    extensions: guardedConnection('Agent'),
    resolve: (query, _root, { filter }, ctx) => ctx.services.agents.list(viewerOf(ctx), filter, query),
  }),
  models: t.prismaConnection({
    type: 'Model',
    cursor: 'id',
    description: 'Models the viewer may use: their own and public ones, newest first; filters narrow it.',
    args: { filter: t.arg({ type: ModelFilter }) },
    extensions: guardedConnection('Model'),
    resolve: (query, _root, { filter }, ctx) => ctx.services.models.list(viewerOf(ctx), filter, query),
  }),
  creations: t.prismaConnection({
    type: 'Creation',
    cursor: 'id',
    description: 'The creations feed: public ones and your own, newest first; filters narrow it (searchCreations ranks by meaning).',
    args: { filter: t.arg({ type: CreationFilter }) },
    extensions: guardedConnection('Creation'),
    resolve: (query, _root, { filter }, ctx) => ctx.services.creations.list(viewerOf(ctx), filter, query),
  }),
}));
