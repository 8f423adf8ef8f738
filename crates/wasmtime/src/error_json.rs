//! The error contract (`docs/errors.md`) in JSON: what `oma-host` prints and what hosts compare.

use serde_json::{json, Map, Value};

use crate::bindings::oma::agent::types::Error as WitError;
use crate::limits::LimitExceeded;

/// The component's error as the contract's JSON:
/// `{"error": {"name", "code"[, "type"], "message", "retryable"[, "httpStatus", "provider",
/// "blockType"]}}`.
///
/// `code` is `null` when the class has none (or the provider sent none); `type` appears only
/// when the provider's error has one; `httpStatus` and `provider` appear only for
/// provider failures, except that an `UnsupportedContentBlockError` carries `provider` (the
/// adapter that refused the block) and `blockType`, as OMA's class does. This is the same shape the guest's native `Error::to_json` produces.
pub fn error_json(error: &WitError) -> Value {
    let mut inner = Map::new();
    inner.insert("name".into(), json!(error.name));
    inner.insert("code".into(), json!(error.code));
    if let Some(error_type) = &error.error_type {
        inner.insert("type".into(), json!(error_type));
    }
    inner.insert("message".into(), json!(error.message));
    inner.insert("retryable".into(), json!(error.retryable));
    if let Some(status) = error.http_status {
        inner.insert("httpStatus".into(), json!(status));
    }
    if let Some(provider) = &error.provider {
        inner.insert("provider".into(), json!(provider));
    }
    if let Some(block_type) = &error.block_type {
        inner.insert("blockType".into(), json!(block_type));
    }
    json!({ "error": inner })
}

/// What a failure of the host (the guest trapped, went past a limit, or could not be run) says
/// to a user, in one line: the [`LimitExceeded`](crate::LimitExceeded) that ended the call when
/// a limit did (which limit, and how far past it), else the chain of messages without the wasm
/// backtrace wasmtime attaches to a trap (frames such as `oma_component.wasm!sbrk` help no one
/// and show the guest's internals), each cause on its first line only.
pub fn host_error_message(error: &anyhow::Error) -> String {
    if let Some(exceeded) = LimitExceeded::of(error) {
        return match exceeded {
            LimitExceeded::Memory { .. } => format!(
                "the component ran out of memory: {exceeded} (the linear-memory limit of one \
                 instance)"
            ),
            LimitExceeded::Budget { .. } => format!(
                "the component ran out of memory: {exceeded} (the memory budget all instances \
                 share)"
            ),
            LimitExceeded::Deadline { .. } => {
                format!("the component took too long: {exceeded}")
            }
        };
    }
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        // wasmtime attaches a trap's backtrace as a context whose text starts so.
        if text.contains("wasm backtrace:") {
            continue;
        }
        let line = text.lines().next().unwrap_or_default().trim().to_owned();
        if !line.is_empty() && !parts.iter().any(|seen| seen.contains(&line)) {
            parts.push(line);
        }
    }
    if parts.is_empty() {
        return "the component failed".to_owned();
    }
    parts.join(": ")
}

/// A host failure as the contract's JSON: `{"error": {"name": "HostError", "code",
/// "message", "retryable": false}}`, the message from [`host_error_message`]; `code` is
/// `GUEST_LIMIT_EXCEEDED` when a limit ended the call, else `null`.
pub fn host_error_json(error: &anyhow::Error) -> Value {
    let code = LimitExceeded::of(error).map(|_| "GUEST_LIMIT_EXCEEDED");
    json!({"error": {
        "name": "HostError",
        "code": code,
        "message": host_error_message(error),
        "retryable": false,
    }})
}
