//! The agent runtime's pure parts: how calls are retried, what progress events and online
//! evaluation carry, and how a failure becomes a run outcome.

pub mod evaluation;
pub mod outcome;
pub mod progress;
pub mod retry;
