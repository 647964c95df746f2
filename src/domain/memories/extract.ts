/** Facts are short: a line a person would jot down about someone. */
export const MAX_FACT_LENGTH = 120;
const PER_EXCHANGE = 3;

const clean = (text: string) =>
  text
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[.,;:!?]+$/, '');

/** Patterns of what people say about themselves, and how the fact reads afterwards. */
const patterns: [RegExp, (m: string) => string][] = [
  [/\bmy name is ([\p{L}][\p{L}'’-]*(?: [\p{Lu}][\p{L}'’-]*)?)/iu, (m) => `Their name is ${m}`],
  [/\bcall me ([\p{L}][\p{L}'’-]*)/iu, (m) => `Likes to be called ${m}`],
  [/\bI live in ([^.!?,;\n]{2,60})/iu, (m) => `Lives in ${m}`],
  [/\bI (?:work as|am working as|'m working as) (?:an? )?([^.!?,;\n]{2,60})/iu, (m) => `Works as ${m}`],
  [/\bI(?:'m| am) working on ([^.!?;\n]{2,80})/iu, (m) => `Is working on ${m}`],
  [/\bI(?:'m| am) allergic to ([^.!?,;\n]{2,60})/iu, (m) => `Is allergic to ${m}`],
  [
    /\bI(?:'m| am) (?:a |an )?(vegetarian|vegan|beginner|student|teacher|designer|illustrator|developer|parent|chef)\b/iu,
    (m) => `Is ${/^[aeiou]/i.test(m) ? 'an' : 'a'} ${m.toLowerCase()}`,
  ],
  [/\bI (?:don't|do not) like ([^.!?;\n]{2,80})/iu, (m) => `Does not like ${m}`],
  [/\bI (?:really )?(?:like|love|enjoy) ([^.!?;\n]{2,80})/iu, (m) => `Likes ${m}`],
  [/\bI prefer ([^.!?;\n]{2,80})/iu, (m) => `Prefers ${m}`],
];

/**
 * Offline, facts come from what the user says about themselves ("my name is…", "I live in…",
 * "I prefer…"), by rule: a plain summarizer, never a guess from the agent's side.
 */
export function factsByRule(userText: string): string[] {
  const facts: string[] = [];
  // Sentences, and the clauses of "… and I …" joined in one.
  for (const sentence of userText.split(/(?<=[.!?])\s+|\n+|,?\s+(?:and|but)\s+(?=I\b)/)) {
    for (const [pattern, fact] of patterns) {
      const match = pattern.exec(sentence);
      if (match) facts.push(clean(fact(clean(match[1]!))));
    }
  }
  return [...new Set(facts)].filter((f) => f.length <= MAX_FACT_LENGTH).slice(0, PER_EXCHANGE);
}

export const EXTRACTION_INSTRUCTION =
  'From this exchange, list what is worth remembering about the user for later conversations (their name, preferences, projects, constraints), ' +
  `one short fact per line, at most ${PER_EXCHANGE}, each under ${MAX_FACT_LENGTH} characters, written about them ("Prefers warm colours"). ` +
  'Answer NONE if there is nothing.';

/** A model's answer to the extraction instruction, as facts. */
export function factsFromAnswer(answer: string): string[] {
  return answer
    .split('\n')
    .map((line) => clean(line.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, '')))
    .filter((line) => line && !/^none\b/i.test(line) && line.length <= MAX_FACT_LENGTH)
    .slice(0, PER_EXCHANGE);
}

/** The same fact said twice, whatever its case, spacing or punctuation, has the same key. */
export const factKey = (fact: string) =>
  fact
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
