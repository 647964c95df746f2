import { estimateTokens, MESSAGE_OVERHEAD_TOKENS } from '../tokens.ts';
import type { AgentProfile, ChatDelta, ChatProvider, ChatRequest } from './types.ts';

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1).trimEnd()}…` : text);

/** The reply of an agent when no model is configured: true to its profile, and open about it. */
export function offlineReply(agent: AgentProfile, prompt: string | null): string {
  const parts = [
    `I'm ${agent.name}, answering offline: this parley server has no language model configured (LLM_BASE_URL is not set), so all I can offer is what my profile says.`,
  ];
  if (agent.description) parts.push(`About me: ${clip(agent.description, 400)}`);
  if (agent.greeting) parts.push(clip(agent.greeting, 300));
  if (prompt) parts.push(`You wrote: "${clip(prompt.replace(/\s+/g, ' ').trim(), 200)}". I can't think about it without a model, but it is saved in this session for when one is connected.`);
  if (agent.knowledge) parts.push(`What I know: ${clip(agent.knowledge, 300)}`);
  if (agent.suggestions.length) parts.push(`Things you can ask me: ${agent.suggestions.map((s) => `"${clip(s.prompt, 120)}"`).join(', ')}.`);
  return parts.join(' ');
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const abort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal.addEventListener('abort', abort, { once: true });
  });

/** Words with their following space, so the streamed pieces join back into the exact text. */
const pieces = (text: string) => text.match(/\S+\s*/g) ?? [];

/** The built-in responder, used when LLM_BASE_URL is not set. */
export function offlineProvider(tokenDelayMs: number): ChatProvider {
  return {
    description: 'built-in offline responder (no LLM_BASE_URL: agents answer from their profile and say so)',
    async *stream(request: ChatRequest, signal: AbortSignal): AsyncGenerator<ChatDelta> {
      const prompt = [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? null;
      if (request.reasoningEffort) {
        for (const text of pieces('No language model is configured, so this answer is composed from the agent profile. ')) {
          await sleep(tokenDelayMs, signal);
          yield { type: 'reasoning', text };
        }
      }
      const reply = offlineReply(request.agent, typeof prompt === 'string' ? prompt : null);
      for (const text of pieces(reply)) {
        await sleep(tokenDelayMs, signal);
        yield { type: 'content', text };
      }
      const promptTokens = request.messages.reduce((n, m) => n + MESSAGE_OVERHEAD_TOKENS + estimateTokens(typeof m.content === 'string' ? m.content : ''), 0);
      yield { type: 'usage', promptTokens, completionTokens: estimateTokens(reply) };
    },
  };
}
