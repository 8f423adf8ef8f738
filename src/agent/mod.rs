//! The agent runtime's pure parts: how calls are retried and how a `beforeRun` hook's result
//! is merged into the run.

pub mod before_run;
pub mod retry;
