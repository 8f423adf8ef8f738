//! OMA's structured agent input: the core of the oma-component guest.
//!
//! The guest of `oma:agent`: typed LLM messages made of text, image, video, tool-use,
//! tool-result and reasoning blocks, in the JSON shape of open-multi-agent (OMA), with OMA's
//! validation and OMA's exact error messages.
//!
//! Data flow: host value or OMA JSON -> [`json`] (OMA's shape guard, then typing) or the WIT
//! conversion in `component` -> [`validate`] (media rules: absolute http/https URLs, raw canonical
//! base64, parameterless MIME types) -> an owned copy the rest of the pipeline works on.
//!
//! ```
//! let messages = oma_core::json::messages_from_json(
//!     r#"[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]"#,
//! ).unwrap();
//! oma_core::validate::validate_messages(&messages).unwrap();
//!
//! let err = oma_core::json::messages_from_json(r#"[{"role": "user", "content": "hi"}]"#)
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "messages[0].content must be a ContentBlock[], got string");
//! ```
//!
//! Promises: every check runs before anything leaves the process; every failure is a typed
//! [`Error`] and no input makes the code panic (a trap would poison the host's
//! instance); validation reads media once and allocates nothing.
//!
//! The core is plain Rust with no I/O and no world features: it compiles natively and for
//! every wasm target the same way. The world crates (`oma-component`, `oma-portable`,
//! `oma-gateway`) bind the WIT and drive it; `oma-wasi` performs its HTTP steps over wasi:http.

#![deny(missing_docs)]
// The machines hand a refused answer back by value (`Refused<A>`), and a failed response carries
// its error with its retry hints: both are misuse or failure paths whose `Ok` side is small, and
// boxing them would only move the cost to every caller that inspects them.
#![allow(clippy::result_large_err)]

pub mod adapter;
pub mod agent;
pub mod bash_risk;
pub mod environment;
pub mod error;
pub mod eval;
pub mod http;
pub mod js_text;
pub mod json;
pub mod limits;
pub mod message;
pub mod retry;
pub mod rng;
pub mod secret;
mod sort;
pub mod validate;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod proptests;

pub use error::Error;
pub use message::*;
