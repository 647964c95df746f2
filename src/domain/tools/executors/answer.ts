import { z } from 'zod';
import { urlField } from '../../core/validation.ts';
import { newId } from '../../core/ids.ts';
import { ToolError, type ToolOutput, type ToolRun } from './types.ts';

/** What a tool service answers: a result for the model, and media it made (by URL). */
const answerSchema = z.object({
  result: z.unknown().optional(),
  media: z
    .array(
      z.object({
        url: urlField,
        thumbnail: urlField.optional(),
        name: z.string().max(200).optional(),
        mimeType: z.string().max(100),
        width: z.number().int().positive().optional(),
        height: z.number().int().positive().optional(),
        duration: z.number().positive().optional(),
      }),
    )
    .max(16)
    .optional(),
});

/** A line of a streamed answer before its last: how far the tool is. */
const progressSchema = z.object({ progress: z.number().min(0).max(1), message: z.string().max(500).optional() });

/** The longest line a streamed answer may send. */
const MAX_LINE = 1024 * 1024;

/** A tool service's failure; `retry` says whether another attempt may fare better (a 5xx, not a bad answer). */
export class ToolServiceError extends ToolError {
  constructor(
    message: string,
    readonly retry: boolean,
  ) {
    super(message);
  }
}

/**
 * The answer: one JSON document, or (`application/x-ndjson`) lines of `{progress, message}` as
 * the tool goes, each passed on to `progress`, then the answer itself as the last line. Read the
 * same from a service over HTTP (`src/executors/http.ts`) and from the demo tool in process
 * (`countdown.ts`): the protocol of docs/tasks.md, "A tool service".
 */
export async function readAnswer(
  response: Response,
  progress: ((fraction: number, message?: string) => void) | undefined,
): Promise<unknown> {
  if (!/^application\/(x-)?ndjson/.test(response.headers.get('content-type') ?? '')) return response.json().catch(() => undefined);
  let last: unknown;
  let buffered = '';
  const decoder = new TextDecoder();
  const take = (line: string) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new ToolServiceError('The tool service sent a line that is not JSON', false);
    }
    const step = progressSchema.safeParse(value);
    const isAnswer = typeof value === 'object' && value !== null && ('result' in value || 'media' in value);
    if (step.success && !isAnswer) progress?.(step.data.progress, step.data.message);
    else last = value;
  };
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    if (buffered.length > MAX_LINE) throw new ToolServiceError('The tool service sent a line over 1 MiB', false);
    for (const line of lines) take(line);
  }
  take(buffered + decoder.decode());
  return last;
}

/** A tool service's answer (`readAnswer`) as the run's output: its result, and its media as creations to be. */
export function toolOutput(answer: unknown, { tool, args }: Pick<ToolRun, 'tool' | 'args'>): ToolOutput {
  const parsed = answerSchema.safeParse(answer);
  if (!parsed.success) throw new ToolServiceError('The tool service sent an answer that is not {result, media}', false);
  const media = (parsed.data.media ?? []).map((m) => ({
    id: newId(),
    name: m.name ?? String(args.prompt ?? tool.name).slice(0, 100),
    url: m.url,
    thumbnail: m.thumbnail ?? null,
    filename: null,
    mediaAttributes: {
      mimeType: m.mimeType,
      ...(m.width && m.height ? { width: m.width, height: m.height, aspectRatio: Number((m.width / m.height).toFixed(4)) } : {}),
      ...(m.duration ? { duration: m.duration } : {}),
    },
  }));
  return { result: parsed.data.result ?? null, media };
}
