//! The agent runtime: how a call's input is prepared, how a `beforeRun` hook's result is merged
//! into the run, what progress events and online evaluation carry, how a failure becomes a run
//! outcome, the turn loop, and the run itself as one state machine with no I/O ([`machine`]),
//! which every world drives with its own I/O.

pub mod before_run;
pub mod config;
pub mod evaluation;
pub mod input;
pub mod machine;
pub mod outcome;
pub mod progress;
pub mod redact;
pub mod session;
pub mod turn;
