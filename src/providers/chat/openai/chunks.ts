import { z } from 'zod';
import { type ChatDelta, ProviderError } from '../../../domain/core/chat.ts';

const text = z.string().nullish();
/**
 * A count of tokens one call used. Far above any model's context window; a larger count is
 * nonsense that would go into the session's counter (a 32-bit integer) and break its saves.
 */
const tokenCount = z.number().int().min(0).max(10_000_000).nullish();
/**
 * What a streamed chunk may hold. Fields we do not read are ignored; a field we read with
 * another type (a number for text, choices that are not a list) ends the reply rather than
 * writing nonsense into it.
 */
const chunkSchema = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: text,
            reasoning_content: text,
            reasoning: text,
            // A model asks for a handful of tools at most; a huge index would make a huge array.
            tool_calls: z
              .array(
                z.object({
                  index: z.number().int().min(0).max(127),
                  id: text,
                  function: z.object({ name: text, arguments: text }).nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: text,
      }),
    )
    .nullish(),
  usage: z.object({ prompt_tokens: tokenCount, completion_tokens: tokenCount }).nullish(),
  error: z.union([z.string(), z.object({ message: text })]).nullish(),
});

/** What a whole (not streamed) completion may hold, read as leniently as a chunk. */
export const completionSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: text }).nullish() })).nullish(),
  error: chunkSchema.shape.error,
});

/** One chunk (one SSE event) may be this long: far above any real one, low enough to bound memory. */
export const MAX_CHUNK_CHARS = 1024 * 1024;

export const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
export const brief = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 200);

export function parseJson(text: string, what: 'chunk' | 'answer'): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ProviderError(`The model provider sent a malformed ${what}`, false, 'malformed');
  }
}

export const reportedError = (error: NonNullable<z.infer<typeof chunkSchema>['error']>) =>
  new ProviderError(
    `The model provider reported an error: ${brief((typeof error === 'string' ? error : error.message) ?? 'unknown')}`,
    false,
    'reported',
  );

/**
 * Model text without NUL characters: PostgreSQL text cannot hold them, and a reply is saved as
 * streamed, so a model that writes one would otherwise show a text that cannot be kept.
 */
const storable = (text: string | null | undefined) => (text?.includes('\u0000') ? text.replaceAll('\u0000', '') : text);

type Chunk = z.infer<typeof chunkSchema>;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isText = (value: unknown) => value === undefined || value === null || typeof value === 'string';

/**
 * The chunk nearly every token comes in (text in its choices; no tool calls, usage or error),
 * recognised by hand: zod's check runs once a token, and was a few per cent of the event loop
 * at 1,000 streams (`bench/README.md`, issue 35). Only a chunk the schema accepts as it stands
 * passes, and is read as it came (the fields read are the schema's); anything else, or in
 * doubt, answers null and goes to the schema, which says what is wrong.
 */
function plainChunk(value: unknown): Chunk | null {
  if (!isRecord(value) || (value.usage !== undefined && value.usage !== null) || (value.error !== undefined && value.error !== null))
    return null;
  const choices = value.choices;
  if (choices === undefined || choices === null) return value as Chunk;
  if (!Array.isArray(choices)) return null;
  for (const choice of choices) {
    if (!isRecord(choice) || !isText(choice.finish_reason)) return null;
    const delta = choice.delta;
    if (delta === undefined || delta === null) continue;
    if (!isRecord(delta) || (delta.tool_calls !== undefined && delta.tool_calls !== null)) return null;
    if (!isText(delta.content) || !isText(delta.reasoning_content) || !isText(delta.reasoning)) return null;
  }
  return value as Chunk;
}

/** A parsed chunk as the schema reads it, or a ProviderError naming the first thing wrong with it. */
function schemaChunk(value: unknown): Chunk {
  const parsed = chunkSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ProviderError(
      `The model provider sent a chunk of an unexpected shape (${issue.path.join('.') || 'chunk'}: ${issue.message})`,
      false,
      'malformed',
    );
  }
  return parsed.data;
}

/**
 * Reads one chunk (the data of one SSE event, not `[DONE]`) into deltas, each handed on as it is
 * read. Returns whether a choice of it said it finished.
 */
export function readChunk(data: string, hand: (delta: ChatDelta) => void): boolean {
  const value = parseJson(data, 'chunk');
  return readDeltas(plainChunk(value) ?? schemaChunk(value), hand);
}

/** `readChunk` with every chunk checked by the schema alone: what the quick check must agree with (its test). */
export function readChunkBySchema(data: string, hand: (delta: ChatDelta) => void): boolean {
  return readDeltas(schemaChunk(parseJson(data, 'chunk')), hand);
}

function readDeltas(chunk: Chunk, hand: (delta: ChatDelta) => void): boolean {
  if (chunk.error) throw reportedError(chunk.error);
  let finished = false;
  for (const choice of chunk.choices ?? []) {
    const delta = choice.delta ?? {};
    const reasoning = storable(delta.reasoning_content ?? delta.reasoning);
    if (reasoning) hand({ type: 'reasoning', text: reasoning });
    const content = storable(delta.content);
    if (content) hand({ type: 'content', text: content });
    for (const call of delta.tool_calls ?? []) {
      hand({
        type: 'tool_call',
        index: call.index,
        id: storable(call.id) ?? undefined,
        name: storable(call.function?.name) ?? undefined,
        arguments: storable(call.function?.arguments) ?? undefined,
      });
    }
    if (choice.finish_reason) finished = true;
  }
  if (chunk.usage)
    hand({ type: 'usage', promptTokens: chunk.usage.prompt_tokens ?? 0, completionTokens: chunk.usage.completion_tokens ?? 0 });
  return finished;
}
