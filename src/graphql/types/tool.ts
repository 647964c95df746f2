import type { ToolDefinition } from '../../domain/tools/index.ts';
import { builder } from '../builder.ts';
import { viewerOf } from '../context.ts';
import { nodeInterfaces } from './node.ts';

export const Tool = builder.objectRef<ToolDefinition>('Tool').implement({
  description: 'A generator agents can run, from the tool registry.',
  interfaces: nodeInterfaces,
  fields: (t) => ({
    id: t.globalID({ description: 'Global id; the raw form is `key`.', resolve: (tool) => ({ type: 'Tool', id: tool.key }) }),
    key: t.exposeString('key'),
    name: t.exposeString('name'),
    description: t.exposeString('description'),
    outputType: t.exposeString('output_type'),
    active: t.exposeBoolean('active'),
    costEstimate: t.exposeString('cost_estimate', { description: 'Arithmetic over the arguments, in manna.' }),
    parameters: t.field({ type: 'JSON', resolve: (tool) => tool.parameters }),
    resolutions: t.exposeStringList('resolutions'),
    thumbnail: t.exposeString('thumbnail', { nullable: true }),
    order: t.exposeInt('order'),
    baseModel: t.exposeString('base_model', { nullable: true }),
  }),
});

builder.queryField('tools', (t) =>
  t.field({
    type: [Tool],
    description: 'Active tools, in their display order.',
    resolve: (_root, _args, ctx) => {
      viewerOf(ctx);
      return ctx.services.tools.listAvailable();
    },
  }),
);
