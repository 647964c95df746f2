import { describe, expect, it } from 'vitest';
import { buildPrompt, type PromptInput } from '../../src/domain/replies/prompt.ts';
import { chooseResponders, mentions } from '../../src/domain/replies/routing.ts';
import { cleanModelTitle, fallbackTitle, titleFromText } from '../../src/domain/replies/title.ts';
import type { MessageView } from '../../src/domain/core/events.ts';

let ordinal = 0;
const message = (role: MessageView['role'], content: string, senderId: string | null): MessageView => ({
  id: `m${++ordinal}`,
  sessionId: 's',
  ordinal,
  role,
  senderId,
  promptId: null,
  status: 'complete',
  content,
  attachments: [],
  thought: null,
  error: null,
  promptTokens: 0,
  completionTokens: 0,
  toolCalls: [],
  reactions: {},
  createdAt: new Date().toISOString(),
});

const input = (history: MessageView[], overrides: Partial<PromptInput> = {}): PromptInput => ({
  agent: {
    id: 'muse',
    key: 'muse',
    name: 'Muse',
    description: 'An art director.',
    persona: 'You are warm.',
    greeting: 'Hi!',
    knowledge: 'Riso inks.',
  },
  scenario: 'A zine fair',
  otherAgents: [],
  names: new Map([
    ['alice', 'alice'],
    ['bob', 'bob'],
    ['muse', 'Muse'],
    ['remy', 'Remy'],
  ]),
  history,
  memory: [],
  contextTokens: 4000,
  maxCompletionTokens: 500,
  ...overrides,
});

describe('the prompt a model receives', () => {
  it('starts with the agent, its knowledge and the scenario, then the conversation in order', () => {
    const messages = buildPrompt(
      input([
        message('eden', 'Muse joined the session', null),
        message('user', 'Hello', 'alice'),
        message('assistant', 'Hi alice', 'muse'),
        message('user', 'Plan a cover', 'alice'),
      ]),
    );
    expect(messages[0]!.role).toBe('system');
    for (const part of ['Muse (@muse)', 'You are warm.', 'An art director.', 'Hi!', 'Riso inks.', 'A zine fair'])
      expect(messages[0]!.content).toContain(part);
    expect(messages.slice(1)).toEqual([
      { role: 'system', content: 'Muse joined the session' },
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi alice' },
      { role: 'user', content: 'Plan a cover' },
    ]);
  });

  it('names speakers when several people and agents talk, and shows others\u2019 replies as theirs', () => {
    const messages = buildPrompt(
      input([message('user', 'Hi all', 'alice'), message('assistant', 'Bonjour', 'remy'), message('user', 'And me', 'bob')], {
        otherAgents: ['Remy'],
        memory: ['Prefers teal'],
      }),
    );
    expect(messages[0]!.content).toContain('Other agents in this session: Remy');
    expect(messages[0]!.content).toContain('- Prefers teal');
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: 'alice: Hi all' },
      { role: 'user', content: 'Remy: Bonjour' },
      { role: 'user', content: 'bob: And me' },
    ]);
  });

  it('drops the oldest messages to fit the context window, keeping room for the answer', () => {
    const history = Array.from({ length: 100 }, (_, i) =>
      message(i % 2 ? 'assistant' : 'user', `message ${i} ${'x'.repeat(200)}`, i % 2 ? 'muse' : 'alice'),
    );
    const messages = buildPrompt(input(history, { contextTokens: 2000, maxCompletionTokens: 500 }));
    const total = messages.reduce((n, m) => n + 4 + Math.ceil((m.content ?? '').length / 4), 0);
    expect(total).toBeLessThanOrEqual(1500);
    expect(messages.at(-1)!.content).toContain('message 99 ');
    const kept = messages.slice(1).map((m) => Number(/message (\d+)/.exec(m.content!)![1]));
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 100 - kept.length + i));
    expect(kept.length).toBeGreaterThan(5);
    expect(kept.length).toBeLessThan(100);
  });

  it('cuts a single message too long for the window instead of dropping it, and long knowledge too', () => {
    const messages = buildPrompt(
      input([message('user', 'y'.repeat(100_000), 'alice')], {
        contextTokens: 3000,
        maxCompletionTokens: 500,
        agent: { ...input([]).agent, knowledge: 'k'.repeat(50_000) },
      }),
    );
    expect(messages).toHaveLength(2);
    expect(messages[0]!.content!.length).toBeLessThan(6_000);
    expect(messages[1]!.content!.length).toBeGreaterThan(100);
    expect(messages[1]!.content!.length).toBeLessThan(10_000);
  });
});

describe('who answers', () => {
  const agents = [
    { id: 'a', key: 'muse', name: 'Muse' },
    { id: 'b', key: 'chef-remy', name: 'Chef Remy' },
  ];
  it('the named agents, else the only one, else those mentioned, else the first', () => {
    expect(chooseResponders(agents, ['b'], 'hi Muse')).toEqual(['b']);
    expect(chooseResponders(agents.slice(0, 1), undefined, 'anyone')).toEqual(['a']);
    expect(chooseResponders(agents, undefined, 'what do you think, chef remy?')).toEqual(['b']);
    expect(chooseResponders(agents, undefined, '@chef-remy and @MUSE, ideas?')).toEqual(['a', 'b']);
    expect(chooseResponders(agents, undefined, 'amused by this')).toEqual(['a']);
    expect(chooseResponders(agents, undefined, 'no names here')).toEqual(['a']);
  });
  it('matches whole words and @handles only', () => {
    expect(mentions('amused', agents[0]!)).toBe(false);
    expect(mentions('Muse, please', agents[0]!)).toBe(true);
    expect(mentions('mail me@muse.example', agents[0]!)).toBe(false);
    expect(mentions('@chef-remyx', agents[1]!)).toBe(false);
  });
});

describe('session titles', () => {
  it('takes a 2\u20135 word answer from the model, and refuses anything else', () => {
    expect(cleanModelTitle('"Riso Zine Cover"')).toBe('Riso Zine Cover');
    expect(cleanModelTitle('Title: Night market poster.')).toBe('Night market poster');
    expect(cleanModelTitle('Hmm')).toBeNull();
    expect(cleanModelTitle('one two three four five six')).toBeNull();
  });
  it('offline: the first meaningful words; fallback: the first 30 characters', () => {
    expect(titleFromText('Hello! Could you help me plan a zine cover for May?')).toBe('Help Plan Zine Cover May');
    expect(titleFromText('hi')).toBe('hi');
    expect(fallbackTitle('  What colours would suit a night market poster?  ')).toBe('What colours would suit a nigh');
  });
});
