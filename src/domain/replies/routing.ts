export interface RoutableAgent {
  id: string;
  key: string;
  name: string;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether the text addresses the agent: `@key`, or its name standing as words of a sentence
 * (in any case), not inside an address or a longer word.
 */
export function mentions(text: string, agent: RoutableAgent): boolean {
  const key = new RegExp(`(^|[^\\w@])@${escapeRegExp(agent.key)}(?![\\w-])`, 'iu');
  const name = new RegExp(`(^|[\\s,;:!?("'“‘])${escapeRegExp(agent.name)}(?=$|[\\s,;:!?)"'”’]|\\.(\\s|$))`, 'iu');
  return key.test(text) || name.test(text);
}

/**
 * Which of the session's agents (in their order) answer a prompt: those named, else the only
 * one, else those the text mentions, else the first.
 */
export function chooseResponders(agents: RoutableAgent[], named: string[] | undefined, text: string): string[] {
  if (named?.length) return named;
  if (agents.length <= 1) return agents.map((a) => a.id);
  const mentioned = agents.filter((a) => mentions(text, a));
  return (mentioned.length ? mentioned : agents.slice(0, 1)).map((a) => a.id);
}
