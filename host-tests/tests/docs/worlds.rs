//! The worlds and artifacts the documents name, against `wit/` (its `world` items) and the
//! build (`oma_guest_build::ARTIFACTS`, and the opt-in `FASTLY`): every world of `wit/` has its
//! artifact, every table of artifacts lists each with its world, and a count of worlds or
//! artifacts written anywhere is their number.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use oma_guest_build::{Artifact, ARTIFACTS, FASTLY, FASTLY_SIZE_LIMIT, SIZE_LIMITS};
use wit_parser::Resolve;

use crate::markdown::{code_spans, first_table, section};
use crate::{documents, generated, read, repository};

/// The worlds of the WIT package in the directory `dir` (relative to the root), with their
/// package: `oma:agent/component`.
fn worlds_of(dir: &str) -> BTreeSet<String> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(repository().join(dir))
        .unwrap_or_else(|e| panic!("{dir} resolves: {e:#}"));
    let package = &resolve.packages[package];
    package
        .worlds
        .keys()
        .map(|world| format!("{}:{}/{world}", package.name.namespace, package.name.name))
        .collect()
}

/// Every artifact the build makes, the opt-in one included.
fn every_artifact() -> Vec<Artifact> {
    ARTIFACTS.into_iter().chain([FASTLY]).collect()
}

#[test]
fn every_world_of_wit_has_its_artifact_and_every_artifact_its_world() {
    let declared = worlds_of("wit");
    let built: BTreeSet<String> = ARTIFACTS.iter().map(|a| a.world.to_owned()).collect();
    assert_eq!(
        declared, built,
        "the worlds of wit/ and the worlds oma-guest-build's ARTIFACTS are built for differ"
    );
    assert!(
        worlds_of("crates/fastly/wit").contains(FASTLY.world),
        "crates/fastly/wit declares no world {}",
        FASTLY.world
    );
}

/// Whether the cell's name `named` is the world `world`: in full, or by its bare name for a
/// world of `oma:agent`.
fn names_world(named: &str, world: &str) -> bool {
    named == world || world.strip_prefix("oma:agent/") == Some(named)
}

/// How the table of artifacts under `heading` of `page` differs from `expected`: each row's
/// first cell names an artifact, its second the artifact's world.
fn table_differences(page: &str, heading: &str, expected: &[Artifact]) -> Vec<String> {
    let text = read(page);
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for row in first_table(section(&text, page, heading)) {
        let spans = |i: usize| row.get(i).map(|cell| code_spans(cell)).unwrap_or_default();
        let (Some(&file), Some(&world)) = (spans(0).first(), spans(1).first()) else {
            problems.push(format!(
                "{page}: a row names no artifact or no world: {row:?}"
            ));
            continue;
        };
        match expected.iter().find(|artifact| artifact.file == file) {
            None => problems.push(format!("{page}: `{file}` is no artifact of the build")),
            Some(artifact) if !names_world(world, artifact.world) => problems.push(format!(
                "{page}: `{file}` is built for {}, the table says `{world}`",
                artifact.world
            )),
            Some(_) => {}
        }
        if !listed.insert(file.to_owned()) {
            problems.push(format!("{page}: `{file}` has two rows"));
        }
    }
    for artifact in expected {
        if !listed.contains(artifact.file) {
            problems.push(format!(
                "{page}: `{}` ({}) has no row under `{heading}`",
                artifact.file, artifact.world
            ));
        }
    }
    problems
}

#[test]
fn the_tables_of_artifacts_are_the_build() {
    let mut problems = Vec::new();
    problems.extend(table_differences(
        "README.md",
        "## Which artifact to take",
        &every_artifact(),
    ));
    problems.extend(table_differences(
        "docs/architecture.md",
        "## The worlds",
        &every_artifact(),
    ));
    // The page of `wit/`'s worlds: the opt-in artifact's world is Fastly's, not one of them.
    problems.extend(table_differences(
        "docs/worlds.md",
        "## The worlds",
        &ARTIFACTS,
    ));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A size ceiling a document quotes ("... `oma_routes.wasm` ... ceiling 1,729,000") is the one
/// `oma-guest-build --check-sizes` holds the first artifact named on that line to.
#[test]
fn the_ceilings_the_documents_quote_are_the_builds() {
    let root = repository();
    let limits: Vec<_> = SIZE_LIMITS.into_iter().chain([FASTLY_SIZE_LIMIT]).collect();
    let mut quoted = 0;
    let mut wrong = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(&doc).expect("a readable document");
        for line in text.lines() {
            let Some(at) = line.find("ceiling ") else {
                continue;
            };
            let digits: String = line[at + "ceiling ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ',')
                .filter(char::is_ascii_digit)
                .collect();
            let Ok(ceiling) = digits.parse::<u64>() else {
                continue;
            };
            let first = limits
                .iter()
                .filter_map(|limit| line.find(limit.artifact).map(|i| (i, limit)))
                .min_by_key(|&(i, _)| i);
            let Some((_, limit)) = first else {
                continue;
            };
            quoted += 1;
            if limit.ceiling != ceiling {
                let doc = doc.strip_prefix(&root).unwrap_or(&doc);
                wrong.push(format!(
                    "{}: {} at ceiling {ceiling}, SIZE_LIMITS says {}",
                    doc.display(),
                    limit.artifact,
                    limit.ceiling
                ));
            }
        }
    }
    assert!(quoted > 0, "no document quotes a ceiling");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What a counted phrase counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counted {
    /// The worlds of `wit/`.
    Worlds,
    /// The artifacts (or components, guests, world crates): the default ones, or those with
    /// the opt-in one.
    Artifacts,
}

/// The number a word spells, for the words a count is written with.
fn number(word: &str) -> Option<usize> {
    const WORDS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    WORDS
        .iter()
        .position(|&spelled| spelled == word)
        .map(|i| i + 1)
        .or_else(|| word.parse().ok())
}

/// Words that may stand between a count and what it counts without narrowing it ("the five
/// guest worlds"); any other word ("three gateway artifacts") makes the phrase a part, not the
/// whole, and it is not checked.
const WHOLE: &[&str] = &["guest", "shipped", "default", "built", "wasm"];

/// The counts of worlds and artifacts in `text`: "<number> [guest|shipped|...] worlds",
/// "... artifacts", "... components", "... guests" and "... world crates", read word by word
/// across line breaks and comment markers, each with the phrase as written.
fn counts(text: &str) -> Vec<(usize, Counted, String)> {
    // Each word lower-cased without the punctuation around it, and whether punctuation ends it
    // (which ends the phrase too: "three. Worlds" counts nothing).
    let words: Vec<(String, bool)> = text
        .split_whitespace()
        .filter(|token| !token.chars().all(|c| "/!#*|>-".contains(c)))
        .map(|token| {
            let bare = token.trim_start_matches(|c: char| !c.is_alphanumeric());
            let word = bare.trim_end_matches(|c: char| !c.is_alphanumeric());
            (word.to_lowercase(), word.len() < bare.len())
        })
        .collect();
    let mut found = Vec::new();
    for (i, (word, ended)) in words.iter().enumerate() {
        let Some(n) = number(word).filter(|_| !ended) else {
            continue;
        };
        let mut at = i + 1;
        let mut phrase = vec![word.as_str()];
        while let Some((next, ended)) = words.get(at) {
            if !WHOLE.contains(&next.as_str()) || *ended {
                break;
            }
            phrase.push(next);
            at += 1;
        }
        let Some((noun, _)) = words.get(at) else {
            continue;
        };
        let counted = match noun.as_str() {
            "worlds" => Counted::Worlds,
            "artifacts" | "components" | "guests" => Counted::Artifacts,
            "world" if !words[at].1 && words.get(at + 1).is_some_and(|(w, _)| w == "crates") => {
                phrase.push("world");
                at += 1;
                Counted::Artifacts
            }
            _ => continue,
        };
        phrase.push(&words[at].0);
        found.push((n, counted, phrase.join(" ")));
    }
    found
}

/// The files whose text may count worlds or artifacts: the documents, and the sources,
/// manifests, WIT and scripts of the repository (not vendored WIT, not generated trees).
fn counted_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !generated(&name) && name != "deps" {
                    walk(&path, found);
                }
            } else if [
                ".rs", ".wit", ".toml", ".py", ".js", ".mjs", ".sh", ".yaml", ".capnp",
            ]
            .iter()
            .any(|ext| name.ends_with(ext))
            {
                found.push(path);
            }
        }
    }
    let mut files = documents(root);
    for dir in [
        "src",
        "crates",
        "host-tests",
        "examples",
        "packages",
        "wit",
        "bench",
        "fuzz",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.push(root.join("Cargo.toml"));
    files.push(root.join(".ci/run"));
    files.push(root.join("packages/wasmcloud/.wash/config.yaml"));
    files
}

/// A count of worlds is the number of worlds of `wit/`; a count of artifacts (components,
/// guests, world crates) is the number the build makes, without or with the opt-in one. A
/// document that means some of them names them instead.
#[test]
fn every_count_of_worlds_and_artifacts_is_their_number() {
    let root = repository();
    let worlds = worlds_of("wit").len();
    let artifacts = [ARTIFACTS.len(), ARTIFACTS.len() + 1];
    let mut wrong = Vec::new();
    for file in counted_files(&root) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, counted, phrase) in counts(&text) {
            let right = match counted {
                Counted::Worlds => n == worlds,
                Counted::Artifacts => artifacts.contains(&n),
            };
            if !right {
                let file = file.strip_prefix(&root).unwrap_or(&file);
                wrong.push(format!("{}: \"{phrase}\"", file.display()));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "counts that are not the {worlds} worlds of wit/ or the {} artifacts of the build ({} \
         with {}); name the ones meant instead:\n  {}",
        artifacts[0],
        artifacts[1],
        FASTLY.file,
        wrong.join("\n  ")
    );
}

#[test]
fn counts_are_read_across_lines_and_comments() {
    let text = "the three\n//! worlds, all five guest\n# artifacts; three gateway artifacts; \
                six world crates; both worlds; two. Worlds; 6 components";
    let found: Vec<(usize, Counted)> = counts(text).into_iter().map(|(n, c, _)| (n, c)).collect();
    assert_eq!(
        found,
        [
            (3, Counted::Worlds),
            (5, Counted::Artifacts),
            (6, Counted::Artifacts),
            (6, Counted::Artifacts),
        ]
    );
    assert!(names_world("gateway-routes", "oma:agent/gateway-routes"));
    assert!(!names_world("gateway", "oma:fastly/gateway"));
}
