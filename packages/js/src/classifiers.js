// `oma-component/classifiers`: OMA's optional risk classifier for `bash` commands, for
// `onToolCall` gates. A heuristic, not a security boundary: quoted text is blanked, the command
// is cut at shell separators (and one level of `$(...)` / backtick bodies is classified too),
// every piece is matched against three tables (high, then review, then safe) and the worst level
// wins; a piece no table knows is `review`. Levels and reasons are OMA's.

/** [pattern, reason] rows: destructive, privileged or outbound commands. */
const HIGH = [
  [/^rm\b/, 'Removes files (rm).'],
  [/^sudo\b/, 'Runs a command with elevated privileges (sudo).'],
  [/^dd\b/, 'Low-level disk write (dd).'],
  [/^mkfs\b/, 'Formats a filesystem (mkfs).'],
  [/^shred\b/, 'Irreversibly destroys file contents (shred).'],
  [/^chmod\s+(?:-R\b|.*\b777\b)/, 'Broad or recursive permission change (chmod 777 / -R).'],
  [/^chown\s+-R\b/, 'Recursive ownership change (chown -R).'],
  [/^eval\b/, 'Evaluates a dynamically constructed command (eval).'],
  [/:\s*\(\s*\)\s*\{.*:\s*\|\s*:/, 'Fork bomb.'],
  [/^git\s+push\b[^\n]*--force(?:-with-lease)?\b/, 'Force-pushes git history (git push --force).'],
  [/^git\s+push\b[^\n]*\s-f\b/, 'Force-pushes git history (git push -f).'],
  [/^npm\s+publish\b/, 'Publishes a package to a registry (npm publish).'],
  [/^(?:yarn|pnpm)\s+publish\b/, 'Publishes a package to a registry.'],
  [/>\s*\/(?:dev|etc|usr|bin|sbin|boot|System|Library)\b/, 'Redirects output into a system path or device.'],
]

/** Commands that can flood the context or change permissions: a human should look. */
const REVIEW = [
  [/^ls\b[^\n]*\s-\w*R\b/, 'Recursive directory listing (ls -R) can flood context.'],
  [/^ls\b[^\n]*--recursive\b/, 'Recursive directory listing (ls --recursive) can flood context.'],
  [/^tree\b/, 'Recursive tree listing can flood context.'],
  [/^find\s+(?:\/|~|\$HOME)(?:\s|$)/, 'Filesystem-wide find from root/home without a bounded scope.'],
  [/^(?:grep|egrep|fgrep|rg)\b[^\n]*\s-\w*[rR]\b/, 'Recursive grep/rg can flood context.'],
  [/^(?:grep|egrep|fgrep|rg)\b[^\n]*--recursive\b/, 'Recursive grep/rg can flood context.'],
  [/^du\b/, 'Recursive disk-usage scan can be slow/large (du).'],
  [/^chmod\b/, 'Changes file permissions (chmod).'],
  [/^chown\b/, 'Changes file ownership (chown).'],
  [/^(?:bash|sh|zsh|dash|ksh)\s+-c\b/, 'Executes an inline command string via a shell.'],
  [/^kill(?:all)?\b/, 'Terminates processes (kill).'],
  [/^(?:mv|cp)\s+[^\n]*\s\/(?:etc|usr|bin|sbin|boot|System)\b/, 'Moves/copies into a system path.'],
]

/** Read-only inspection, matched only when neither table above matched. */
const SAFE = [
  [
    /^(?:ls|cat|pwd|echo|printf|head|tail|wc|which|whoami|date|file|stat|env|printenv|hostname|uname|id|df|free|ps|basename|dirname|realpath|readlink|sort|uniq|cut|nl|column|cksum|md5sum|sha1sum|sha256sum)\b/,
    'Read-only inspection command.',
  ],
  [
    /^git\s+(?:status|log|diff|show|branch|remote|config|rev-parse|describe|blame|ls-files|shortlog|tag)\b/,
    'Read-only git query.',
  ],
  [/^(?:grep|egrep|fgrep|rg)\b/, 'Scoped (non-recursive) text search.'],
  [/^find\b/, 'Scoped find (not rooted at / or ~).'],
]

const TABLES = [['high', HIGH], ['review', REVIEW], ['safe', SAFE]]
const RANK = { safe: 1, review: 2, high: 3 }

/** A pipe into a bare shell (`curl ... | bash`), checked on the whole command. */
const PIPE_TO_SHELL = /\|\s*(?:sudo\s+)?(?:bash|sh|zsh|dash|ksh)\b/
const SUBSTITUTION = /\$\(([^()]*)\)|`([^`]*)`/g
const SEPARATORS = /&&|\|\||[;|\n]/
const ASSIGNMENTS = /^(?:\w+=(?:'[^']*'|"[^"]*"|\S*)\s+)+/

/** Blanks single-quoted, then double-quoted spans, so words inside strings match nothing. */
const blankQuotes = (text) => text.replace(/'[^']*'/g, ' ').replace(/"[^"]*"/g, ' ')

/** The pieces to classify: the top level cut at separators, then each substitution body. */
function pieces(command) {
  const bodies = [...command.matchAll(SUBSTITUTION)].map((m) => m[1] ?? m[2] ?? '')
  const top = blankQuotes(command.replace(SUBSTITUTION, ' '))
  return [top, ...bodies.map(blankQuotes)]
    .flatMap((text) => text.split(SEPARATORS))
    .map((piece) => piece.trim())
    .filter((piece) => piece.length > 0)
}

/** The first matching row of the tables for one piece (leading `VAR=value`s skipped), or null. */
function classifyPiece(piece) {
  const command = piece.replace(ASSIGNMENTS, '')
  for (const [level, rows] of TABLES) {
    for (const [pattern, reason] of rows) {
      if (pattern.test(command)) return { level, reason }
    }
  }
  return null
}

/**
 * OMA's `classifyBashCommand`: `{level: 'safe' | 'review' | 'high', reason}` for a command, the
 * worst level of its pieces; an empty or non-string command is `review`.
 */
export function classifyBashCommand(command) {
  if (typeof command !== 'string' || command.trim() === '') {
    return { level: 'review', reason: 'Empty or non-string command; cannot classify.' }
  }
  if (PIPE_TO_SHELL.test(blankQuotes(command))) {
    return { level: 'high', reason: 'Pipes output directly into a shell interpreter (e.g. curl | bash).' }
  }
  const parts = pieces(command)
  if (parts.length === 0) {
    return { level: 'review', reason: 'Command could not be parsed into a recognisable form.' }
  }
  let worst = { level: 'safe', reason: 'All segments are read-only commands.' }
  for (const part of parts) {
    const found = classifyPiece(part) ?? {
      level: 'review',
      reason: `Unrecognised command: "${part.split(/\s+/)[0] ?? part}". Review before running.`,
    }
    if (RANK[found.level] > RANK[worst.level]) {
      worst = found
      if (worst.level === 'high') break
    }
  }
  return worst
}
