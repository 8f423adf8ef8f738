//! How a run ended ([`RunOutcome`], the fields of OMA's `AgentRunResult` a run knows, and its
//! OMA JSON), and how a failed run is reported (`docs/agent.md#failure-classification`, OMA's
//! `classifyRunFailure`): the `status` and `errorInfo` of an `AgentRunResult`, built from an
//! [`Error`].
//!
//! Messages are redacted with [`redact_secrets`] before they are cut, so no secret and no
//! half of one reaches a result: `errorInfo.message` keeps at most 1024 characters and
//! `status.message` at most 256 (UTF-16 code units, as OMA counts them).

use serde::Serialize;
use serde_json::{json, Value};

use crate::agent::redact::redact_secrets;
use crate::error::{Error, ErrorKind};
use crate::message::{LlmMessage, TokenUsage, ToolResultContent};

/// The most characters `errorInfo.message` keeps.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 1024;

/// The most characters `status.message` keeps.
pub const MAX_STATUS_MESSAGE_CHARS: usize = 256;

/// How a run ended (`status.code`), for the failures an [`Error`] can describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StatusCode {
    /// Any failure not listed below.
    Error,
    /// The provider did not answer in time ([`Error::Timeout`]).
    Timeout,
    /// A policy refused the request before it was sent ([`Error::EgressDenied`]).
    Rejected,
    /// The run used more tokens than its budget ([`classify_budget`]).
    BudgetExhausted,
    /// The caller cancelled the run ([`classify_cancelled`]).
    Cancelled,
}

/// Where a failure came from (`errorInfo.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// A policy check refused the request (egress denials).
    Validation,
    /// A budget ran out (`TokenBudgetExceededError`).
    Budget,
    /// The run or a provider call ran past its time (`LLMCallTimeoutError`), as OMA classifies
    /// a timeout.
    Timeout,
    /// A hook (`beforeRun`, `afterRun`) failed.
    Callback,
    /// The provider failed, or the agent has a configured provider.
    Provider,
    /// The caller cancelled the run (OMA's `AbortError`).
    Cancellation,
    /// None of the above.
    Unknown,
}

/// `AgentRunResult.status` for a failed run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Status {
    /// How the run ended.
    pub code: StatusCode,
    /// The redacted message, at most [`MAX_STATUS_MESSAGE_CHARS`] characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `AgentRunResult.errorInfo`: a failure described without the error object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorInfo {
    /// Where the failure came from.
    pub kind: FailureKind,
    /// OMA's error code, e.g. `LLM_CALL_TIMEOUT`, when the class has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// OMA's class name, e.g. `InvalidMessageError`.
    pub name: String,
    /// The redacted message, at most [`MAX_ERROR_MESSAGE_CHARS`] characters.
    pub message: String,
    /// Whether trying again could succeed ([`Error::retryable`]).
    pub retryable: bool,
    /// The provider's HTTP status, when a response arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The provider involved: the error's own, else the agent's configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// The outcome fields of a failed run: `{"status": ..., "errorInfo": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// `AgentRunResult.status`.
    pub status: Status,
    /// `AgentRunResult.errorInfo`.
    pub error_info: ErrorInfo,
}

/// How far past the longest kept message redaction looks, in characters: a secret that starts
/// in the kept part and is shorter than this (PEM keys are a few thousand) is still matched whole.
const REDACTION_MARGIN: usize = 16 * 1024;

/// `text` with secrets redacted, as far as any message keeps it: the first
/// [`MAX_ERROR_MESSAGE_CHARS`] plus [`REDACTION_MARGIN`] characters. A provider's error body
/// can be megabytes, and redacting all of it only to keep 1024 characters cost OMA seconds.
fn redactable_prefix(text: &str) -> String {
    let end = text
        .char_indices()
        .nth(MAX_ERROR_MESSAGE_CHARS + REDACTION_MARGIN)
        .map_or(text.len(), |(at, _)| at);
    redact_secrets(&text[..end])
}

/// `text` cut to at most `max` UTF-16 code units, never splitting a character.
pub(crate) fn truncate_units(text: &str, max: usize) -> String {
    let mut used = 0;
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if used + c.len_utf16() > max {
            break;
        }
        used += c.len_utf16();
        end = at + c.len_utf8();
    }
    text[..end].to_owned()
}

/// Classifies a run's failure as OMA's `classifyRunFailure` does (`docs/agent.md#failure-classification`), in OMA's order:
///
/// 1. [`Error::Timeout`]: status `timeout`, kind `timeout`;
/// 2. [`Error::EgressDenied`]: status `rejected`, kind `validation`;
/// 3. anything else: status `error`.
///
/// Except for egress denials, the kind is `callback` when `from_hook` (the error came from
/// `beforeRun` or `afterRun`), else `provider` when the error has an HTTP status or the agent
/// has a `configured_provider`, else `unknown`.
pub fn classify(error: &Error, from_hook: bool, configured_provider: Option<&str>) -> Failure {
    let status_code = match error.kind() {
        ErrorKind::Timeout => StatusCode::Timeout,
        ErrorKind::EgressDenied => StatusCode::Rejected,
        _ => StatusCode::Error,
    };
    let kind = if status_code == StatusCode::Rejected {
        FailureKind::Validation
    } else if status_code == StatusCode::Timeout {
        FailureKind::Timeout
    } else if from_hook {
        FailureKind::Callback
    } else if error.http_status().is_some() || configured_provider.is_some() {
        FailureKind::Provider
    } else {
        FailureKind::Unknown
    };
    let message = redactable_prefix(&error.to_string());
    Failure {
        status: Status {
            code: status_code,
            message: Some(truncate_units(&message, MAX_STATUS_MESSAGE_CHARS)),
        },
        error_info: ErrorInfo {
            kind,
            code: error.code().map(str::to_owned),
            name: error.name().to_owned(),
            message: truncate_units(&message, MAX_ERROR_MESSAGE_CHARS),
            retryable: error.retryable(),
            http_status: error.http_status(),
            provider: error.provider().or(configured_provider).map(str::to_owned),
        },
    }
}

/// Classifies OMA's `TokenBudgetExceededError` (`docs/errors.md#error-classes`): status `budget_exhausted`, kind
/// `budget`, code `TOKEN_BUDGET_EXCEEDED`, not retryable. `message` is the error's message,
/// redacted and cut like any other.
pub fn classify_budget(message: &str) -> Failure {
    let message = redact_secrets(message);
    Failure {
        status: Status {
            code: StatusCode::BudgetExhausted,
            message: Some(truncate_units(&message, MAX_STATUS_MESSAGE_CHARS)),
        },
        error_info: ErrorInfo {
            kind: FailureKind::Budget,
            code: Some("TOKEN_BUDGET_EXCEEDED".to_owned()),
            name: "TokenBudgetExceededError".to_owned(),
            message: truncate_units(&message, MAX_ERROR_MESSAGE_CHARS),
            retryable: false,
            http_status: None,
            provider: None,
        },
    }
}

/// OMA's message for a run its caller cancelled.
pub const CANCELLED_MESSAGE: &str = "Run cancelled by caller.";

/// Classifies a run its caller cancelled as OMA classifies the `AbortError` it makes then:
/// status `cancelled`, kind `cancellation`, OMA's message (`Run cancelled by caller.`), not
/// retryable.
pub fn classify_cancelled() -> Failure {
    Failure {
        status: Status {
            code: StatusCode::Cancelled,
            message: Some(CANCELLED_MESSAGE.to_owned()),
        },
        error_info: ErrorInfo {
            kind: FailureKind::Cancellation,
            code: None,
            name: "AbortError".to_owned(),
            message: CANCELLED_MESSAGE.to_owned(),
            retryable: false,
            http_status: None,
            provider: None,
        },
    }
}

impl RunOutcome {
    /// The outcome of a run its caller cancelled after `turns` requests: no messages, zero
    /// usage, OMA's message as output, [`classify_cancelled`]'s classification.
    pub fn cancelled(turns: u32) -> Self {
        RunOutcome {
            output: CANCELLED_MESSAGE.to_owned(),
            messages: Vec::new(),
            token_usage: TokenUsage::default(),
            tool_calls: Vec::new(),
            turns,
            ending: Ending::Failed(classify_cancelled()),
            loop_detected: false,
            structured: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::evaluation::js_len;

    /// A result's `tokenUsage` is OMA's two counts, whatever the provider said of its cache.
    #[test]
    fn token_usage_is_omas_two_counts() {
        let outcome = RunOutcome {
            output: "ok".into(),
            messages: Vec::new(),
            token_usage: TokenUsage {
                input_tokens: 400,
                output_tokens: 7,
                cache_creation_input_tokens: 5,
                cache_read_input_tokens: 6,
                cached_input_tokens: 320,
            },
            tool_calls: Vec::new(),
            turns: 1,
            ending: Ending::Completed,
            loop_detected: false,
            structured: None,
        };
        assert_eq!(
            outcome_json(&outcome)["tokenUsage"],
            json!({"input_tokens": 400, "output_tokens": 7})
        );
    }

    fn provider(status: Option<u16>, message: &str) -> Error {
        Error::Provider {
            provider: "openai".into(),
            status,
            message: message.into(),
            code: None,
            error_type: None,
        }
    }

    /// (error, from_hook, configured provider) -> (status code, kind).
    #[test]
    fn classification_table() {
        let timeout = Error::Timeout {
            provider: "anthropic".into(),
            timeout_ms: 5,
        };
        let egress = Error::EgressDenied {
            message: "egress to https://x.test denied".into(),
        };
        let invalid = Error::invalid("messages must be an array, got string");
        let cases = [
            (
                &timeout,
                false,
                None,
                StatusCode::Timeout,
                FailureKind::Timeout,
            ),
            (
                &timeout,
                false,
                Some("anthropic"),
                StatusCode::Timeout,
                FailureKind::Timeout,
            ),
            (
                &timeout,
                true,
                None,
                StatusCode::Timeout,
                FailureKind::Timeout,
            ),
            (
                &egress,
                false,
                None,
                StatusCode::Rejected,
                FailureKind::Validation,
            ),
            (
                &egress,
                true,
                Some("openai"),
                StatusCode::Rejected,
                FailureKind::Validation,
            ),
            (
                &invalid,
                false,
                None,
                StatusCode::Error,
                FailureKind::Unknown,
            ),
            (
                &invalid,
                true,
                None,
                StatusCode::Error,
                FailureKind::Callback,
            ),
            (
                &invalid,
                false,
                Some("openai"),
                StatusCode::Error,
                FailureKind::Provider,
            ),
        ];
        for (error, hook, configured, code, kind) in cases {
            let failure = classify(error, hook, configured);
            assert_eq!(failure.status.code, code, "{error:?} {hook} {configured:?}");
            assert_eq!(
                failure.error_info.kind, kind,
                "{error:?} {hook} {configured:?}"
            );
        }
        let with_status = provider(Some(503), "down");
        assert_eq!(
            classify(&with_status, false, None).error_info.kind,
            FailureKind::Provider
        );
        let network = provider(None, "connection refused");
        assert_eq!(
            classify(&network, false, None).error_info.kind,
            FailureKind::Unknown
        );
        assert_eq!(
            classify(&with_status, true, None).error_info.kind,
            FailureKind::Callback
        );
    }

    #[test]
    fn serialises_in_omas_camel_case() {
        let failure = classify(&provider(Some(429), "slow down"), false, None);
        assert_eq!(
            serde_json::to_value(&failure).unwrap(),
            json!({
                "status": {"code": "error", "message": "429 slow down"},
                "errorInfo": {"kind": "provider", "name": "ProviderError",
                    "message": "429 slow down", "retryable": true, "httpStatus": 429,
                    "provider": "openai"},
            })
        );
        let failure = classify(
            &Error::Timeout {
                provider: "anthropic".into(),
                timeout_ms: 30,
            },
            false,
            None,
        );
        assert_eq!(
            serde_json::to_value(&failure).unwrap(),
            json!({
                "status": {"code": "timeout",
                    "message": "LLM call exceeded per-call timeout of 30ms"},
                "errorInfo": {"kind": "timeout", "code": "LLM_CALL_TIMEOUT",
                    "name": "LLMCallTimeoutError",
                    "message": "LLM call exceeded per-call timeout of 30ms",
                    "retryable": true, "provider": "anthropic"},
            })
        );
        let failure = classify(&Error::invalid("bad"), true, Some("gemini"));
        assert_eq!(
            serde_json::to_value(&failure).unwrap(),
            json!({
                "status": {"code": "error", "message": "bad"},
                "errorInfo": {"kind": "callback", "code": "INVALID_MESSAGE",
                    "name": "InvalidMessageError", "message": "bad", "retryable": false,
                    "provider": "gemini"},
            })
        );
        let failure = classify(
            &Error::EgressDenied {
                message: "no".into(),
            },
            false,
            None,
        );
        assert_eq!(
            serde_json::to_value(&failure).unwrap()["status"]["code"],
            json!("rejected")
        );
        assert_eq!(
            serde_json::to_value(&failure).unwrap()["errorInfo"]["kind"],
            json!("validation")
        );
    }

    #[test]
    fn messages_are_redacted_and_cut() {
        let failure = classify(
            &provider(
                Some(401),
                "Incorrect API key provided: sk-abcdefghijklmnop1234",
            ),
            false,
            None,
        );
        assert_eq!(
            failure.error_info.message,
            "401 Incorrect API key provided: [redacted]"
        );
        assert_eq!(
            failure.status.message.as_deref(),
            Some(failure.error_info.message.as_str())
        );

        let long = format!("{}api_key=secretvalue", "😀".repeat(600));
        let failure = classify(&provider(None, &long), false, None);
        assert!(js_len(&failure.error_info.message) <= MAX_ERROR_MESSAGE_CHARS);
        assert_eq!(failure.error_info.message, "😀".repeat(512));
        let status = failure.status.message.unwrap();
        assert_eq!(status, "😀".repeat(128));
        // The secret straddling the cut is redacted first, so no part of it survives.
        let long = format!("{}password=hunter2hunter2", "a".repeat(1010));
        let failure = classify(&provider(None, &long), false, None);
        assert!(!failure.error_info.message.contains("hunter"));
        assert_eq!(js_len(&failure.error_info.message), MAX_ERROR_MESSAGE_CHARS);
    }

    #[test]
    fn truncation_keeps_whole_chars() {
        assert_eq!(truncate_units("", 3), "");
        assert_eq!(truncate_units("abc", 3), "abc");
        assert_eq!(truncate_units("abcd", 3), "abc");
        assert_eq!(truncate_units("a😀b", 2), "a");
        assert_eq!(truncate_units("a😀b", 3), "a😀");
    }

    #[test]
    fn a_huge_message_is_redacted_where_it_is_kept() {
        let key = "sk-abcdefghijklmnopqrstuvwxyz123456";
        // A secret straddling the 1024-character cut, then a megabyte of body.
        let message = format!("{} {key} {}", "e".repeat(1000), "x".repeat(1 << 20));
        let error = Error::Provider {
            provider: "openai".into(),
            status: Some(502),
            message,
            code: None,
            error_type: None,
        };
        let failure = classify(&error, false, None);
        let info = &failure.error_info.message;
        assert!(!info.contains("sk-abc"), "half a key leaked");
        assert!(info.contains("[redacted]"));
        assert_eq!(info.chars().count(), MAX_ERROR_MESSAGE_CHARS);
        // Text shifted into the kept part by the redaction comes from the redacted prefix.
        assert!(info.ends_with('x'));
    }
}

/// One tool call of the run (OMA's `ToolCallRecord`, without the duration: the loop has no
/// clock).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallRecord {
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments.
    pub input: serde_json::Value,
    /// What the tool returned.
    pub output: ToolResultContent,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// How a run ended: the fields of OMA's `AgentRunResult` the loop knows.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// The text of the last assistant turn (its text blocks joined with `''`); the error's
    /// message after a failure.
    pub output: String,
    /// Only the messages this run produced (assistant turns and tool-result user turns), never
    /// the input; empty after a failure.
    pub messages: Vec<LlmMessage>,
    /// Tokens used, summed over the turns; zero after a failure (as OMA reports).
    pub token_usage: TokenUsage,
    /// The tool calls, in call order; empty after a failure.
    pub tool_calls: Vec<ToolCallRecord>,
    /// How many chat requests were sent.
    pub turns: u32,
    /// Whether the run completed, ran out of budget, or failed.
    pub ending: Ending,
    /// Whether loop detection ended the run (OMA's `loopDetected`).
    pub loop_detected: bool,
    /// The final answer's JSON value once it matched the agent's `outputSchema` (OMA's
    /// `structured`); `None` without a schema, for a streamed run, and when validation failed
    /// after the retry (`docs/agent.md#structured-output`).
    pub structured: Option<Value>,
}

/// How a run ended; each case holds exactly what that ending has.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The run completed (`success: true`).
    Completed,
    /// The token budget ran out (`success: false`, `budgetExceeded: true`): the run's messages
    /// and usage are kept, and the failure is OMA's `TokenBudgetExceededError`.
    BudgetExceeded(Failure),
    /// An error ended the run (`success: false`): no messages, zero usage, the error's message
    /// as output, and its classification.
    Failed(Failure),
}

impl RunOutcome {
    /// A failed outcome for `error` after `turns` requests, classified with `classify`.
    pub fn failed(error: &Error, turns: u32, failure: Failure) -> Self {
        RunOutcome {
            output: error.to_string(),
            messages: Vec::new(),
            token_usage: TokenUsage::default(),
            tool_calls: Vec::new(),
            turns,
            ending: Ending::Failed(failure),
            loop_detected: false,
            structured: None,
        }
    }

    /// Whether the run succeeded (OMA's `success`).
    pub fn success(&self) -> bool {
        matches!(self.ending, Ending::Completed)
    }

    /// Whether the run ended because the token budget ran out (OMA's `budgetExceeded`).
    pub fn budget_exceeded(&self) -> bool {
        matches!(self.ending, Ending::BudgetExceeded(_))
    }

    /// `status` and `errorInfo` of a run that did not succeed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.ending {
            Ending::Completed => None,
            Ending::BudgetExceeded(failure) | Ending::Failed(failure) => Some(failure),
        }
    }
}

/// A run result in OMA's JSON shape (`AgentRunResult`): `success`, `output`, `messages`,
/// `tokenUsage`, `toolCalls`, and `structured`, `budgetExceeded`, `status`, `errorInfo` when
/// they apply.
pub fn outcome_json(outcome: &RunOutcome) -> Value {
    let tool_calls: Vec<Value> = outcome
        .tool_calls
        .iter()
        .map(|call| {
            let mut record = json!({
                "toolName": call.tool_name,
                "input": call.input,
                "output": call.output,
            });
            if call.is_error {
                record["isError"] = json!(true);
            }
            record
        })
        .collect();
    let mut value = json!({
        "success": outcome.success(),
        "output": outcome.output,
        "messages": crate::json::messages_to_value(&outcome.messages),
        // OMA's `TokenUsage` holds the two counts only; what the provider said of its prompt
        // cache stays in the model call's usage (its span, the gateway's answers).
        "tokenUsage": {
            "input_tokens": outcome.token_usage.input_tokens,
            "output_tokens": outcome.token_usage.output_tokens,
        },
        "toolCalls": tool_calls,
        "turns": outcome.turns,
    });
    if let Some(structured) = &outcome.structured {
        value["structured"] = structured.clone();
    }
    if outcome.loop_detected {
        value["loopDetected"] = json!(true);
    }
    if outcome.budget_exceeded() {
        value["budgetExceeded"] = json!(true);
    }
    if let Some(failure) = outcome.failure() {
        value["status"] = json!(failure.status);
        value["errorInfo"] = json!(failure.error_info);
    }
    value
}
