import type { Tool } from '../policy/index.js';
import type { UnknownRule } from '../store/index.js';

/**
 * What a tool allows after an attempt whose outcome is unknown (docs/design.md §3 "Unknown is
 * dangerous"): a retry at once only under a declared destination idempotency guarantee
 * (`idempotency.honored: true`); otherwise a reconciliation lookup first when the tool declares
 * one; otherwise an operator's approval of that very retry. Backoff never makes it safe.
 */
export function unknownRuleOf(tool: Tool): UnknownRule {
  if (tool.idempotency?.honored === true) return 'honored';
  if (tool.reconcile !== null) return 'reconcile';
  return 'hold';
}

/** The unknown rule of every tool of a policy set, by tool id (crash recovery needs them). */
export function unknownRules(tools: readonly Tool[]): Record<string, UnknownRule> {
  const rules: Record<string, UnknownRule> = {};
  for (const tool of tools) rules[tool.id] = unknownRuleOf(tool);
  return rules;
}
