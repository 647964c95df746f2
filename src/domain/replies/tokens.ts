/**
 * A rough token count (about four characters a token in English) for what has no provider
 * report: fitting the conversation into the context window, and the offline responder's usage.
 */
export const estimateTokens = (text: string) => Math.ceil(text.length / 4);

/** Per-message overhead of the chat format (role and separators). */
export const MESSAGE_OVERHEAD_TOKENS = 4;
