//! `docs/architecture.md`'s picture of the crates against the workspace: the table of crates
//! (every member once, at its path), the dependency picture (every arrow a dependency of its
//! kind, every dependency between members an arrow), the table of dependencies (every other
//! package a member depends on, and nothing else), and what `cargo test` at the root runs.

use std::collections::{BTreeMap, BTreeSet};

use crate::markdown::{
    code_spans, first_table, paragraphs_with, section, text_block, without_notes,
};
use crate::read;
use crate::workspace::{Kind, Workspace};

const PAGE: &str = "docs/architecture.md";

/// The arrows of the dependency picture and the kind each draws.
const ARROWS: [(&str, Kind); 2] = [("──>", Kind::Normal), ("··>", Kind::BuildOrDev)];

/// The directory the table of crates names a member by: its own, or `src/` for the root
/// package, which is named by its sources.
fn named_dir(dir: &str) -> &str {
    if dir.is_empty() {
        "src"
    } else {
        dir
    }
}

#[test]
fn the_table_of_crates_is_the_workspace() {
    let workspace = Workspace::read();
    let page = read(PAGE);
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for row in first_table(section(&page, PAGE, "## The crates")) {
        // A row whose package cell holds no name in backticks is not a crate (`crates/glue`).
        let (Some(path), Some(package)) = (row.first(), row.get(1)) else {
            continue;
        };
        if !package.starts_with('`') {
            continue;
        }
        let (Some(path), Some(package)) = (
            code_spans(path).first().copied(),
            code_spans(package).first().copied(),
        ) else {
            problems.push(format!("a row names no path or package: {row:?}"));
            continue;
        };
        let path = path.trim_end_matches('/').to_owned();
        if named.insert(package.to_string(), path).is_some() {
            problems.push(format!("`{package}` has two rows"));
        }
    }
    for (name, member) in &workspace.members {
        match named.remove(name) {
            None => problems.push(format!(
                "the workspace member `{name}` ({}) has no row",
                named_dir(&member.dir)
            )),
            Some(path) if path != named_dir(&member.dir) => problems.push(format!(
                "`{name}` is at `{}`, its row says `{path}`",
                named_dir(&member.dir)
            )),
            Some(_) => {}
        }
    }
    for (name, path) in named {
        problems.push(format!(
            "the row of `{name}` (`{path}`) is no workspace member"
        ));
    }
    assert!(
        problems.is_empty(),
        "{PAGE}'s table of crates is not the workspace:\n  {}",
        problems.join("\n  ")
    );
}

/// The arrows of the picture: `a ──> b, c` draws a dependency of `a` on `b` and on `c`; a line
/// may chain (`a ──> b ──> c`) and list several crates on either side; notes in parentheses
/// are not names.
fn picture_arrows(picture: &str) -> Result<BTreeMap<(String, String), Kind>, String> {
    let mut arrows = BTreeMap::new();
    for line in picture.lines() {
        let mut line = without_notes(line);
        let mut groups = Vec::new();
        let mut kinds = Vec::new();
        loop {
            let next = ARROWS
                .iter()
                .filter_map(|&(arrow, kind)| line.find(arrow).map(|at| (at, arrow, kind)))
                .min_by_key(|&(at, _, _)| at);
            let Some((at, arrow, kind)) = next else {
                groups.push(line.clone());
                break;
            };
            groups.push(line[..at].to_owned());
            kinds.push(kind);
            line = line[at + arrow.len()..].to_owned();
        }
        let groups: Vec<Vec<String>> = groups
            .iter()
            .map(|group| {
                group
                    .split(',')
                    .map(|name| name.trim().to_owned())
                    .filter(|name| !name.is_empty())
                    .collect()
            })
            .collect();
        for (i, kind) in kinds.into_iter().enumerate() {
            for from in &groups[i] {
                for to in &groups[i + 1] {
                    let key = (from.clone(), to.clone());
                    if arrows.insert(key, kind).is_some_and(|drawn| drawn != kind) {
                        return Err(format!("`{from}` to `{to}` is drawn with both arrows"));
                    }
                }
            }
        }
    }
    Ok(arrows)
}

#[test]
fn the_dependency_picture_is_the_workspace() {
    let workspace = Workspace::read();
    let page = read(PAGE);
    let picture = text_block(&page, PAGE, "Dependencies between the crates");
    let drawn = picture_arrows(picture).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let arrow = |kind| match kind {
        Kind::Normal => "──>",
        Kind::BuildOrDev => "··>",
    };
    let mut problems = Vec::new();
    for ((from, to), &kind) in &drawn {
        for name in [from, to] {
            if !workspace.members.contains_key(name) {
                problems.push(format!("`{name}` is drawn but is no workspace member"));
            }
        }
        let Some(member) = workspace.members.get(from) else {
            continue;
        };
        match member.members.get(to) {
            None => problems.push(format!(
                "`{from} {} {to}` is drawn, but {from} does not depend on {to}",
                arrow(kind)
            )),
            Some(&declared) if declared != kind => problems.push(format!(
                "`{from} {} {to}` is drawn, but the dependency is `{}`",
                arrow(kind),
                arrow(declared)
            )),
            Some(_) => {}
        }
    }
    for (name, member) in &workspace.members {
        for (to, &kind) in &member.members {
            if !drawn.contains_key(&(name.clone(), to.clone())) {
                problems.push(format!(
                    "`{name}` depends on `{to}`: draw `{name} {} {to}`",
                    arrow(kind)
                ));
            }
        }
        if !drawn.keys().any(|(from, to)| from == name || to == name) {
            problems.push(format!(
                "the workspace member `{name}` is not in the picture"
            ));
        }
    }
    problems.dedup();
    assert!(
        problems.is_empty(),
        "{PAGE}'s dependency picture is not the workspace (`──>` links, `··>` builds or \
         tests):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_picture_is_read_arrow_by_arrow() {
    let arrows =
        picture_arrows("a (the root) ──> b, c (notes, with commas) ──> d\ne ··> a (its tests)\n")
            .unwrap();
    let pairs: Vec<(&str, &str, Kind)> = arrows
        .iter()
        .map(|((from, to), &kind)| (from.as_str(), to.as_str(), kind))
        .collect();
    assert_eq!(
        pairs,
        [
            ("a", "b", Kind::Normal),
            ("a", "c", Kind::Normal),
            ("b", "d", Kind::Normal),
            ("c", "d", Kind::Normal),
            ("e", "a", Kind::BuildOrDev),
        ]
    );
    assert!(picture_arrows("a ──> b\na ··> b").is_err());
}

/// Every package a member depends on, beside the members, has its reason in the table of
/// dependencies, and the table names no package that none depends on (notes in parentheses,
/// such as features, are not names).
#[test]
fn the_table_of_dependencies_names_every_dependency() {
    let workspace = Workspace::read();
    let page = read(PAGE);
    let mut named = BTreeSet::new();
    for row in first_table(section(&page, PAGE, "## Dependencies, and why")) {
        let cell = without_notes(row.first().map(String::as_str).unwrap_or_default());
        named.extend(code_spans(&cell).into_iter().map(str::to_owned));
    }
    let used = workspace.external();
    let missing: Vec<&String> = used.difference(&named).collect();
    let unused: Vec<&String> = named.difference(&used).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "{PAGE}'s table of dependencies: no row for {missing:?}; rows for {unused:?}, which no \
         crate depends on"
    );
}

/// What the documents say `cargo test` at the root runs: every paragraph that says so names,
/// in backticks, exactly the members `default-members` leaves out (none when it leaves out
/// none).
#[test]
fn what_cargo_test_runs_is_what_the_documents_say() {
    let workspace = Workspace::read();
    let left_out = workspace.left_out_of_cargo_test();
    let mut problems = Vec::new();
    let mut found = 0;
    for page in ["README.md", PAGE] {
        for paragraph in paragraphs_with(&read(page), "`cargo test` at the root runs") {
            found += 1;
            let named: BTreeSet<String> = code_spans(&paragraph)
                .into_iter()
                .filter(|span| workspace.members.contains_key(*span))
                .map(str::to_owned)
                .collect();
            if named != left_out {
                problems.push(format!(
                    "{page} names {named:?} where `cargo test` leaves out {left_out:?}: \
                     {paragraph}"
                ));
            }
        }
    }
    assert!(
        found > 0,
        "no document says what `cargo test` at the root runs"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
