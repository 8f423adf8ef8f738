//! `check_sizes` holds artifacts to their ceilings: it passes at a ceiling, fails one byte over,
//! names the artifact, and fails when an artifact is missing; and every artifact of the build has
//! a ceiling.

use std::path::PathBuf;

use oma_guest_build::{check_sizes, ARTIFACTS, FASTLY, FASTLY_SIZE_LIMIT, SIZE_LIMITS};

/// The ceilings are the build's artifacts, each once: a new artifact cannot ship unmeasured.
#[test]
fn every_artifact_has_a_ceiling() {
    let files = ARTIFACTS.map(|artifact| artifact.file);
    let limited = SIZE_LIMITS.map(|limit| limit.artifact);
    assert_eq!(limited, files);
    assert_eq!(FASTLY_SIZE_LIMIT.artifact, FASTLY.file);
}

/// A fresh directory under the target directory, with each artifact `extra(limit)` bytes above
/// its ceiling (negative: below).
fn artifacts(name: &str, extra: impl Fn(usize) -> i64) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, limit) in SIZE_LIMITS.iter().enumerate() {
        let size = u64::try_from(limit.ceiling as i64 + extra(i)).unwrap();
        let file = std::fs::File::create(dir.join(limit.artifact)).unwrap();
        file.set_len(size).unwrap();
    }
    dir
}

#[test]
fn artifacts_at_their_ceilings_pass() {
    let dir = artifacts("sizes-at", |_| 0);
    let lines = std::cell::RefCell::new(Vec::new());
    check_sizes(&dir, &|line| lines.borrow_mut().push(line.to_owned())).unwrap();
    assert_eq!(lines.borrow().len(), SIZE_LIMITS.len());
}

#[test]
fn one_byte_over_fails_and_names_the_artifact() {
    let dir = artifacts("sizes-over", |i| if i == 1 { 1 } else { -100 });
    let error = check_sizes(&dir, &|_| {}).unwrap_err();
    assert!(error.contains(SIZE_LIMITS[1].artifact), "{error}");
    assert!(error.contains("1 over its ceiling"), "{error}");
    assert!(!error.contains(SIZE_LIMITS[0].artifact), "{error}");
}

#[test]
fn a_missing_artifact_fails() {
    let dir = artifacts("sizes-missing", |_| 0);
    std::fs::remove_file(dir.join(SIZE_LIMITS[2].artifact)).unwrap();
    let error = check_sizes(&dir, &|_| {}).unwrap_err();
    assert!(error.contains(SIZE_LIMITS[2].artifact), "{error}");
}
