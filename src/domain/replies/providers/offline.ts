import { estimateTokens, MESSAGE_OVERHEAD_TOKENS } from '../tokens.ts';
import type { AgentProfile, ChatDelta, ChatProvider, ChatRequest } from '../../core/chat.ts';

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1).trimEnd()}…` : text);

/** The reply of an agent when no model is configured: true to its profile, and open about it. */
export function offlineReply(agent: AgentProfile, prompt: string | null): string {
  const parts = [
    `I'm ${agent.name}, answering offline: this parley server has no language model configured (LLM_BASE_URL is not set), so all I can offer is what my profile says.`,
  ];
  if (agent.description) parts.push(`About me: ${clip(agent.description, 400)}`);
  if (agent.greeting) parts.push(clip(agent.greeting, 300));
  if (prompt)
    parts.push(
      `You wrote: "${clip(prompt.replace(/\s+/g, ' ').trim(), 200)}". I can't think about it without a model, but it is saved in this session for when one is connected.`,
    );
  if (agent.knowledge) parts.push(`What I know: ${clip(agent.knowledge, 300)}`);
  if (agent.suggestions.length)
    parts.push(`Things you can ask me: ${agent.suggestions.map((s) => `"${clip(s.prompt, 120)}"`).join(', ')}.`);
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

/** Asking for a picture, in so many words. */
const wantsPicture =
  /\b(draw|paint|sketch|illustrate|render)\b|\b(make|create|generate|design)\b[^.?!]{0,40}\b(image|picture|poster|illustration|drawing|painting|cover|portrait|logo)\b/i;

/** An offered tool that paints a picture from a prompt, if any. */
const pictureTool = (request: ChatRequest) =>
  request.tools.find(
    (t) => /image/i.test(t.function.description) && 'prompt' in ((t.function.parameters.properties as Record<string, unknown>) ?? {}),
  );

/** What a tool said, told plainly: the links of the images it made, or why it did not. */
function toolReport(agent: AgentProfile, content: string): string {
  let result: { images?: { url: string }[]; error?: string } = {};
  try {
    result = JSON.parse(content) as typeof result;
  } catch {
    // an unreadable result is reported as having no images
  }
  const lead = `I'm ${agent.name}, answering offline (no language model is configured), but I could run a tool for you.`;
  if (result.error) return `${lead} It did not work: ${result.error}`;
  const links = result.images?.map((i) => i.url) ?? [];
  return links.length ? `${lead} Here is what it made: ${links.join(' ')}` : `${lead} It finished without an image.`;
}

/**
 * The built-in responder, used when LLM_BASE_URL is not set. It answers from the agent's profile
 * and says it is offline; asked in so many words for a picture, it calls the agent's image tool
 * with the user's own words as the prompt, and then links what the tool made.
 */
export function offlineProvider(tokenDelayMs: number): ChatProvider {
  const provider: ChatProvider = {
    description: 'built-in offline responder (no LLM_BASE_URL: agents answer from their profile and say so)',
    async complete(request, signal) {
      let text = '';
      await provider.stream(request, signal, (delta) => {
        if (delta.type === 'content') text += delta.text;
      });
      return text;
    },
    async stream(request: ChatRequest, signal: AbortSignal, onDelta: (delta: ChatDelta) => void) {
      const last = request.messages.at(-1);
      const prompt = [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? null;
      const tool = pictureTool(request);
      if (last?.role === 'user' && tool && typeof prompt === 'string' && wantsPicture.test(prompt)) {
        // One picture, as asked, where the tool could make several.
        const one = 'n_samples' in (tool.function.parameters.properties as Record<string, unknown>) ? { n_samples: 1 } : {};
        onDelta({
          type: 'tool_call',
          index: 0,
          id: 'offline_call_0',
          name: tool.function.name,
          arguments: JSON.stringify({ prompt: prompt.slice(0, 1000), ...one }),
        });
        onDelta({ type: 'usage', promptTokens: estimateTokens(prompt), completionTokens: 10 });
        return;
      }
      if (request.reasoningEffort) {
        for (const text of pieces('No language model is configured, so this answer is composed from the agent profile. ')) {
          await sleep(tokenDelayMs, signal);
          onDelta({ type: 'reasoning', text });
        }
      }
      const reply =
        last?.role === 'tool'
          ? toolReport(request.agent, last.content)
          : offlineReply(request.agent, typeof prompt === 'string' ? prompt : null);
      for (const text of pieces(reply)) {
        await sleep(tokenDelayMs, signal);
        onDelta({ type: 'content', text });
      }
      const promptTokens = request.messages.reduce(
        (n, m) => n + MESSAGE_OVERHEAD_TOKENS + estimateTokens(typeof m.content === 'string' ? m.content : ''),
        0,
      );
      onDelta({ type: 'usage', promptTokens, completionTokens: estimateTokens(reply) });
    },
  };
  return provider;
}
