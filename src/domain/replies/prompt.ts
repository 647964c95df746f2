import type { MessageView } from '../core/events.ts';
import type { ChatMessage } from '../core/chat.ts';
import { estimateTokens, MESSAGE_OVERHEAD_TOKENS } from './tokens.ts';

export interface PromptAgent {
  id: string;
  key: string;
  name: string;
  description: string;
  persona: string;
  greeting: string;
  knowledge: string;
}

export interface PromptInput {
  agent: PromptAgent;
  scenario: string | null;
  /** The other agents taking part, by name. */
  otherAgents: string[];
  /** Display names of everyone who wrote in the session (users and agents), by id. */
  names: Map<string, string>;
  /** The conversation so far, oldest first, up to and including the prompt being answered. */
  history: MessageView[];
  /** Facts the agent remembers about the user it answers. */
  memory: string[];
  contextTokens: number;
  maxCompletionTokens: number;
}

const tokensOf = (m: ChatMessage) => MESSAGE_OVERHEAD_TOKENS + estimateTokens(m.content ?? '');

/** Cuts text to about `tokens` tokens, keeping the start (where the most important part is). */
const cutTo = (text: string, tokens: number) => (estimateTokens(text) <= tokens ? text : `${text.slice(0, Math.max(0, tokens * 4 - 1))}…`);

function systemPrompt(p: PromptInput, knowledgeTokens: number): string {
  const { agent } = p;
  const lines = [`You are ${agent.name} (@${agent.key}), an agent talking with people in a parley session.`];
  if (agent.persona) lines.push('', agent.persona);
  if (agent.description) lines.push('', `About you: ${agent.description}`);
  if (agent.greeting) lines.push('', `How you greet people: ${agent.greeting}`);
  if (agent.knowledge) lines.push('', 'What you know:', cutTo(agent.knowledge, knowledgeTokens));
  if (p.scenario) lines.push('', `The scenario of this session: ${p.scenario}`);
  if (p.otherAgents.length) {
    lines.push(
      '',
      `Other agents in this session: ${p.otherAgents.join(', ')}. Messages from others are prefixed with the speaker's name; answer as yourself only.`,
    );
  }
  if (p.memory.length) lines.push('', 'What you remember about the person you are answering:', ...p.memory.map((f) => `- ${f}`));
  return lines.join('\n');
}

/** How one stored message reads to the agent that is answering. */
function asChatMessage(m: MessageView, p: PromptInput, multipleHumans: boolean): ChatMessage | null {
  const speaker = (m.senderId && p.names.get(m.senderId)) || 'someone';
  const attachments = m.attachments.map((a) => `\n[attachment: ${a}]`).join('');
  switch (m.role) {
    case 'user': {
      const content = `${m.content}${attachments}`;
      return { role: 'user', content: multipleHumans ? `${speaker}: ${content}` : content };
    }
    case 'assistant': {
      if (!m.content) return null;
      // The model should know it was cut off, not take the text for a whole answer.
      const content = m.status === 'interrupted' ? `${m.content} [interrupted]` : m.content;
      return m.senderId === p.agent.id ? { role: 'assistant', content } : { role: 'user', content: `${speaker}: ${content}` };
    }
    case 'eden':
    case 'system':
      return { role: 'system', content: m.content };
    default:
      return null;
  }
}

/**
 * The messages sent to the model: the system prompt (persona, greeting, knowledge, scenario,
 * memory), then as much of the conversation as fits the context window with room for the
 * answer. The oldest messages are dropped first; the newest is always kept (cut if it must be).
 */
export function buildPrompt(p: PromptInput): ChatMessage[] {
  const room = p.contextTokens - p.maxCompletionTokens;
  // The knowledge may be long: it gets at most half of the room, the conversation the rest.
  const system: ChatMessage = { role: 'system', content: systemPrompt(p, Math.floor(room / 2)) };
  let left = room - tokensOf(system);

  const humans = new Set(p.history.filter((m) => m.role === 'user').map((m) => m.senderId));
  const conversation = p.history.map((m) => asChatMessage(m, p, humans.size > 1)).filter((m): m is ChatMessage => m !== null);
  const kept: ChatMessage[] = [];
  for (let i = conversation.length - 1; i >= 0; i--) {
    const message = conversation[i]!;
    const cost = tokensOf(message);
    if (cost <= left) {
      kept.unshift(message);
      left -= cost;
    } else {
      if (kept.length === 0)
        kept.unshift({ ...message, content: cutTo(message.content ?? '', Math.max(left - MESSAGE_OVERHEAD_TOKENS, 1)) } as ChatMessage);
      break;
    }
  }
  return [system, ...kept];
}
