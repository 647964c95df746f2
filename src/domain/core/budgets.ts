/** The original service's texts; clients match on them. */
export const BUDGET_EXCEEDED = {
  tokens: 'Session token budget exceeded',
  manna: 'Session manna budget exceeded',
  turns: 'Session turn budget exceeded',
} as const;
export type Budget = keyof typeof BUDGET_EXCEEDED;
