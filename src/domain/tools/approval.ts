import { z } from 'zod';
import { type Manna, mannaNumber, mannaOf } from '../core/manna.ts';

/** How long a call waits for its owner's answer when the agent does not say: ten minutes. */
export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 600;
/** The shortest and longest wait an owner may set: long enough to read a notification, at most a week. */
export const APPROVAL_TIMEOUT_BOUNDS = { min: 5, max: 7 * 24 * 3600 } as const;

/**
 * When a call of one tool waits for approval: every time (`always`), or when what it costs
 * (the tool's cost expression on the call's arguments) is above `above` manna.
 */
export const approvalRuleSchema = z.union(
  [z.literal('always'), z.object({ above: z.number().min(0, 'must be at least 0').max(1_000_000_000) }).strict()],
  { error: 'must be "always" or {"above": <an amount of manna>}' },
);
export type ApprovalRule = z.output<typeof approvalRuleSchema>;

/** An agent's approval setting as written: rules by tool key, and how long a call waits for an answer. */
export const toolApprovalSchema = z
  .object({
    tools: z.record(z.string(), approvalRuleSchema),
    timeoutSeconds: z
      .number()
      .int('must be a whole number of seconds')
      .min(APPROVAL_TIMEOUT_BOUNDS.min, `must be at least ${APPROVAL_TIMEOUT_BOUNDS.min} seconds`)
      .max(APPROVAL_TIMEOUT_BOUNDS.max, `must be at most ${APPROVAL_TIMEOUT_BOUNDS.max} seconds (a week)`),
  })
  .partial();
export type ToolApprovalInput = z.output<typeof toolApprovalSchema>;

/** The setting as the rules read it, defaults filled in. */
export interface ToolApproval {
  tools: Record<string, ApprovalRule>;
  timeoutSeconds: number;
}

/** An agent's stored setting (its JSON column, written only through `toolApprovalSchema`), defaults filled in. */
export const toolApprovalOf = (stored: unknown): ToolApproval => {
  const setting = (stored ?? {}) as ToolApprovalInput;
  return { tools: setting.tools ?? {}, timeoutSeconds: setting.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS };
};

/** Whether a call of `tool` costing `cost` must wait for its owner's yes. */
export function needsApproval(setting: ToolApproval, tool: string, cost: Manna): boolean {
  const rule = Object.hasOwn(setting.tools, tool) ? setting.tools[tool] : undefined;
  if (rule === undefined) return false;
  if (rule === 'always') return true;
  // Both sides as the ledger's decimals, so "above 0.5" is exact whatever the float.
  return mannaNumber(cost) > mannaNumber(mannaOf(rule.above));
}
