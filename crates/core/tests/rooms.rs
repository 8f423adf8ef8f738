//! No import circle inside a room of the core: within each module that has modules of its own
//! (a room: `agent`, `json`, `http`, the crate itself), the modules it holds depend on one
//! another in one direction only, so each can be read, and moved, after the ones it uses.
//!
//! A module's dependencies are read from its source: every `crate::` path (in a `use` or in the
//! code) and every `super::` path, counted for the module of the room that holds the file. Tests
//! (`tests.rs` files, a trailing `#[cfg(test)] mod tests`) and comments do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate's root (`["agent", "machine"]`), and its source.
type Source = (Vec<String>, String);

#[test]
fn no_room_of_the_core_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read(&root, &mut Vec::new(), &mut sources);
    assert!(sources.len() > 50, "read {} modules", sources.len());
    let circles = circles(&sources);
    assert!(
        circles.is_empty(),
        "import circles inside a room (room: modules): {circles:#?}"
    );
}

#[test]
fn a_circle_is_found() {
    let module = |path: &str, text: &str| -> Source {
        (
            path.split("::").map(str::to_owned).collect(),
            text.to_owned(),
        )
    };
    let sources = [
        module("room", "pub mod a; pub mod b; pub mod c;"),
        module("room::a", "use crate::room::{b::{X, Y}, other};"),
        module("room::b", "fn f() { super::c::g() }"),
        // A comment and a test name no module.
        module(
            "room::c",
            "// crate::room::a\nfn g() {}\n#[cfg(test)]\nmod tests { use crate::room::a; }",
        ),
        module("room::d", "fn h() { crate::room::e::i() }"),
        module("room::e", "use crate::room::d::h; use crate::room::b;"),
    ];
    assert_eq!(circles(&sources), vec!["room: d, e".to_owned()]);
}

/// Reads the modules under `dir` (whose module path is `at`) into `sources`.
fn read(dir: &Path, at: &mut Vec<String>, sources: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("the source directory")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_stem()
            .and_then(|name| name.to_str())
            .expect("a UTF-8 name")
            .to_owned();
        if path.is_dir() {
            at.push(name);
            read(&path, at, sources);
            at.pop();
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            if name == "tests" || name == "proptests" {
                continue;
            }
            let mut module = at.clone();
            if name != "mod" && name != "lib" {
                module.push(name);
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            sources.push((module, text));
        }
    }
}

/// The circles found, one line each: the room, then the modules of the circle.
fn circles(sources: &[Source]) -> Vec<String> {
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|(path, _)| path.clone()).collect();
    let rooms: BTreeSet<&[String]> = modules
        .iter()
        .filter(|path| !path.is_empty())
        .map(|path| &path[..path.len() - 1])
        .collect();
    let references: Vec<(&[String], BTreeSet<Vec<String>>)> = sources
        .iter()
        .map(|(path, text)| (path.as_slice(), references(path, text, &modules)))
        .collect();
    let mut found = Vec::new();
    for room in rooms {
        let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (path, targets) in &references {
            let Some(from) = child_of(room, path) else {
                continue;
            };
            for to in targets.iter().filter_map(|target| child_of(room, target)) {
                if to != from {
                    edges.entry(from).or_default().insert(to);
                }
            }
        }
        let name = if room.is_empty() {
            "crate".to_owned()
        } else {
            room.join("::")
        };
        for circle in strongly_connected(&edges) {
            found.push(format!("{name}: {}", circle.join(", ")));
        }
    }
    found
}

/// The module of `room` that holds `path`, if `path` is inside the room and not the room.
fn child_of<'a>(room: &[String], path: &'a [String]) -> Option<&'a str> {
    (path.len() > room.len() && path.starts_with(room)).then(|| path[room.len()].as_str())
}

/// The modules the code of `module` names through `crate::` and `super::` paths.
fn references(
    module: &[String],
    text: &str,
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let code = without_tests_and_comments(text);
    let mut found = BTreeSet::new();
    for start in ["crate::", "super::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let base = if start == "crate::" {
                Vec::new()
            } else {
                module[..module.len().saturating_sub(1)].to_vec()
            };
            for path in expand(&code[at + start.len()..]) {
                let mut full = base.clone();
                for part in path {
                    match part.as_str() {
                        "self" => {}
                        "super" => {
                            full.pop();
                        }
                        _ => full.push(part),
                    }
                }
                if let Some(target) = (1..=full.len())
                    .rev()
                    .map(|n| full[..n].to_vec())
                    .find(|prefix| modules.contains(prefix))
                {
                    found.insert(target);
                }
            }
        }
    }
    found
}

/// The paths a use-tree names (`a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`), read
/// from the start of `text` to the end of the tree.
fn expand(text: &str) -> Vec<Vec<String>> {
    let mut head = Vec::new();
    let mut word = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            c if c.is_alphanumeric() || c == '_' => word.push(c),
            ':' if chars.peek().map(|(_, c)| *c) == Some(':') => {
                chars.next();
                head.push(std::mem::take(&mut word));
            }
            '{' => {
                let inner = &text[at + 1..];
                let mut depth = 0;
                let mut start = 0;
                let mut paths = Vec::new();
                for (i, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            paths.extend(branch(&head, &inner[start..i]));
                            return paths;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            paths.extend(branch(&head, &inner[start..i]));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                return paths;
            }
            _ => break,
        }
    }
    if !word.is_empty() {
        head.push(word);
    }
    vec![head]
}

/// One branch of a use-tree group under `head`.
fn branch(head: &[String], text: &str) -> Vec<Vec<String>> {
    let text = text.trim_start();
    if text.is_empty() {
        return Vec::new();
    }
    expand(text)
        .into_iter()
        .map(|path| head.iter().cloned().chain(path).collect())
        .collect()
}

/// `text` without line comments and without its test module (`mod tests`, last in a file).
fn without_tests_and_comments(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        // The test module, at the end of a file.
        if line.starts_with("mod tests") {
            break;
        }
        let line = line.find("//").map_or(line, |at| &line[..at]);
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The strongly connected sets of more than one module (Tarjan's algorithm), each sorted.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Search<'a, 'e> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    impl<'a> Search<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, (n, n));
            self.stack.push(node);
            for &next in self.edges.get(node).into_iter().flatten() {
                match self.index.get(next) {
                    None => {
                        self.visit(next);
                        let low = self.index[next].1;
                        let entry = self.index.get_mut(node).expect("visited");
                        entry.1 = entry.1.min(low);
                    }
                    Some(&(index, _)) if self.stack.contains(&next) => {
                        let entry = self.index.get_mut(node).expect("visited");
                        entry.1 = entry.1.min(index);
                    }
                    Some(_) => {}
                }
            }
            let (index, low) = self.index[node];
            if index == low {
                let at = self
                    .stack
                    .iter()
                    .rposition(|n| *n == node)
                    .expect("on the stack");
                let mut set = self.stack.split_off(at);
                if set.len() > 1 {
                    set.sort_unstable();
                    self.found.push(set);
                }
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    let nodes: Vec<&str> = edges.keys().copied().collect();
    for node in nodes {
        if !search.index.contains_key(node) {
            search.visit(node);
        }
    }
    search.found
}
