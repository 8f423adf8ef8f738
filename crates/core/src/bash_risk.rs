//! OMA's risk classifier for `bash` commands (`classifyBashCommand`, from OMA's optional
//! `classifiers` entry): `safe`, `review` or `high`, with OMA's reason, for a tool-call gate that
//! allows, asks or denies (`docs/tools.md#classifier`). A heuristic that obfuscation defeats, not
//! a security boundary.
//!
//! The rule: quoted text is blanked; the command is cut at `&&`, `||`, `;`, `|` and line feeds,
//! and the bodies of `$(...)` and backticks (one level) are cut the same way and classified too;
//! leading `NAME=value` assignments of a piece are skipped; each piece is matched against the
//! high table, then review, then safe, and a piece none knows is `review`; the worst level wins.
//! A pipe into a shell (`curl ... | sh`) is `high` before any cutting.
//!
//! OMA states its tables as JavaScript regular expressions. Each is matched here by a small
//! scanner that accepts exactly the texts the expression accepts, as in JavaScript without the
//! `u` flag: `\b` and word characters are ASCII, `\s` is JavaScript's white space and `.` any
//! character but a line terminator. The tests hold the scanners to a regex engine running OMA's
//! expressions (`tests::agrees_with_the_regular_expressions`). Every scanner is linear in the
//! command: where an expression could retry a long run from many starts, what each start needs
//! is looked up (the next quote, the next line end) instead of scanned for again.

use crate::agent::redact::is_space;

/// How risky a command looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BashRiskLevel {
    /// Read-only inspection.
    Safe,
    /// Ambiguous, context-heavy or unknown: a human should look.
    Review,
    /// Destructive, privileged or outbound.
    High,
}

impl BashRiskLevel {
    /// OMA's name of the level: `safe`, `review` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            BashRiskLevel::Safe => "safe",
            BashRiskLevel::Review => "review",
            BashRiskLevel::High => "high",
        }
    }
}

/// A command's level and OMA's reason for it (OMA's `BashRiskAssessment`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BashRisk {
    /// The worst level of the command's pieces.
    pub level: BashRiskLevel,
    /// OMA's explanation, naming the row that set the level.
    pub reason: String,
}

impl BashRisk {
    fn new(level: BashRiskLevel, reason: &str) -> Self {
        BashRisk {
            level,
            reason: reason.to_owned(),
        }
    }
}

/// OMA's `classifyBashCommand`: the worst level of the command's pieces, with its reason. An
/// empty or all-white-space command is `review` (OMA's reason says "empty or non-string": a
/// host with a value that is not a string passes `""`).
pub fn classify_bash_command(command: &str) -> BashRisk {
    let command: Vec<char> = command.chars().collect();
    if trim(&command).is_empty() {
        return BashRisk::new(
            BashRiskLevel::Review,
            "Empty or non-string command; cannot classify.",
        );
    }
    if pipes_to_shell(&blank_quotes(&command)) {
        return BashRisk::new(
            BashRiskLevel::High,
            "Pipes output directly into a shell interpreter (e.g. curl | bash).",
        );
    }
    let pieces = pieces(&command);
    if pieces.is_empty() {
        return BashRisk::new(
            BashRiskLevel::Review,
            "Command could not be parsed into a recognisable form.",
        );
    }
    let mut worst = BashRisk::new(BashRiskLevel::Safe, "All segments are read-only commands.");
    for piece in &pieces {
        let found = classify_piece(piece).map_or_else(
            || {
                let first: String = piece.iter().take_while(|&&c| !is_space(c)).collect();
                BashRisk {
                    level: BashRiskLevel::Review,
                    reason: format!("Unrecognised command: \"{first}\". Review before running."),
                }
            },
            |(level, reason)| BashRisk::new(level, reason),
        );
        if found.level > worst.level {
            worst = found;
            if worst.level == BashRiskLevel::High {
                break;
            }
        }
    }
    worst
}

// ---------------------------------------------------------------------------------------------
// The pieces of a command

/// The pieces to classify, trimmed and non-empty: the command without its substitutions, quotes
/// blanked, cut at separators; then each substitution's body, quotes blanked, cut the same way.
#[inline(never)]
fn pieces(command: &[char]) -> Vec<Vec<char>> {
    let (top, bodies) = substitutions(command);
    let mut out = Vec::new();
    for text in std::iter::once(blank_quotes(&top)).chain(bodies.iter().map(|b| blank_quotes(b))) {
        for piece in split_at_separators(&text) {
            let piece = trim(piece);
            if !piece.is_empty() {
                out.push(piece.to_vec());
            }
        }
    }
    out
}

/// `/\$\(([^()]*)\)|`([^`]*)`/g` over `command`: the command with each match replaced by a space,
/// and the bodies, left to right.
#[inline(never)]
fn substitutions(command: &[char]) -> (Vec<char>, Vec<Vec<char>>) {
    let mut top = Vec::with_capacity(command.len());
    let mut bodies = Vec::new();
    // Once a backtick has no closing one, no later backtick has one either.
    let mut backticks_closed = true;
    let mut at = 0;
    while at < command.len() {
        let end = if command[at] == '$' && command.get(at + 1) == Some(&'(') {
            // The body holds no parenthesis: the first one after `$(` must close it.
            let close = (at + 2..command.len()).find(|&i| matches!(command[i], '(' | ')'));
            close.filter(|&i| command[i] == ')').map(|i| (at + 2, i))
        } else if command[at] == '`' && backticks_closed {
            let close = (at + 1..command.len()).find(|&i| command[i] == '`');
            backticks_closed = close.is_some();
            close.map(|i| (at + 1, i))
        } else {
            None
        };
        match end {
            Some((body, close)) => {
                bodies.push(command[body..close].to_vec());
                top.push(' ');
                at = close + 1;
            }
            None => {
                top.push(command[at]);
                at += 1;
            }
        }
    }
    (top, bodies)
}

/// `text` with every `'...'` span, then (in what is left) every `"..."` span, replaced by a
/// space, so that words inside strings match nothing.
fn blank_quotes(text: &[char]) -> Vec<char> {
    blank_spans(&blank_spans(text, '\''), '"')
}

/// `text` with every span from `quote` to the next `quote` replaced by a space; a quote with
/// none after it stays.
#[inline(never)]
fn blank_spans(text: &[char], quote: char) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        if text[at] == quote {
            if let Some(close) = (at + 1..text.len()).find(|&i| text[i] == quote) {
                out.push(' ');
                at = close + 1;
                continue;
            }
            // No closing quote: none of the rest has one either.
            out.extend_from_slice(&text[at..]);
            break;
        }
        out.push(text[at]);
        at += 1;
    }
    out
}

/// `text.split(/&&|\|\||[;|\n]/)`.
#[inline(never)]
fn split_at_separators(text: &[char]) -> Vec<&[char]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < text.len() {
        let two = text.get(at + 1) == Some(&text[at]) && matches!(text[at], '&' | '|');
        let width = if two {
            2
        } else if matches!(text[at], ';' | '|' | '\n') {
            1
        } else {
            at += 1;
            continue;
        };
        out.push(&text[start..at]);
        at += width;
        start = at;
    }
    out.push(&text[start..]);
    out
}

/// JavaScript's `trim`: white space and line terminators off both ends.
#[inline(never)]
fn trim(text: &[char]) -> &[char] {
    let start = text
        .iter()
        .position(|&c| !is_space(c))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&c| !is_space(c))
        .map_or(start, |i| i + 1);
    &text[start..end]
}

/// `/\|\s*(?:sudo\s+)?(?:bash|sh|zsh|dash|ksh)\b/` anywhere in `text`.
#[inline(never)]
fn pipes_to_shell(text: &[char]) -> bool {
    (0..text.len()).any(|at| {
        if text[at] != '|' {
            return false;
        }
        let from = spaces(text, at + 1);
        let after_sudo = word_end(text, from, "sudo")
            .map(|end| spaces(text, end))
            .filter(|&end| end > from + 4);
        after_sudo.is_some_and(|from| shell_at(text, from)) || shell_at(text, from)
    })
}

fn shell_at(text: &[char], at: usize) -> bool {
    one_of(text, at, SHELLS, &|end| boundary(text, end))
}

// ---------------------------------------------------------------------------------------------
// One piece

/// The first row of the tables (high, then review, then safe) that matches `piece` once its
/// leading assignments are skipped, or `None`.
#[inline(never)]
fn classify_piece(piece: &[char]) -> Option<(BashRiskLevel, &'static str)> {
    let command = without_assignments(piece);
    for (level, rows) in [
        (BashRiskLevel::High, HIGH),
        (BashRiskLevel::Review, REVIEW),
        (BashRiskLevel::Safe, SAFE),
    ] {
        if let Some((_, reason)) = rows.iter().find(|(test, _)| test.matches(command)) {
            return Some((level, reason));
        }
    }
    None
}

/// `piece` without what `/^(?:\w+=(?:'[^']*'|"[^"]*"|\S*)\s+)+/` matches: leading `NAME=value`
/// assignments, each followed by white space.
#[inline(never)]
fn without_assignments(piece: &[char]) -> &[char] {
    let next_single = next_index(piece, |c| c == '\'');
    let next_double = next_index(piece, |c| c == '"');
    let mut at = 0;
    while let Some(end) = assignment_at(piece, at, &next_single, &next_double) {
        at = end;
    }
    &piece[at..]
}

/// The end of one `\w+=(?:'[^']*'|"[^"]*"|\S*)\s+` at `at`: the value's forms tried in that
/// order, the first one followed by white space taken.
fn assignment_at(
    text: &[char],
    at: usize,
    next_single: &[usize],
    next_double: &[usize],
) -> Option<usize> {
    let name = run(text, at, is_word);
    if name == at || text.get(name) != Some(&'=') {
        return None;
    }
    let value = name + 1;
    let quoted = |quote: char, next: &[usize]| {
        (text.get(value) == Some(&quote))
            .then(|| next[value + 1])
            .filter(|&close| close < text.len())
            .map(|close| close + 1)
    };
    [
        quoted('\'', next_single),
        quoted('"', next_double),
        Some(run(text, value, |c| !is_space(c))),
    ]
    .into_iter()
    .flatten()
    .map(|end| (end, spaces(text, end)))
    .find(|&(end, after)| after > end)
    .map(|(_, after)| after)
}

/// How a row tests a piece.
enum Test {
    /// `^(?:words)\b`.
    Word(&'static [&'static str]),
    /// `^(?:names)\s+(?:words)\b`.
    Then(&'static [&'static str], &'static [&'static str]),
    /// Anything else.
    Scan(fn(&[char]) -> bool),
}

impl Test {
    #[inline(never)]
    fn matches(&self, s: &[char]) -> bool {
        match *self {
            Test::Word(words) => one_of(s, 0, words, &|end| boundary(s, end)),
            Test::Then(names, words) => after_spaces(s, names, &|at| {
                one_of(s, at, words, &|end| boundary(s, end))
            }),
            Test::Scan(scan) => scan(s),
        }
    }
}

/// A row: its test, and OMA's reason.
type Row = (Test, &'static str);

/// Destructive, privileged or outbound commands.
const HIGH: &[Row] = &[
    (Test::Word(&["rm"]), "Removes files (rm)."),
    (
        Test::Word(&["sudo"]),
        "Runs a command with elevated privileges (sudo).",
    ),
    (Test::Word(&["dd"]), "Low-level disk write (dd)."),
    (Test::Word(&["mkfs"]), "Formats a filesystem (mkfs)."),
    (
        Test::Word(&["shred"]),
        "Irreversibly destroys file contents (shred).",
    ),
    (
        Test::Scan(chmod_broad),
        "Broad or recursive permission change (chmod 777 / -R).",
    ),
    (
        Test::Then(&["chown"], &["-R"]),
        "Recursive ownership change (chown -R).",
    ),
    (
        Test::Word(&["eval"]),
        "Evaluates a dynamically constructed command (eval).",
    ),
    (Test::Scan(fork_bomb), "Fork bomb."),
    (
        Test::Scan(force_push),
        "Force-pushes git history (git push --force).",
    ),
    (
        Test::Scan(force_push_short),
        "Force-pushes git history (git push -f).",
    ),
    (
        Test::Then(&["npm"], &["publish"]),
        "Publishes a package to a registry (npm publish).",
    ),
    (
        Test::Then(&["yarn", "pnpm"], &["publish"]),
        "Publishes a package to a registry.",
    ),
    (
        Test::Scan(redirects_into_system),
        "Redirects output into a system path or device.",
    ),
];

/// Commands that can flood the context or change permissions: a human should look.
const REVIEW: &[Row] = &[
    (
        Test::Scan(|s| command_then(s, &["ls"], &|q| flag_ending(s, q, |c| c == 'R'))),
        "Recursive directory listing (ls -R) can flood context.",
    ),
    (
        Test::Scan(|s| command_then(s, &["ls"], &|q| flag(s, q, "--recursive"))),
        "Recursive directory listing (ls --recursive) can flood context.",
    ),
    (
        Test::Word(&["tree"]),
        "Recursive tree listing can flood context.",
    ),
    (
        Test::Scan(find_from_root),
        "Filesystem-wide find from root/home without a bounded scope.",
    ),
    (
        Test::Scan(|s| command_then(s, GREPS, &|q| flag_ending(s, q, |c| c == 'r' || c == 'R'))),
        "Recursive grep/rg can flood context.",
    ),
    (
        Test::Scan(|s| command_then(s, GREPS, &|q| flag(s, q, "--recursive"))),
        "Recursive grep/rg can flood context.",
    ),
    (
        Test::Word(&["du"]),
        "Recursive disk-usage scan can be slow/large (du).",
    ),
    (Test::Word(&["chmod"]), "Changes file permissions (chmod)."),
    (Test::Word(&["chown"]), "Changes file ownership (chown)."),
    (
        Test::Then(SHELLS, &["-c"]),
        "Executes an inline command string via a shell.",
    ),
    (
        Test::Word(&["kill", "killall"]),
        "Terminates processes (kill).",
    ),
    (
        Test::Scan(moves_into_system),
        "Moves/copies into a system path.",
    ),
];

/// Read-only inspection, matched only when neither table above matched.
const SAFE: &[Row] = &[
    (Test::Word(READ_ONLY), "Read-only inspection command."),
    (Test::Then(&["git"], GIT_QUERIES), "Read-only git query."),
    (Test::Word(GREPS), "Scoped (non-recursive) text search."),
    (Test::Word(&["find"]), "Scoped find (not rooted at / or ~)."),
];

const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh"];
const GREPS: &[&str] = &["grep", "egrep", "fgrep", "rg"];
const READ_ONLY: &[&str] = &[
    "ls",
    "cat",
    "pwd",
    "echo",
    "printf",
    "head",
    "tail",
    "wc",
    "which",
    "whoami",
    "date",
    "file",
    "stat",
    "env",
    "printenv",
    "hostname",
    "uname",
    "id",
    "df",
    "free",
    "ps",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "sort",
    "uniq",
    "cut",
    "nl",
    "column",
    "cksum",
    "md5sum",
    "sha1sum",
    "sha256sum",
];
const GIT_QUERIES: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "remote",
    "config",
    "rev-parse",
    "describe",
    "blame",
    "ls-files",
    "shortlog",
    "tag",
];
const SYSTEM_DIRS: &[&str] = &["etc", "usr", "bin", "sbin", "boot", "System"];
const SYSTEM_PATHS: &[&str] = &[
    "dev", "etc", "usr", "bin", "sbin", "boot", "System", "Library",
];

/// `^chmod\s+(?:-R\b|.*\b777\b)`: `-R` can only follow the whole run of white space, and `777`
/// may stand anywhere from there to the end of its line (the run itself is white space).
fn chmod_broad(s: &[char]) -> bool {
    after_spaces(s, &["chmod"], &|from| {
        flag(s, from, "-R")
            || up_to(s, from, is_line_end, &|q| {
                boundary(s, q) && flag(s, q, "777")
            })
    })
}

/// `:\s*\(\s*\)\s*\{.*:\s*\|\s*:` anywhere. Where the tail (`:\s*\|\s*:`) next starts and where
/// each line ends are looked up, so that every start is tried once.
#[inline(never)]
fn fork_bomb(s: &[char]) -> bool {
    let mut next_tail = vec![s.len(); s.len() + 1];
    for k in (0..s.len()).rev() {
        let pipe = spaces(s, k + 1);
        let tail =
            s[k] == ':' && s.get(pipe) == Some(&'|') && s.get(spaces(s, pipe + 1)) == Some(&':');
        next_tail[k] = if tail { k } else { next_tail[k + 1] };
    }
    let line_end = next_index(s, is_line_end);
    (0..s.len()).any(|at| {
        let mut j = at;
        for want in [':', '(', ')', '{'] {
            if s.get(j) != Some(&want) {
                return false;
            }
            j = if want == '{' { j + 1 } else { spaces(s, j + 1) };
        }
        next_tail[j] < line_end[j]
    })
}

/// `^git\s+push\b[^\n]*` followed at some point by what `rest` accepts there.
fn git_push_then(s: &[char], rest: &dyn Fn(usize) -> bool) -> bool {
    after_spaces(s, &["git"], &|at| {
        word_end(s, at, "push").is_some_and(|from| up_to(s, from, is_newline, rest))
    })
}

/// `^git\s+push\b[^\n]*--force(?:-with-lease)?\b`.
fn force_push(s: &[char]) -> bool {
    git_push_then(s, &|q| {
        has(s, q, "--force") && (boundary(s, q + 7) || flag(s, q + 7, "-with-lease"))
    })
}

/// `^git\s+push\b[^\n]*\s-f\b`.
fn force_push_short(s: &[char]) -> bool {
    git_push_then(s, &|q| {
        s.get(q).is_some_and(|&c| is_space(c)) && flag(s, q + 1, "-f")
    })
}

/// `>\s*\/(?:dev|etc|usr|bin|sbin|boot|System|Library)\b` anywhere.
#[inline(never)]
fn redirects_into_system(s: &[char]) -> bool {
    (0..s.len()).any(|at| {
        let slash = spaces(s, at + 1);
        s[at] == '>'
            && s.get(slash) == Some(&'/')
            && one_of(s, slash + 1, SYSTEM_PATHS, &|end| boundary(s, end))
    })
}

/// `^(?:names)\b[^\n]*` followed at some point by what `rest` accepts there.
fn command_then(s: &[char], names: &[&str], rest: &dyn Fn(usize) -> bool) -> bool {
    one_of(s, 0, names, &|from| {
        boundary(s, from) && up_to(s, from, is_newline, rest)
    })
}

/// `\s-\w*X\b` at `q`, where `last` accepts X: a flag word whose last letter it is.
#[inline(never)]
fn flag_ending(s: &[char], q: usize, last: fn(char) -> bool) -> bool {
    s.get(q).is_some_and(|&c| is_space(c)) && s.get(q + 1) == Some(&'-') && {
        let word = run(s, q + 2, is_word);
        word > q + 2 && last(s[word - 1])
    }
}

/// `^find\s+(?:\/|~|\$HOME)(?:\s|$)`.
fn find_from_root(s: &[char]) -> bool {
    after_spaces(s, &["find"], &|at| {
        let end = match s.get(at) {
            Some('/' | '~') => at + 1,
            Some('$') if has(s, at, "$HOME") => at + 5,
            _ => return false,
        };
        s.get(end).is_none_or(|&c| is_space(c))
    })
}

/// `^(?:mv|cp)\s+[^\n]*\s\/(?:etc|usr|bin|sbin|boot|System)\b`. `\s+` takes at least one
/// character and `[^\n]*` runs to a line feed: the `\s` before the path may be any character
/// from the second of the run up to the first line feed after the run.
#[inline(never)]
fn moves_into_system(s: &[char]) -> bool {
    one_of(s, 0, &["mv", "cp"], &|name| {
        let run_end = spaces(s, name);
        let line = find(s, run_end, is_newline);
        run_end > name
            && (name + 1..=line).any(|q| {
                s.get(q).is_some_and(|&c| is_space(c))
                    && s.get(q + 1) == Some(&'/')
                    && one_of(s, q + 2, SYSTEM_DIRS, &|end| boundary(s, end))
            })
    })
}

// ---------------------------------------------------------------------------------------------
// Scanning. The helpers are kept out of line and take functions by reference: the classifier is
// not on any hot path, and inlining them at every row made it four times larger.

/// A word character for `\b` and `\w`: `[A-Za-z0-9_]`.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A line terminator, which `.` does not match.
fn is_line_end(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// A line feed, which `[^\n]` does not match.
fn is_newline(c: char) -> bool {
    c == '\n'
}

/// `\b` at `at`: a word character on one side only.
#[inline(never)]
fn boundary(s: &[char], at: usize) -> bool {
    let word = |i: usize| s.get(i).is_some_and(|&c| is_word(c));
    (at > 0 && word(at - 1)) != word(at)
}

/// Whether `s` has `word` at `at`.
#[inline(never)]
fn has(s: &[char], at: usize, word: &str) -> bool {
    word.chars()
        .enumerate()
        .all(|(i, c)| s.get(at + i) == Some(&c))
}

/// The end of `word` at `at` when a word boundary follows it.
#[inline(never)]
fn word_end(s: &[char], at: usize, word: &str) -> Option<usize> {
    let end = at + word.len();
    (has(s, at, word) && boundary(s, end)).then_some(end)
}

/// `flag\b` at `at`.
fn flag(s: &[char], at: usize, flag: &str) -> bool {
    word_end(s, at, flag).is_some()
}

/// Whether one of `words` is at `at` with `then` accepting its end (an alternation: each tried).
#[inline(never)]
fn one_of(s: &[char], at: usize, words: &[&str], then: &dyn Fn(usize) -> bool) -> bool {
    words
        .iter()
        .any(|word| has(s, at, word) && then(at + word.len()))
}

/// `^(?:names)\s+` with `then` accepting the position after the white space. Only the whole run
/// of white space is tried: every use needs a character that is not white space next.
#[inline(never)]
fn after_spaces(s: &[char], names: &[&str], then: &dyn Fn(usize) -> bool) -> bool {
    one_of(s, 0, names, &|end| {
        let from = spaces(s, end);
        from > end && then(from)
    })
}

/// Whether `test` accepts some position from `from` up to the first character `end` accepts
/// (or the end of `s`), both included: what follows a `[^\n]*` or `.*`.
#[inline(never)]
fn up_to(s: &[char], from: usize, end: fn(char) -> bool, test: &dyn Fn(usize) -> bool) -> bool {
    (from..=find(s, from, end)).any(test)
}

/// The first index at or after `at` whose character `class` accepts, or the end.
#[inline(never)]
fn find(s: &[char], at: usize, class: fn(char) -> bool) -> usize {
    (at..s.len())
        .find(|&i| class(s[i]))
        .unwrap_or(s.len().max(at))
}

/// The end of the run of characters from `at` that `class` accepts.
#[inline(never)]
fn run(s: &[char], at: usize, class: fn(char) -> bool) -> usize {
    (at..s.len())
        .find(|&i| !class(s[i]))
        .unwrap_or(s.len().max(at))
}

/// The end of the run of white space from `at`.
fn spaces(s: &[char], at: usize) -> usize {
    run(s, at, is_space)
}

/// For each index (and the end), the first index at or after it whose character `class`
/// accepts, or the end.
#[inline(never)]
fn next_index(s: &[char], class: fn(char) -> bool) -> Vec<usize> {
    let mut next = vec![s.len(); s.len() + 1];
    for i in (0..s.len()).rev() {
        next[i] = if class(s[i]) { i } else { next[i + 1] };
    }
    next
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// The shared table (`fixtures/bash-risk.json`): each command's level and reason as OMA's
    /// `classifyBashCommand` gives them. The packages run the same table.
    #[test]
    fn the_shared_table() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../../fixtures/bash-risk.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 40);
        for case in cases {
            let command = case["command"].as_str().unwrap();
            let risk = classify_bash_command(command);
            assert_eq!(risk.level.as_str(), case["level"], "{command:?}");
            assert_eq!(risk.reason, case["reason"].as_str().unwrap(), "{command:?}");
            assert_eq!(risk, oracle::classify(command), "{command:?}");
        }
    }

    /// Texts built to make a scanner that retried each start take quadratic time come out as the
    /// regex engine has them, and quickly.
    #[test]
    fn long_commands_are_scanned_once() {
        for piece in [
            "A='x ",
            "A=\"x ",
            ":(){",
            ":(){ :",
            "$(",
            "`",
            "chmod ",
            "mv  ",
            "ls -",
            " |",
            "> ",
            "git push ",
            "'",
        ] {
            let command = format!("{}{}", piece.repeat(40_000 / piece.len()), "'");
            assert_eq!(
                classify_bash_command(&command),
                oracle::classify(&command),
                "{piece:?}"
            );
        }
    }

    /// OMA's classifier as OMA writes it, its tables as regular expressions run by a regex
    /// engine: the oracle the scanners are held to.
    mod oracle {
        use super::super::{BashRisk, BashRiskLevel};
        use regex_lite::Regex;

        const JS_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";

        /// A JavaScript pattern (no `u` flag) for regex-lite: `\s`, `\S` and `.` as JavaScript
        /// has them.
        fn re(pattern: &str) -> Regex {
            let pattern = pattern
                .replace("\\s", &format!("[{JS_SPACE}]"))
                .replace("\\S", &format!("[^{JS_SPACE}]"))
                .replace(".*", "[^\\n\\r\u{2028}\u{2029}]*");
            Regex::new(&pattern).unwrap()
        }

        const HIGH: &[(&str, &str)] = &[
            (r"^rm\b", "Removes files (rm)."),
            (
                r"^sudo\b",
                "Runs a command with elevated privileges (sudo).",
            ),
            (r"^dd\b", "Low-level disk write (dd)."),
            (r"^mkfs\b", "Formats a filesystem (mkfs)."),
            (r"^shred\b", "Irreversibly destroys file contents (shred)."),
            (
                r"^chmod\s+(?:-R\b|.*\b777\b)",
                "Broad or recursive permission change (chmod 777 / -R).",
            ),
            (r"^chown\s+-R\b", "Recursive ownership change (chown -R)."),
            (
                r"^eval\b",
                "Evaluates a dynamically constructed command (eval).",
            ),
            (r":\s*\(\s*\)\s*\{.*:\s*\|\s*:", "Fork bomb."),
            (
                r"^git\s+push\b[^\n]*--force(?:-with-lease)?\b",
                "Force-pushes git history (git push --force).",
            ),
            (
                r"^git\s+push\b[^\n]*\s-f\b",
                "Force-pushes git history (git push -f).",
            ),
            (
                r"^npm\s+publish\b",
                "Publishes a package to a registry (npm publish).",
            ),
            (
                r"^(?:yarn|pnpm)\s+publish\b",
                "Publishes a package to a registry.",
            ),
            (
                r">\s*/(?:dev|etc|usr|bin|sbin|boot|System|Library)\b",
                "Redirects output into a system path or device.",
            ),
        ];
        const REVIEW: &[(&str, &str)] = &[
            (
                r"^ls\b[^\n]*\s-\w*R\b",
                "Recursive directory listing (ls -R) can flood context.",
            ),
            (
                r"^ls\b[^\n]*--recursive\b",
                "Recursive directory listing (ls --recursive) can flood context.",
            ),
            (r"^tree\b", "Recursive tree listing can flood context."),
            (
                r"^find\s+(?:/|~|\$HOME)(?:\s|$)",
                "Filesystem-wide find from root/home without a bounded scope.",
            ),
            (
                r"^(?:grep|egrep|fgrep|rg)\b[^\n]*\s-\w*[rR]\b",
                "Recursive grep/rg can flood context.",
            ),
            (
                r"^(?:grep|egrep|fgrep|rg)\b[^\n]*--recursive\b",
                "Recursive grep/rg can flood context.",
            ),
            (
                r"^du\b",
                "Recursive disk-usage scan can be slow/large (du).",
            ),
            (r"^chmod\b", "Changes file permissions (chmod)."),
            (r"^chown\b", "Changes file ownership (chown)."),
            (
                r"^(?:bash|sh|zsh|dash|ksh)\s+-c\b",
                "Executes an inline command string via a shell.",
            ),
            (r"^kill(?:all)?\b", "Terminates processes (kill)."),
            (
                r"^(?:mv|cp)\s+[^\n]*\s/(?:etc|usr|bin|sbin|boot|System)\b",
                "Moves/copies into a system path.",
            ),
        ];
        const SAFE: &[(&str, &str)] = &[
            (
                r"^(?:ls|cat|pwd|echo|printf|head|tail|wc|which|whoami|date|file|stat|env|printenv|hostname|uname|id|df|free|ps|basename|dirname|realpath|readlink|sort|uniq|cut|nl|column|cksum|md5sum|sha1sum|sha256sum)\b",
                "Read-only inspection command.",
            ),
            (
                r"^git\s+(?:status|log|diff|show|branch|remote|config|rev-parse|describe|blame|ls-files|shortlog|tag)\b",
                "Read-only git query.",
            ),
            (
                r"^(?:grep|egrep|fgrep|rg)\b",
                "Scoped (non-recursive) text search.",
            ),
            (r"^find\b", "Scoped find (not rooted at / or ~)."),
        ];

        fn js_trim(text: &str) -> &str {
            text.trim_matches(crate::agent::redact::is_space)
        }

        fn strip_quotes(text: &str) -> String {
            let single = Regex::new("'[^']*'").unwrap().replace_all(text, " ");
            Regex::new("\"[^\"]*\"")
                .unwrap()
                .replace_all(&single, " ")
                .into_owned()
        }

        fn segments(command: &str) -> Vec<String> {
            let sub = Regex::new(r"\$\(([^()]*)\)|`([^`]*)`").unwrap();
            let bodies: Vec<String> = sub
                .captures_iter(command)
                .map(|c| c.get(1).or(c.get(2)).map_or("", |m| m.as_str()).to_owned())
                .collect();
            let main = strip_quotes(&sub.replace_all(command, " "));
            let split = Regex::new(r"&&|\|\||[;|\n]").unwrap();
            let mut out: Vec<String> = split.split(&main).map(str::to_owned).collect();
            for body in &bodies {
                out.extend(split.split(&strip_quotes(body)).map(str::to_owned));
            }
            out.iter()
                .map(|s| js_trim(s).to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        }

        /// OMA's tables, compiled once per classification.
        struct Tables {
            assignments: Regex,
            rows: Vec<(BashRiskLevel, Regex, &'static str)>,
        }

        impl Tables {
            fn new() -> Self {
                let mut rows = Vec::new();
                for (level, table) in [
                    (BashRiskLevel::High, HIGH),
                    (BashRiskLevel::Review, REVIEW),
                    (BashRiskLevel::Safe, SAFE),
                ] {
                    for (pattern, reason) in table {
                        rows.push((level, re(pattern), *reason));
                    }
                }
                Tables {
                    assignments: re(r#"^(?:\w+=(?:'[^']*'|"[^"]*"|\S*)\s+)+"#),
                    rows,
                }
            }

            fn segment(&self, text: &str) -> Option<(BashRiskLevel, &'static str)> {
                let seg = self.assignments.replace(text, "");
                self.rows
                    .iter()
                    .find(|(_, pattern, _)| pattern.is_match(&seg))
                    .map(|(level, _, reason)| (*level, *reason))
            }
        }

        pub fn classify(command: &str) -> BashRisk {
            let risk = |level, reason: &str| BashRisk {
                level,
                reason: reason.to_owned(),
            };
            if js_trim(command).is_empty() {
                return risk(
                    BashRiskLevel::Review,
                    "Empty or non-string command; cannot classify.",
                );
            }
            if re(r"\|\s*(?:sudo\s+)?(?:bash|sh|zsh|dash|ksh)\b").is_match(&strip_quotes(command)) {
                return risk(
                    BashRiskLevel::High,
                    "Pipes output directly into a shell interpreter (e.g. curl | bash).",
                );
            }
            let segments = segments(command);
            if segments.is_empty() {
                return risk(
                    BashRiskLevel::Review,
                    "Command could not be parsed into a recognisable form.",
                );
            }
            let tables = Tables::new();
            let words = re(r"\s+");
            let mut worst = risk(BashRiskLevel::Safe, "All segments are read-only commands.");
            for s in &segments {
                let found = match tables.segment(s) {
                    Some((level, reason)) => risk(level, reason),
                    None => risk(
                        BashRiskLevel::Review,
                        &format!(
                            "Unrecognised command: \"{}\". Review before running.",
                            words.split(s).next().unwrap_or(s)
                        ),
                    ),
                };
                if found.level > worst.level {
                    worst = found;
                    if worst.level == BashRiskLevel::High {
                        break;
                    }
                }
            }
            worst
        }
    }

    /// Pieces that make every row match, nearly match and fail at each of its steps.
    const PIECES: &[&str] = &[
        "rm",
        "sudo",
        "dd",
        "mkfs",
        "shred",
        "chmod",
        "chown",
        "eval",
        "git",
        "push",
        "npm",
        "yarn",
        "pnpm",
        "publish",
        "ls",
        "tree",
        "find",
        "grep",
        "egrep",
        "rg",
        "du",
        "bash",
        "sh",
        "zsh",
        "kill",
        "killall",
        "mv",
        "cp",
        "cat",
        "echo",
        "status",
        "log",
        "sudox",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\u{A0}",
        "\u{2028}",
        "\u{FEFF}",
        "-R",
        "-r",
        "-lR",
        "-f",
        "-c",
        "777",
        "--force",
        "-with-lease",
        "--recursive",
        ">",
        "/",
        "dev",
        "etc",
        "System",
        "~",
        "$HOME",
        ":",
        "(",
        ")",
        "{",
        "}",
        "|",
        "&",
        "&&",
        "||",
        ";",
        "'",
        "\"",
        "`",
        "$(",
        "$",
        "=",
        "A",
        "FOO=1",
        "x",
        "_",
        "0",
        "é",
        "😀",
    ];

    /// Fewer pieces, so that short commands come close to each row more often.
    const DENSE: &[&str] = &[
        "chmod", "git", "push", "ls", "mv", "grep", "find", " ", "\n", "-R", "777", "--force",
        "-f", "/", "etc", ":", "(", ")", "{", "|", "'", "\"", "$(", "`", "A=", "x",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// The scanners give exactly what the regular expressions give.
        #[test]
        fn agrees_with_the_regular_expressions(
            picks in proptest::collection::vec(0..PIECES.len(), 0..16),
            dense in proptest::collection::vec(0..DENSE.len(), 0..10),
        ) {
            let command: String = picks.iter().map(|&i| PIECES[i]).collect();
            proptest::prop_assert_eq!(classify_bash_command(&command), oracle::classify(&command), "{:?}", command);
            let command: String = dense.iter().map(|&i| DENSE[i]).collect();
            proptest::prop_assert_eq!(classify_bash_command(&command), oracle::classify(&command), "{:?}", command);
        }

        /// Any text at all: nothing panics, and the result is still the engine's.
        #[test]
        fn agrees_on_any_text(command in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(classify_bash_command(&command), oracle::classify(&command), "{:?}", command);
        }
    }
}
