//! The `json-codec` export: the codec's text operations (`crates/glue/codec.rs` has the same
//! calls for `codec`), each a call into the core.

use oma_core::agent::redact;
use oma_core::bash_risk::{self, BashRiskLevel as Level};

use super::exports::oma::agent::json_codec::{
    BashRisk, BashRiskLevel, Guest, JudgeStep, OnlineStep, ProviderVariables,
};
use super::wit::types as wit;
use super::Component;

impl Guest for Component {
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
