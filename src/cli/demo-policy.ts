/** The id of the one tool the demo's policy classifies. */
export const DEMO_TOOL = 'demo.create_issue';

/**
 * The policy of `effectgate demo`: one tool, the fake tracker's create route, written to the demo's
 * temporary directory with the tracker's port in `hosts` (only that listener is governed), so a
 * newcomer can open the file and see what the gate was told.
 */
export function demoPolicy(port: number): string {
  return `# effectgate demo policy: written by \`effectgate demo\` for its fake issue tracker, removed with it.
# The same format as policies/github.yaml (docs/policy-reference.md), cut down to what the demo shows.
version: 1
default: allow
tools:
  - id: ${DEMO_TOOL}
    match:
      hosts: ["127.0.0.1:${port}"]           # the demo's tracker only, not everything on this machine
      method: POST
      path: /repos/{owner}/{repo}/issues
    effect: create
    dedupe:
      # The same issue is the same title in the same repository; nothing else in the body counts.
      key: [$.path.owner, $.path.repo, $.body.title]
      window: 1h                             # a second identical issue within an hour is a duplicate
      wait: 2s
    idempotency:
      header: Idempotency-Key
      # The tracker does honour the header, but this policy does not claim it, as for an API whose
      # guarantee you have not checked: so a retry of an unknown outcome waits for a person (428)
      # instead of going out at once. With honored: true the gate would retry it with the same key.
      honored: false
    retry:
      budget: 3
    outcome:
      succeeded: [2xx]
      failed: [4xx]
      unknown: [5xx]
    response:
      ref: $.html_url                        # the created issue's address, recorded in the trail
      replayed_header: Idempotent-Replayed   # the tracker says when it answered from an earlier key
`;
}
