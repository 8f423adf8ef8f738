//! OMA's trace events for one agent (`onTrace`, `docs/agent.md#tracing`): an `llm_call` per
//! model call, a `tool_call` per tool call and an `agent` per run, each with the run's id, its
//! own span id, its parent's, the agent's name and its start, end and duration.
//!
//! The events are one view of a run's spans: the tracer of [`crate::agent::observability`] makes
//! them, as it makes OMA's trace records, from the spans the run machine tells it of. Times
//! come from the machine's `poll` instants, and ids from a random source seeded with the run's
//! seed, so the machine still reads no clock and no random source. Hosts deliver them to their
//! sink; a sink that fails never changes the run (OMA's rule), which holds by construction here
//! since the machine takes no answer to a trace step.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::agent::redact::{redact_secrets, REDACTED};
use crate::message::TokenUsage;
use crate::rng::Rng;
use crate::secret::is_sensitive_name;

/// What a host gives to turn tracing on for a run: OMA's run options `runId`, `traceSpanId`,
/// `traceParentId`, `traceAgent` and `taskId`. Every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// The run's id (OMA's `runId`, the result's `identity.runId`); made up when absent.
    pub run_id: Option<String>,
    /// The agent span's id (OMA's `traceSpanId`): the `agent` event's `spanId` and the
    /// `parentId` of the run's other events; made up when absent.
    pub span_id: Option<String>,
    /// The `agent` event's `parentId` (OMA's `traceParentId`); none when absent.
    pub parent_id: Option<String>,
    /// The name events carry (OMA's `traceAgent`); the agent's name when absent.
    pub agent: Option<String>,
    /// The task id events carry (OMA's `taskId`); none when absent.
    pub task_id: Option<String>,
}

/// Which model call an `llm_call` was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlmPhase {
    /// A turn of the run.
    Turn,
    /// A context summary (OMA's `summarize` strategy).
    Summary,
}

impl LlmPhase {
    /// OMA's word for it.
    pub fn word(self) -> &'static str {
        match self {
            LlmPhase::Turn => "turn",
            LlmPhase::Summary => "summary",
        }
    }
}

/// What one event is about.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceData {
    /// One model call that answered (a call that failed has no event, as in OMA; its span's
    /// end record has its failure).
    LlmCall {
        /// The model asked.
        model: String,
        /// A turn or a summary.
        phase: LlmPhase,
        /// The turn it belongs to, from 1.
        turn: u32,
        /// The call's token usage.
        tokens: TokenUsage,
    },
    /// One tool call that was answered.
    ToolCall {
        /// The tool's name.
        tool: String,
        /// Whether the tool's answer was an error.
        is_error: bool,
        /// The call's input with OMA's sensitive-field redaction applied.
        input: Value,
        /// The answer as text (media as placeholders), secrets redacted.
        output: String,
        /// The gate's decision (OMA's `gated`, `gateAction`, `gateReason`), its reason
        /// redacted; `None` when no gate decided the call.
        gate: Option<crate::agent::exchange::ToolGate>,
    },
    /// The whole run.
    Agent {
        /// The assistant messages the run produced.
        turns: u32,
        /// The run's token usage.
        tokens: TokenUsage,
        /// The tool calls the run made.
        tool_calls: u32,
    },
}

/// One of OMA's trace events.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// The run's id.
    pub run_id: String,
    /// This event's span id.
    pub span_id: String,
    /// The span it belongs to: the agent span for calls, the caller's for the agent.
    pub parent_id: Option<String>,
    /// The task id, when the host gave one.
    pub task_id: Option<String>,
    /// The agent's name.
    pub agent: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// When it ended.
    pub end_ms: u64,
    /// What it is about.
    pub data: TraceData,
}

impl TraceEvent {
    /// `end_ms - start_ms`, never negative.
    pub fn duration_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }

    /// OMA's `type`: `llm_call`, `tool_call` or `agent`.
    pub fn kind(&self) -> &'static str {
        match self.data {
            TraceData::LlmCall { .. } => "llm_call",
            TraceData::ToolCall { .. } => "tool_call",
            TraceData::Agent { .. } => "agent",
        }
    }

    /// The event as OMA's `TraceEvent` JSON, keys in OMA's order (its [`Serialize`] form:
    /// hosts that hand the event over as text write it with `serde_json::to_string`, without
    /// this value in between).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a trace event is JSON")
    }
}

/// OMA's `{input_tokens, output_tokens}`.
struct Usage<'a>(&'a TokenUsage);

impl Serialize for Usage<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(2))?;
        out.serialize_entry("input_tokens", &self.0.input_tokens)?;
        out.serialize_entry("output_tokens", &self.0.output_tokens)?;
        out.end()
    }
}

/// OMA's `TraceEvent`, keys in OMA's order: `type`, `runId`, `spanId`, `parentId` and `taskId`
/// when there are any, `agent`, the kind's own fields, `startMs`, `endMs`, `durationMs`.
impl Serialize for TraceEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        out.serialize_entry("type", self.kind())?;
        out.serialize_entry("runId", &self.run_id)?;
        out.serialize_entry("spanId", &self.span_id)?;
        if let Some(parent) = &self.parent_id {
            out.serialize_entry("parentId", parent)?;
        }
        if let Some(task) = &self.task_id {
            out.serialize_entry("taskId", task)?;
        }
        out.serialize_entry("agent", &self.agent)?;
        match &self.data {
            TraceData::LlmCall {
                model,
                phase,
                turn,
                tokens,
            } => {
                out.serialize_entry("model", model)?;
                out.serialize_entry("phase", phase.word())?;
                out.serialize_entry("turn", turn)?;
                out.serialize_entry("tokens", &Usage(tokens))?;
            }
            TraceData::ToolCall {
                tool,
                is_error,
                input,
                output,
                gate,
            } => {
                out.serialize_entry("tool", tool)?;
                out.serialize_entry("isError", is_error)?;
                if let Some(gate) = gate {
                    out.serialize_entry("gated", &true)?;
                    out.serialize_entry("gateAction", &gate.action)?;
                    if let Some(reason) = gate.reason.as_deref().filter(|r| !r.is_empty()) {
                        out.serialize_entry("gateReason", reason)?;
                    }
                }
                out.serialize_entry("input", input)?;
                out.serialize_entry("output", output)?;
            }
            TraceData::Agent {
                turns,
                tokens,
                tool_calls,
            } => {
                out.serialize_entry("turns", turns)?;
                out.serialize_entry("tokens", &Usage(tokens))?;
                out.serialize_entry("toolCalls", tool_calls)?;
            }
        }
        out.serialize_entry("startMs", &self.start_ms)?;
        out.serialize_entry("endMs", &self.end_ms)?;
        out.serialize_entry("durationMs", &self.duration_ms())?;
        out.end()
    }
}

/// A random (version 4) UUID in its canonical text form, drawn from `rng`: OMA's ids are
/// `crypto.randomUUID()`.
pub fn uuid_v4(rng: &mut Rng) -> String {
    let (a, b) = (rng.next_u64(), rng.next_u64());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    // Written digit by digit: a gateway request draws ids whether or not they are exported.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(36);
    for (at, byte) in bytes.iter().enumerate() {
        if matches!(at, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        id.push(char::from(DIGITS[usize::from(byte >> 4)]));
        id.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    id
}

/// OMA's `redactSensitiveObject`: the value with every field whose name looks sensitive
/// replaced by `[redacted]`, and secrets redacted from every string, its shape kept.
pub fn redact_value(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(redact_secrets(text)),
        Value::Array(items) => Value::Array(items.iter().map(redact_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, child)| {
                    let child = if is_sensitive_name(key) {
                        Value::String(REDACTED.to_owned())
                    } else {
                        redact_value(child)
                    };
                    (key.clone(), child)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each kind of event as OMA's `TraceEvent` text, key for key: what `to_json` gave when it
    /// built the value by hand, before the text was written from the event.
    #[test]
    fn events_are_written_in_omas_order() {
        let tokens = TokenUsage {
            input_tokens: 12,
            output_tokens: 6,
            ..TokenUsage::default()
        };
        let event = |parent: Option<&str>, task: Option<&str>, data| TraceEvent {
            run_id: "run-1".into(),
            span_id: "span-1".into(),
            parent_id: parent.map(Into::into),
            task_id: task.map(Into::into),
            agent: "writer".into(),
            start_ms: 1000,
            end_ms: 1250,
            data,
        };
        let cases = [
            (
                event(
                    Some("agent-1"),
                    None,
                    TraceData::LlmCall {
                        model: "m".into(),
                        phase: LlmPhase::Summary,
                        turn: 2,
                        tokens,
                    },
                ),
                r#"{"type":"llm_call","runId":"run-1","spanId":"span-1","parentId":"agent-1","agent":"writer","model":"m","phase":"summary","turn":2,"tokens":{"input_tokens":12,"output_tokens":6},"startMs":1000,"endMs":1250,"durationMs":250}"#,
            ),
            (
                event(
                    Some("agent-1"),
                    Some("task-9"),
                    TraceData::ToolCall {
                        tool: "search".into(),
                        is_error: true,
                        input: json!({"q": "x", "n": 1.5}),
                        output: "no \"hits\"".into(),
                        gate: Some(crate::agent::exchange::ToolGate {
                            action: "deny".into(),
                            reason: Some("password=[redacted]".into()),
                        }),
                    },
                ),
                r#"{"type":"tool_call","runId":"run-1","spanId":"span-1","parentId":"agent-1","taskId":"task-9","agent":"writer","tool":"search","isError":true,"gated":true,"gateAction":"deny","gateReason":"password=[redacted]","input":{"q":"x","n":1.5},"output":"no \"hits\"","startMs":1000,"endMs":1250,"durationMs":250}"#,
            ),
            (
                event(
                    None,
                    None,
                    TraceData::ToolCall {
                        tool: "t".into(),
                        is_error: false,
                        input: json!({}),
                        output: String::new(),
                        gate: Some(crate::agent::exchange::ToolGate {
                            action: "allow".into(),
                            reason: Some(String::new()),
                        }),
                    },
                ),
                r#"{"type":"tool_call","runId":"run-1","spanId":"span-1","agent":"writer","tool":"t","isError":false,"gated":true,"gateAction":"allow","input":{},"output":"","startMs":1000,"endMs":1250,"durationMs":250}"#,
            ),
            (
                event(
                    None,
                    None,
                    TraceData::Agent {
                        turns: 3,
                        tokens,
                        tool_calls: 1,
                    },
                ),
                r#"{"type":"agent","runId":"run-1","spanId":"span-1","agent":"writer","turns":3,"tokens":{"input_tokens":12,"output_tokens":6},"toolCalls":1,"startMs":1000,"endMs":1250,"durationMs":250}"#,
            ),
        ];
        for (event, text) in cases {
            assert_eq!(serde_json::to_string(&event).unwrap(), text);
            assert_eq!(event.to_json().to_string(), text);
        }
    }

    #[test]
    fn ids_are_version_4_uuids_from_the_seed() {
        let mut rng = Rng::new(7);
        let id = uuid_v4(&mut rng);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_eq!(id, uuid_v4(&mut Rng::new(7)), "the same seed, the same id");
        assert_ne!(id, uuid_v4(&mut rng));
    }

    #[test]
    fn inputs_are_redacted_as_oma_redacts_objects() {
        let input = json!({
            "query": "weather in Paris",
            "apiKey": "abc",
            "nested": [{"password": "hunter2", "note": "Authorization: Bearer abcdefghijk"}],
            "n": 3,
        });
        assert_eq!(
            redact_value(&input),
            json!({
                "query": "weather in Paris",
                "apiKey": "[redacted]",
                "nested": [{"password": "[redacted]", "note": "Authorization: [redacted]"}],
                "n": 3,
            })
        );
    }
}
