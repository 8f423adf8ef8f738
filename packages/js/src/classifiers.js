// `oma-component/classifiers`: OMA's optional risk classifier for `bash` commands (OMA:
// tool/classifiers/bash-risk.ts), for `onToolCall` gates. A heuristic, not a security
// boundary: quoted text is blanked, the command is cut at shell separators (and one level of
// `$(...)` / backtick bodies is classified too), every piece is matched against three tables
// (high, then review, then safe) and the worst level wins; a piece no table knows is `review`.
// Levels and reasons are OMA's. The rule is the component's (the codec's
// `classify-bash-command`, docs/tools.md#classifier), so this subpath loads the component.

import { codec } from './component.js'

/**
 * OMA's `classifyBashCommand`: `{level: 'safe' | 'review' | 'high', reason}` for a command, the
 * worst level of its pieces; an empty or non-string command is `review`.
 */
export function classifyBashCommand(command) {
  const { level, reason } = codec.classifyBashCommand(typeof command === 'string' ? command.toWellFormed() : '')
  return { level, reason }
}
