import { ANSWER_CONDITION_FIELDS } from './answer-conditions.js';
import { GRAPHQL_FIELDS, MATCH_FIELDS } from './compile-match.js';
import { FINGERPRINT_FIELDS, RETRY_FIELDS, TOOL_FIELDS, VERDICT_FIELDS } from './compile-tool.js';
import { EGRESS_FIELDS } from './egress-section.js';
import { IDEMPOTENCY_FIELDS } from './idempotency-section.js';
import { LOOP_BREAKER_FIELDS, TOP_FIELDS } from './parse-policy-file.js';
import {
  EXAMPLE_EXPECT_FIELDS,
  EXAMPLE_FIELDS,
  EXAMPLE_REQUEST_FIELDS,
  EXAMPLE_RESPONSE_FIELDS,
} from './policy-examples.js';
import { DEDUPE_FIELDS, OUTCOME_FIELDS, RECONCILE_FIELDS, RESPONSE_FIELDS } from './tool-sections.js';

/**
 * Every mapping of a policy file and the field names the parser accepts in it, keyed by where the
 * mapping sits (`tools[].dedupe`). These are the very lists the section readers pass to
 * `PolicyReader.fields`, so `test/unit/docs/policy-reference.test.ts` can hold
 * docs/policy-reference.md against them: a field added to a reader and not documented fails it.
 */
export const POLICY_FIELDS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  '': TOP_FIELDS,
  loop_breaker: LOOP_BREAKER_FIELDS,
  egress: EGRESS_FIELDS,
  'tools[]': TOOL_FIELDS,
  'tools[].match': MATCH_FIELDS,
  'tools[].match.graphql': GRAPHQL_FIELDS,
  'tools[].dedupe': DEDUPE_FIELDS,
  'tools[].idempotency': IDEMPOTENCY_FIELDS,
  'tools[].retry': RETRY_FIELDS,
  'tools[].outcome': OUTCOME_FIELDS,
  // The items of the list form of both failed_if and unknown_if.
  'tools[].outcome.failed_if[]': ANSWER_CONDITION_FIELDS,
  'tools[].response': RESPONSE_FIELDS,
  'tools[].fingerprint': FINGERPRINT_FIELDS,
  'tools[].reconcile': RECONCILE_FIELDS,
  'tools[].verdict': VERDICT_FIELDS,
  'examples[]': EXAMPLE_FIELDS,
  'examples[].request': EXAMPLE_REQUEST_FIELDS,
  'examples[].expect': EXAMPLE_EXPECT_FIELDS,
  'examples[].response': EXAMPLE_RESPONSE_FIELDS,
});
