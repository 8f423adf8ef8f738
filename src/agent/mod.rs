//! The agent runtime's pure parts: how calls are retried.

pub mod retry;
