//! The `codec` export, the same in every world: OMA JSON in and out, validation, the wire
//! formats as pure functions, and OMA's text rules the packages call (redaction, the bash
//! classifier). What a format needs of time (SigV4 dates, Gemini ids) comes from
//! the endpoint's `now-ms`, or the world's clock (`super::now_ms`).

use oma_core::adapter::{IdSource, ResponseContext};
use oma_core::agent::redact;
use oma_core::bash_risk::{self, BashRiskLevel as Level};
use oma_core::json;

use super::convert::*;
use super::exports::oma::agent::codec::{
    BashRisk, BashRiskLevel, Guest, JudgeStep, OnlineStep, ProviderVariables,
};
use super::wit::types as wit;
use super::wit::wire;
use super::Component;

/// The time of a codec call: the endpoint's, else the world's clock.
fn request_time(endpoint: &wire::Endpoint) -> IdSource {
    let epoch_ms = endpoint.now_ms.unwrap_or_else(super::now_ms);
    IdSource {
        epoch_ms,
        seed: super::random_seed(epoch_ms),
    }
}

impl Guest for Component {
    fn messages_from_json(json: String) -> Result<Vec<wit::LlmMessage>, wit::Error> {
        let messages = json::messages_from_json(&json)?;
        Ok(messages.into_iter().map(to_wit_message).collect())
    }

    fn messages_to_json(messages: Vec<wit::LlmMessage>) -> Result<String, wit::Error> {
        let messages = from_wit_messages_validated(messages)?;
        Ok(json::messages_to_json(&messages))
    }

    fn validate_messages(messages: Vec<wit::LlmMessage>) -> Result<(), wit::Error> {
        from_wit_messages_validated(messages)?;
        Ok(())
    }

    fn format_request(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
    ) -> Result<wire::HttpRequest, wit::Error> {
        let time = request_time(&endpoint);
        let adapter = adapter_for(&endpoint, time)?;
        let request = from_wit_request(request)?;
        let http = adapter.format(&request, &from_wit_endpoint(endpoint, time.epoch_ms))?;
        Ok(wire::HttpRequest {
            method: http.method,
            url: http.url,
            headers: http.headers,
            body: http.body,
        })
    }

    fn parse_response(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        body: String,
    ) -> Result<wire::LlmResponse, wit::Error> {
        let adapter = adapter_for(&endpoint, request_time(&endpoint))?;
        let request = from_wit_request(request)?;
        let context = ResponseContext::of(&request);
        Ok(to_wit_response(adapter.parse(&context, body.as_bytes())?))
    }

    fn environment_names(provider: String) -> ProviderVariables {
        let names = oma_core::environment::environment_names(&provider);
        let owned = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect();
        ProviderVariables {
            api_key: owned(names.api_key),
            base_url: names.base_url.map(str::to_owned),
            region: owned(names.region),
            default_region: names.default_region.map(str::to_owned),
        }
    }

    fn materialize_run(records: String, include_records: bool) -> Result<String, wit::Error> {
        Ok(
            oma_core::agent::observability::materialize::materialize_run_json(
                &records,
                include_records,
            )?,
        )
    }

    fn process_trace_record(
        options: String,
        record: Option<String>,
    ) -> Result<Option<String>, wit::Error> {
        Ok(
            oma_core::agent::observability::capture::process_record_json(
                &options,
                record.as_deref(),
            )?,
        )
    }

    fn build_execution_receipt(
        result: String,
        trace: Option<String>,
    ) -> Result<String, wit::Error> {
        Ok(
            oma_core::agent::observability::receipt::build_execution_receipt_json(
                &result,
                trace.as_deref(),
            )?,
        )
    }

    fn score_builtin(
        scorer: String,
        options: String,
        context: Option<String>,
    ) -> Result<String, wit::Error> {
        Ok(oma_core::eval::scorers::score_json(
            &scorer,
            &options,
            context.as_deref(),
        )?)
    }

    fn judge(step: JudgeStep, request: String) -> Result<String, wit::Error> {
        use oma_core::eval::judge::{judge_json, Step};
        let step = match step {
            JudgeStep::Options => Step::Options,
            JudgeStep::Prompt => Step::Prompt,
            JudgeStep::Extract => Step::Extract,
            JudgeStep::Verdict => Step::Verdict,
            JudgeStep::Aggregate => Step::Aggregate,
        };
        Ok(judge_json(step, &request)?)
    }

    fn online_evaluation(step: OnlineStep, request: String) -> Result<String, wit::Error> {
        use oma_core::eval::online::{online_json, Step};
        let step = match step {
            OnlineStep::Case => Step::Case,
            OnlineStep::Record => Step::Record,
            OnlineStep::Flush => Step::Flush,
            OnlineStep::Admit => Step::Admit,
            OnlineStep::Start => Step::Start,
            OnlineStep::Cost => Step::Cost,
            OnlineStep::Report => Step::Report,
        };
        Ok(online_json(step, &request)?)
    }

    fn redact_sensitive_text(text: String) -> String {
        redact::redact_secrets(&text)
    }

    fn is_sensitive_name(name: String) -> bool {
        redact::is_sensitive_name(&name)
    }

    fn classify_bash_command(command: String) -> BashRisk {
        let risk = bash_risk::classify_bash_command(&command);
        BashRisk {
            level: match risk.level {
                Level::Safe => BashRiskLevel::Safe,
                Level::Review => BashRiskLevel::Review,
                Level::High => BashRiskLevel::High,
            },
            reason: risk.reason,
        }
    }
}
