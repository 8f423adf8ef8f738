//! The agent runtime: where runs start ([`entry`]: OMA's `Agent` and `runAgent`), how a call's
//! input is prepared, how a `beforeRun` hook's result is merged into the run, what a run hands
//! its host and takes back ([`exchange`]), what progress events and online evaluation carry, how
//! a failure becomes a run outcome, the turn loop, the run itself as one state machine with no
//! I/O ([`machine`]), which every world drives with its own I/O, and what a traced run reports
//! of itself ([`observability`]).

pub mod before_run;
pub mod config;
pub mod context;
pub mod entry;
pub mod evaluation;
pub mod exchange;
pub mod host_adapter;
pub mod input;
pub mod loop_detect;
pub mod machine;
pub mod observability;
pub mod outcome;
pub mod progress;
pub mod redact;
pub mod structured;
pub mod trace;
pub mod turn;
