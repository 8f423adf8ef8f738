//! The shared benchmark inputs of `../shared/bench/gen_workloads.py`: where they are and how a
//! benchmark reads one.

use std::path::PathBuf;

/// Every workload, in the generator's order.
pub const WORKLOADS: &[&str] = &[
    "chat-small",
    "chat-history-51",
    "vision-1mib",
    "tools-rich-20",
    "video-url",
    "video-16mib",
];

/// `$OMA_WORKLOADS`, else `target/workloads` in the workspace.
pub fn workloads_dir() -> PathBuf {
    match std::env::var_os("OMA_WORKLOADS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/workloads")),
    }
}

/// The OMA JSON of workload `name`, or `None` with a note on standard error saying how to
/// generate it (`label` names what is skipped, e.g. `run/chat-small`).
pub fn read_workload(label: &str, name: &str) -> Option<String> {
    let path = workloads_dir().join(format!("{name}.json"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(_) => {
            eprintln!(
                "{label}: skipped, {} is missing (generate the workloads with \
                 `python3 ../shared/bench/gen_workloads.py target/workloads` from the workspace \
                 root, or set OMA_WORKLOADS)",
                path.display()
            );
            None
        }
    }
}
