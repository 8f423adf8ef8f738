//! The agent runtime's pure parts: how calls are retried, how a `beforeRun` hook's result is
//! merged into the run, what progress events and online evaluation carry, and how a failure
//! becomes a run outcome; and the turn loop itself, as a state machine with no I/O.

pub mod before_run;
pub mod evaluation;
pub mod input;
pub mod outcome;
pub mod progress;
pub mod retry;
pub mod session;
pub mod turn;
