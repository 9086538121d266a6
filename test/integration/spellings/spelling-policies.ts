/** The tools every spelling test attacks: one upstream on 127.0.0.1, reached by name and by address. */
import { type PolicySet, parsePolicyFiles } from '../../../src/policy/index.js';

export function spellingPolicies(port: number): PolicySet {
  return parsePolicyFiles([
    {
      file: 'spellings.yaml',
      text: `
version: 1
tools:
  - id: t.create_issue
    match: { hosts: [127.0.0.1], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
    dedupe: { key: [$.path.owner, $.path.repo, $.body.title], window: 1h, wait: 0s }
  - id: t.delete_item
    match: { hosts: ["[::ffff:127.0.0.1]"], method: DELETE, path: "/items/{id}" }
    effect: destroy
    dedupe: { key: [$.path.id], window: 1h, wait: 0s }
  - id: t.local_send
    match: { hosts: ["localhost:${port}"], method: POST, path: /send }
    effect: notify
    dedupe: { key: [$.body.msg], window: 1h, wait: 0s }
`,
    },
  ]);
}
