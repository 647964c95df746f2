import type { Executor } from './types.ts';

/** What a detailed prompt for each kind of tool usually says that a short one leaves out. */
const additions: Record<string, string[]> = {
  image: ['detailed', 'balanced composition', 'soft natural light', 'rich colour', 'sharp focus'],
  video: ['smooth camera motion', 'cinematic lighting', 'steady framing', 'natural movement'],
  music: ['clear mix', 'steady tempo', 'warm tone', 'gentle dynamics'],
};

/**
 * Expands a short prompt for the image, video or music tools: the user's words first, then the
 * qualities such prompts usually name that it does not already say, within `max_tokens`. Done
 * by rule, not by a model, so it works offline and says so.
 */
export const textExecutor: Executor = async ({ args }) => {
  const prompt = String(args.prompt ?? '').trim();
  const target = typeof args.target === 'string' && Object.hasOwn(additions, args.target) ? args.target : 'image';
  const limit = (typeof args.max_tokens === 'number' ? args.max_tokens : 200) * 4;
  const said = prompt.toLowerCase();
  let text = prompt;
  for (const quality of additions[target]!) {
    if (said.includes(quality.split(' ').at(-1)!)) continue;
    const longer = `${text}, ${quality}`;
    if (longer.length > limit) break;
    text = longer;
  }
  return { result: { prompt: text, target, note: 'Expanded by rule, offline.' } };
};
