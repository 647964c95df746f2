import { z } from 'zod';
import type { MediaLinks } from '../domain/core/media-links.ts';
import type { Viewer } from '../domain/core/viewer.ts';
import { canReadTask, type TaskRead } from '../domain/tasks/index.ts';
import type { ToolRegistry } from '../domain/tools/index.ts';
import type { Creation } from '../generated/prisma/client.ts';
import { type CreatorRow, restCreatorRefSchema, toRestCreatorRef } from './creators.ts';
import { restTaskInclude, restTaskSchema, toRestTask } from './task-shapes.ts';

/** The original's kinds of output (the SDK's `ToolOutputTypeV2`). */
const outputTypes = ['image', 'video', 'audio', 'text', 'model', 'lora'] as const;
type OutputType = (typeof outputTypes)[number];

const creatorSelect = { id: true, username: true, userImage: true, type: true, createdAt: true, updatedAt: true } as const;
/** What REST reads with a creation: its author, populated, and the task that made it, as REST shows a task. */
export const restCreationInclude = { user: { select: creatorSelect }, task: { include: restTaskInclude } } as const;
export type RestCreationRow = Creation & { user: CreatorRow; task: TaskRead<{ include: typeof restTaskInclude }> | null };

const restMediaAttributesSchema = z
  .object({
    type: z.enum(outputTypes),
    mimeType: z.string(),
    width: z.number().optional(),
    height: z.number().optional(),
    aspectRatio: z.number().optional(),
    duration: z.number().optional(),
  })
  .meta({ id: 'MediaAttributes' });

const restMediaOutputSchema = z.object({
  url: z.string(),
  thumbnail: z.string().nullable(),
  filename: z.string(),
  mediaAttributes: restMediaAttributesSchema.optional(),
});

/**
 * The stand-in `task` of a creation with no task the viewer may read (made by none, an upload or
 * an import, or by someone else's private task): the SDK's `CreationV2` requires one, so it is
 * told from the creation itself, under the creation's id, revealing nothing of a hidden task. It
 * has no arguments: a tool's stored ones (`resolution: "1024x1024"`) are not the SDK's `TaskV2Args`.
 */
const standInTaskSchema = z
  .object({
    _id: z.string().meta({ description: "The creation's own id: there is no task of it to show" }),
    user: restCreatorRefSchema,
    tool: z.string(),
    output_type: z.enum(outputTypes),
    args: z.object({}).strict().meta({ description: "None: the creation's own are its `args`" }),
    status: z.literal('completed'),
    error: z.null(),
    result: z.array(z.object({ output: z.array(restMediaOutputSchema) })),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'CreationStandInTask' });

/**
 * A creation as the original's clients read it (the SDK's `CreationV2`): populated `user` and
 * `requester`, and `task`: the task that made it as `GET /v2/tasks/{id}` shows it, when the viewer
 * may read that task (theirs, or public), else a stand-in told from the creation.
 */
export const restCreationSchema = z
  .object({
    _id: z.string().meta({ description: 'The same as id, as the original named it' }),
    id: z.string(),
    name: z.string(),
    ...restMediaOutputSchema.shape,
    tool: z.string(),
    output_type: z.enum(outputTypes).meta({ description: "The tool's kind of output (from its file's type when the tool is unknown)" }),
    args: z.unknown(),
    user: restCreatorRefSchema,
    requester: restCreatorRefSchema.meta({ description: 'Who asked for it: the same as user' }),
    agent: z.string().nullable().meta({ description: 'The id of the agent that made it, if any' }),
    task: z.union([restTaskSchema, standInTaskSchema]),
    likeCount: z.number().int(),
    public: z.boolean(),
    deleted: z.boolean(),
    createdAt: z.date(),
    updatedAt: z.date(),
  })
  .meta({ id: 'CreationDocument' });

const kindOfMime = (mime: unknown): OutputType | undefined => {
  const prefix = typeof mime === 'string' ? mime.split('/')[0] : undefined;
  return prefix === 'image' || prefix === 'video' || prefix === 'audio' || prefix === 'text' ? prefix : undefined;
};

/** The file's name: the one stored, else the last part of its URL (the SDK requires one). */
const fileNameOf = (c: Pick<Creation, 'filename' | 'url'>) =>
  c.filename ?? decodeURIComponent(new URL(c.url, 'http://x').pathname.split('/').pop() || 'file');

export function toRestCreation(
  viewer: Viewer,
  c: RestCreationRow,
  tools: ToolRegistry,
  links: MediaLinks,
): z.input<typeof restCreationSchema> {
  const stored = (c.mediaAttributes ?? {}) as Record<string, unknown>;
  const outputType = tools.get(c.tool)?.output_type ?? kindOfMime(stored.mimeType) ?? 'image';
  const numeric = (key: string) => (typeof stored[key] === 'number' ? { [key]: stored[key] as number } : {});
  const media = {
    url: links.absolute(c.url),
    thumbnail: links.absolute(c.thumbnail),
    filename: fileNameOf(c),
    // The SDK requires a type and a MIME type of any attributes given: none are given without a known MIME type.
    ...(typeof stored.mimeType === 'string'
      ? {
          mediaAttributes: {
            type: kindOfMime(stored.mimeType) ?? outputType,
            mimeType: stored.mimeType,
            ...numeric('width'),
            ...numeric('height'),
            ...numeric('aspectRatio'),
            ...numeric('duration'),
          },
        }
      : {}),
  };
  const user = toRestCreatorRef(c.user);
  return {
    _id: c.id,
    id: c.id,
    name: c.name,
    ...media,
    tool: c.tool,
    output_type: outputType,
    args: c.args,
    user,
    requester: user,
    agent: c.agentId,
    task:
      c.task && canReadTask(viewer, c.task)
        ? toRestTask(viewer, tools, c.task, links)
        : {
            _id: c.id,
            user,
            tool: c.tool,
            output_type: outputType,
            args: {},
            status: 'completed',
            error: null,
            result: [{ output: [media] }],
            createdAt: c.createdAt,
            updatedAt: c.updatedAt,
          },
    likeCount: c.likeCount,
    public: c.public,
    deleted: c.deleted,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  };
}
