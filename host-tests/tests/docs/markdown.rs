//! Reading the parts of a Markdown page the checks compare with the code: a section, its
//! tables, its text blocks, and the spans in backticks.

/// The section of `text` under the heading line `heading` (e.g. `## The crates`): from that line
/// to the next heading of the same or a higher level (outside fenced code, where `#` starts a
/// comment). Panics if the page has no such heading, so a renamed heading fails the check
/// rather than passing it over.
pub fn section<'a>(text: &'a str, page: &str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|&c| c == '#').count();
    let mut start = None;
    let mut offset = 0;
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        match start {
            _ if fenced => {}
            None if trimmed == heading => start = Some(offset + line.len()),
            Some(begin) => {
                let hashes = trimmed.chars().take_while(|&c| c == '#').count();
                if hashes > 0 && hashes <= level && trimmed[hashes..].starts_with(' ') {
                    return &text[begin..offset];
                }
            }
            None => {}
        }
        offset += line.len();
    }
    match start {
        Some(begin) => &text[begin..],
        None => panic!("{page} has no heading `{heading}`"),
    }
}

/// The body rows of the first table in `text`, each as its cells (the header and the
/// separator row left out). An escaped `\|` stays inside its cell.
pub fn first_table(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.trim_start().starts_with('|'))
        .take_while(|line| line.trim_start().starts_with('|'))
        .collect();
    lines
        .iter()
        .skip(2)
        .map(|line| {
            let line = line.trim().replace("\\|", "\u{1}");
            let inner = line.trim_start_matches('|').trim_end_matches('|');
            inner
                .split('|')
                .map(|cell| cell.replace('\u{1}', "|").trim().to_owned())
                .collect()
        })
        .collect()
}

/// The contents of the first fenced ```` ```text ```` block after the line of `text` that
/// contains `after`.
pub fn text_block<'a>(text: &'a str, page: &str, after: &str) -> &'a str {
    let from = text
        .find(after)
        .unwrap_or_else(|| panic!("{page} does not say `{after}`"));
    let rest = &text[from..];
    let open = rest
        .find("```text\n")
        .unwrap_or_else(|| panic!("{page} has no text block after `{after}`"))
        + "```text\n".len();
    let close = rest[open..]
        .find("```")
        .unwrap_or_else(|| panic!("{page}'s text block after `{after}` is not closed"));
    &rest[open..open + close]
}

/// The spans in backticks of `text`, in order.
pub fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// `text` without anything in parentheses (nested ones too): the notes of a picture or a cell.
pub fn without_notes(text: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    kept
}

/// The paragraphs of `text` (runs of lines between blank lines) that contain `phrase`, each
/// joined into one line.
pub fn paragraphs_with(text: &str, phrase: &str) -> Vec<String> {
    text.split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|paragraph| paragraph.contains(phrase))
        .collect()
}

#[test]
fn the_readers_find_what_they_read() {
    let page = "# A\n\nintro\n\n## The crates\n\n```sh\n# a comment\n```\n\n| a | b |\n|---|---|\n| `x` | `y` \\| z |\n\n### Sub\n\nmore\n\n## Next\n\n```text\na ──> b\n```\n";
    let crates = section(page, "page", "## The crates");
    assert!(crates.contains("### Sub") && !crates.contains("## Next"));
    assert_eq!(first_table(crates), vec![vec!["`x`", "`y` | z"]]);
    assert_eq!(text_block(page, "page", "## Next"), "a ──> b\n");
    assert_eq!(code_spans("`a` and `b` (`c`)"), ["a", "b", "c"]);
    assert_eq!(without_notes("a (b (c), d), e"), "a , e");
    assert_eq!(paragraphs_with(page, "more"), ["more"]);
}
