import { isDatabaseUnavailable } from '../core/stores/prisma-errors.ts';
import type { ChatRequest } from '../core/chat.ts';
import type { ReplyJob, ReplyRuntime } from './runtime.ts';

/** Session titles: 2 to 5 words, generated after the first exchange. */
export const TITLE_FALLBACK_LENGTH = 30;

/** What every title falls back to: the first 30 characters of the first message. */
export const fallbackTitle = (firstMessage: string) =>
  firstMessage.replace(/\s+/g, ' ').trim().slice(0, TITLE_FALLBACK_LENGTH).trim() || 'New session';

const words = (text: string) => text.match(/[\p{L}\p{N}][\p{L}\p{N}'’-]*/gu) ?? [];

/** A model's answer to "give a title" made into one, or null when it is not 2–5 words. */
export function cleanModelTitle(answer: string): string | null {
  const line =
    answer
      .split('\n')
      .find((l) => l.trim())
      ?.replace(/^\s*(title\s*:\s*)/i, '') ?? '';
  const found = words(line);
  return found.length >= 2 && found.length <= 5 ? found.join(' ') : null;
}

const filler = new Set(
  "a an and are as at be but by can could do does for from have how i i'm in is it its me my of on or please so that the their there this to us was we what when where which who why will with would you your hey hi hello".split(
    ' ',
  ),
);

/** Offline: the first few meaningful words of the first message, capitalised. */
export function titleFromText(firstMessage: string): string {
  const picked = words(firstMessage)
    .filter((w) => !filler.has(w.toLowerCase()))
    .slice(0, 5);
  if (picked.length < 2) return fallbackTitle(firstMessage);
  return picked.map((w) => w[0]!.toUpperCase() + w.slice(1)).join(' ');
}

export const TITLE_INSTRUCTION =
  'Give this conversation a title of 2 to 5 words. Answer with the title only, without quotes or punctuation.';

/**
 * Names a session after its first exchange: by a short model call, or from the prompt's words
 * offline; a call that fails falls back to the prompt's start. Told to the session's watchers
 * if this title was the one saved. A title is a nicety: one that cannot be saved (the database
 * went away) is left out.
 */
export async function nameSession(
  rt: Pick<ReplyRuntime, 'provider' | 'offline' | 'llm' | 'writer' | 'emit'>,
  job: Pick<ReplyJob, 'sessionId'>,
  scenario: string | null,
  prompt: string,
  answer: string | undefined,
  signal: AbortSignal,
) {
  let text = titleFromText(prompt);
  if (!rt.offline && answer) {
    try {
      const request: ChatRequest = {
        model: rt.llm.models.default,
        messages: [
          { role: 'system', content: TITLE_INSTRUCTION },
          { role: 'user', content: `User: ${prompt.slice(0, 2000)}\n\nAgent: ${answer.slice(0, 2000)}` },
        ],
        tools: [],
        maxTokens: 24,
        reasoningEffort: null,
        agent: { name: '', key: '', description: '', greeting: '', knowledge: '', suggestions: [] },
      };
      text = cleanModelTitle(await rt.provider.complete(request, signal)) ?? fallbackTitle(prompt);
    } catch {
      text = fallbackTitle(prompt);
    }
  }
  try {
    if (await rt.writer.title(job.sessionId, text)) await rt.emit(job.sessionId, { type: 'session_updated', title: text, scenario });
  } catch (e) {
    if (!isDatabaseUnavailable(e)) throw e;
  }
}
