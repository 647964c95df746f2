import type { InboundMessage } from './ports.ts';

/**
 * What a platform hands over is a stranger's: it is made fit to keep before it is recorded, or
 * recorded as skipped with why, so that no message can stop the ones after it (the cursor moves
 * past it either way).
 */

/** A message as it is recorded: as written (made storable), or skipped, unanswered, with the reason. */
export type Recordable = InboundMessage & { skipped?: string };

export const SKIPPED = {
  empty: 'It held no text once made storable',
  refused: 'The database refused to record it',
} as const;

const TITLE_MAX = 128;
const NAME_MAX = 64;

/** PostgreSQL's text holds anything but NUL (U+0000), which it refuses in a whole statement. */
const withoutNul = (text: string) => text.replaceAll('\u0000', '');

/** A chat's title or a person's name as it is shown: one line, no control characters, bounded. */
const shown = (text: string, max: number, otherwise: string) =>
  text
    .replace(/\p{Cc}/gu, '')
    .trim()
    .slice(0, max) || otherwise;

/** The message made storable, or marked skipped when nothing fit to answer is left of it. */
export function recordable(message: InboundMessage): Recordable {
  const text = withoutNul(message.text);
  const made: InboundMessage = {
    ...message,
    conversation: { ...message.conversation, title: shown(message.conversation.title, TITLE_MAX, 'Untitled chat') },
    sender: { ...message.sender, name: shown(message.sender.name, NAME_MAX, 'Someone') },
    text,
  };
  return text.trim() ? made : { ...made, skipped: SKIPPED.empty };
}
