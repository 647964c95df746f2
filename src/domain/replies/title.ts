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
