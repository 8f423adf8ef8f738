//! The error contract (`docs/errors.md`) in JSON: what `oma-host` prints and what hosts compare.

use serde_json::{json, Map, Value};

use crate::bindings::oma::agent::types::Error as WitError;

/// The component's error as the contract's JSON:
/// `{"error": {"name", "code"[, "type"], "message", "retryable"[, "httpStatus", "provider"]}}`.
///
/// `code` is `null` when the class has none (or the provider sent none); `type` appears only
/// when the provider's error has one; `httpStatus` and `provider` appear only for
/// provider failures. This is the same shape the guest's native `Error::to_json` produces.
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
    json!({ "error": inner })
}
