// A cost is kept as the ledger's exact decimal (core/manna.ts): compared, charged and shown
// without a float's drift.
import { type Manna, mannaOf } from '../core/manna.ts';
import { evaluateCost, parseCost, type CostExpr } from './cost.ts';
import type { ToolDefinition } from './definition.ts';

// Keyed by the definition, not its key: apps in one process may define a tool of the same key
// with another cost.
const parsed = new WeakMap<ToolDefinition, CostExpr>();

/**
 * What a call costs, in manna: the tool's cost expression over the call's arguments (numbers
 * only; parsed once per tool, evaluated without `eval`), kept to the ledger's four decimals.
 */
export function costOf(tool: ToolDefinition, args: Record<string, unknown>): Manna {
  let expr = parsed.get(tool);
  if (!expr) parsed.set(tool, (expr = parseCost(tool.cost_estimate)));
  const numbers = Object.fromEntries(Object.entries(args).filter((e): e is [string, number] => typeof e[1] === 'number'));
  const value = evaluateCost(expr, numbers);
  if (!Number.isFinite(value) || value < 0) throw new Error(`the cost of ${tool.key} comes to ${value} for these arguments`);
  return mannaOf(value);
}
