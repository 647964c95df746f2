/**
 * The reactions a message can get: the original's three names, and a fixed set of emoji. A
 * closed set keeps what one message can hold (and every event about it) small.
 */
export const REACTION_NAMES = ['thumbs_up', 'thumbs_down', 'pin'] as const;
export const REACTION_EMOJI = [
  '👍',
  '👎',
  '❤️',
  '😂',
  '😮',
  '😢',
  '😡',
  '🎉',
  '🔥',
  '👏',
  '🙏',
  '🤔',
  '👀',
  '✅',
  '❌',
  '⭐',
  '💯',
  '🚀',
  '😍',
  '🙌',
  '💡',
  '📌',
  '🤝',
  '😊',
] as const;
export const REACTIONS: readonly string[] = [...REACTION_NAMES, ...REACTION_EMOJI];

/** `thumbs_up` and `thumbs_down` exclude each other; other reactions combine freely. */
export const EXCLUSIVE = new Map([
  ['thumbs_up', 'thumbs_down'],
  ['thumbs_down', 'thumbs_up'],
]);
