//! OMA's `targetFromAgent`: one agent configuration as an eval target, each sample a
//! `run-agent` run on a guest, its result in OMA's `AgentRunResult` form with the run's
//! identity and metadata, which the typed run result does not carry and the host supplies as
//! the language packages do.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::component::{RuleError, SharedGuest};
use super::runner::{TargetContext, TargetOutput};
use crate::bindings::oma::agent::outcome::{AgentConfig, RunInput};
use crate::oma_json::run_result_json;

/// Pseudo-random bits for the ids a run is given: the process's hasher keys (drawn from the
/// operating system once per process), a counter and the clock, mixed. Ids need to differ, not
/// to be secret.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

fn hex(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes * 2);
    while out.len() < bytes * 2 {
        out.push_str(&format!("{:016x}", random_u64()));
    }
    out.truncate(bytes * 2);
    out
}

/// A version 4 UUID, as OMA's run ids are.
fn uuid() -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&random_u64().to_be_bytes());
    bytes[8..].copy_from_slice(&random_u64().to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A case's input as the run's prompt: text as it is, anything else as JavaScript's
/// `String(input)` writes it (an array's items joined by commas, an object as
/// `[object Object]`).
fn prompt_of(input: &Value) -> String {
    match input {
        Value::String(text) => text.clone(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => crate::number::js_number(input.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Null => String::new(),
                other => prompt_of(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

/// The options of [`target_from_agent`] (OMA's `{metadata?}`).
#[derive(Debug, Clone, Default)]
pub struct AgentTargetOptions {
    /// Run metadata every sample's run carries, after `eval_case` and `eval_repeat`.
    pub metadata: Map<String, Value>,
}

/// OMA's `targetFromAgent(agent, {metadata?})`: a target that runs `config` on `guest` for
/// each case's input (text as it is, anything else as JavaScript's `String(input)`), with the
/// run metadata `eval_case`, `eval_repeat`, then `options.metadata`, then the agent's `model`
/// and `provider`; the evaluation's cancellation reaches a run of the `portable` world.
///
/// The result is the run's as OMA's `AgentRunResult` JSON ([`run_result_json`]) with what the
/// typed result does not carry, supplied as the language packages supply it: `identity` (a
/// fresh UUID run id, attempt 1, and the trace and root span ids of the run's trace records
/// when the configuration makes them, `records`, whose `runId` and `metadata` are then the
/// run's; fresh ids otherwise), `status` (`ok` on success), `metadata`, and each tool call's
/// `duration` as the host timed it. A run the component refuses is the sample's target error.
pub fn target_from_agent(
    guest: &SharedGuest,
    config: AgentConfig,
    options: AgentTargetOptions,
) -> impl Fn(
    Value,
    TargetContext,
) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<TargetOutput>> + Send>>
       + Send
       + Sync {
    let guest = guest.clone();
    move |input: Value, context: TargetContext| {
        let guest = guest.clone();
        let mut config = config.clone();
        let extra = options.metadata.clone();
        Box::pin(async move {
            let mut metadata = Map::new();
            metadata.insert("eval_case".into(), context.case_id.clone().into());
            metadata.insert("eval_repeat".into(), context.repeat.to_string().into());
            metadata.extend(extra);
            if !config.model.is_empty() {
                metadata.insert("model".into(), config.model.clone().into());
            }
            if !config.endpoint.provider.is_empty() {
                metadata.insert("provider".into(), config.endpoint.provider.clone().into());
            }
            let run_id = uuid();
            // A `records` text that is no object is left as it is, for the component to refuse
            // naming the field.
            if let Some(Ok(Value::Object(mut given))) =
                config.records.as_deref().map(serde_json::from_str::<Value>)
            {
                given.insert("runId".into(), run_id.clone().into());
                match given.get_mut("metadata") {
                    None => {
                        given.insert("metadata".into(), Value::Object(metadata.clone()));
                    }
                    Some(Value::Object(kept)) => kept.extend(metadata.clone()),
                    // Not an object: the component's to refuse, as it was given.
                    Some(_) => {}
                }
                config.records = Some(Value::Object(given).to_string());
            }
            let input = RunInput::Text(prompt_of(&input));
            let run = match guest.run(&config, &input, &context.cancel).await? {
                Ok(run) => run,
                Err(refused) => return Err(RuleError::from(refused).into()),
            };
            let (trace_id, root_span_id) = run
                .capture
                .root
                .clone()
                .unwrap_or_else(|| (hex(16), hex(8)));
            let mut shaped = run_result_json(&run.result);
            if let Some(calls) = shaped["toolCalls"].as_array_mut() {
                for (call, ms) in calls.iter_mut().zip(&run.capture.tool_ms) {
                    call["duration"] = (*ms).into();
                }
            }
            let mut result = Map::new();
            result.insert("success".into(), run.result.success.into());
            result.insert(
                "identity".into(),
                json!({
                    "runId": run_id,
                    "attempt": 1,
                    "traceId": trace_id,
                    "rootSpanId": root_span_id,
                }),
            );
            if run.result.success {
                result.insert("status".into(), json!({"code": "ok"}));
            }
            if let Value::Object(fields) = shaped {
                for (key, value) in fields {
                    result.entry(key).or_insert(value);
                }
            }
            result.insert("metadata".into(), Value::Object(metadata));
            Ok(TargetOutput {
                output: run.result.output.clone().into(),
                result: Some(Value::Object(result)),
            })
        })
    }
}
