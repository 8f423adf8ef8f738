//! OMA's LLM judge scorers as [`Scorer`]s (`createJudgeScorer`, `createAnswerRelevancyScorer`):
//! each judge, an agent configuration, is run on the guest (its model call the host's: a
//! provider over HTTP, or the agent's own [`LlmAdapter`](crate::LlmAdapter)) and asked to grade
//! the sample. The prompt, the reading of each answer and the aggregate are the component's
//! rules (the codec's `judge` steps, docs/evaluation.md#judges).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::component::{RuleError, SharedGuest};
use super::runner::{ScoreContext, Scorer};
use super::score::ScoreResult;
use super::scorers::MadeScorer;
use crate::bindings::exports::oma::agent::codec::JudgeStep;
use crate::bindings::oma::agent::outcome::{AgentConfig, ExternalKind, RunInput};

/// A judge scorer's instruction (OMA's `judgePrompt`): a text, or a function of the scorer's
/// context giving it.
#[derive(Clone)]
pub enum JudgePrompt {
    /// The instruction.
    Text(String),
    /// The instruction for each sample.
    Fn(Arc<dyn Fn(&ScoreContext) -> String + Send + Sync>),
}

impl std::fmt::Debug for JudgePrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JudgePrompt::Text(text) => f.debug_tuple("Text").field(text).finish(),
            JudgePrompt::Fn(_) => f.write_str("Fn(..)"),
        }
    }
}

/// OMA's `JudgeScorerOptions`.
#[derive(Debug, Clone, Default)]
pub struct JudgeScorerOptions {
    /// The scorer's name.
    pub name: String,
    /// The scorer's version.
    pub version: Option<String>,
    /// The judges (at least one), each run as an agent of its own.
    pub judges: Vec<AgentConfig>,
    /// How many judges must say pass for the scorer to (half of them rounded up unless set).
    pub quorum: Option<u64>,
    /// The JSON Schema each answer must match (checked by the component); OMA's `{score: 0..1,
    /// reason}` without one.
    pub verdict_schema: Option<Value>,
    /// The instruction; OMA's impartial-evaluator sentence without one.
    pub judge_prompt: Option<JudgePrompt>,
    /// The most all judges may take, in milliseconds (positive): the scorer then fails with
    /// OMA's `Judge scorer exceeded timeout of <n>ms.`; also the scorer's timeout in a run.
    pub timeout_ms: Option<u64>,
}

/// OMA's `createAnswerRelevancyScorer` options: a judge scorer's, but the prompt and the
/// verdict schema, which are OMA's.
#[derive(Debug, Clone, Default)]
pub struct AnswerRelevancyOptions {
    /// The scorer's name; `answer_relevancy` unless set.
    pub name: Option<String>,
    /// The scorer's version.
    pub version: Option<String>,
    /// The judges (at least one).
    pub judges: Vec<AgentConfig>,
    /// How many judges must say pass.
    pub quorum: Option<u64>,
    /// The most all judges may take, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// What the rules read of a judge's configuration: its name, its model, its backend's kind.
fn judge_shape(config: &AgentConfig) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), config.name.clone().into());
    if !config.model.is_empty() {
        out.insert("model".into(), config.model.clone().into());
    }
    if let Some(kind) = config.external {
        let kind = match kind {
            ExternalKind::Process => "process",
            ExternalKind::Acp => "acp",
        };
        out.insert("backend".into(), json!({ "kind": kind }));
    }
    Value::Object(out)
}

/// A codec step's answer as JSON, its refusal a [`RuleError`].
async fn step(guest: &SharedGuest, which: JudgeStep, request: &Value) -> anyhow::Result<Value> {
    match guest.judge(which, &request.to_string()).await? {
        Ok(text) => Ok(serde_json::from_str(&text)?),
        Err(error) => Err(RuleError::from(error).into()),
    }
}

/// OMA's `createJudgeScorer(options)`: a scorer asking each judge, in turn, to grade the
/// sample, on `guest`. The options are checked now (OMA's class and message); while scoring, a
/// judge whose run fails or whose answer breaks the verdict rules, or `timeout_ms` passing, is
/// the scorer's failure (a `scorer_error`, never a score).
pub async fn judge_scorer(guest: &SharedGuest, options: JudgeScorerOptions) -> MadeScorer {
    make(guest, options, None).await
}

/// OMA's `createAnswerRelevancyScorer(options)`: a judge scorer named `answer_relevancy`
/// (unless named) with OMA's relevancy instruction and default verdict schema.
pub async fn answer_relevancy_scorer(
    guest: &SharedGuest,
    options: AnswerRelevancyOptions,
) -> MadeScorer {
    let options = JudgeScorerOptions {
        name: options.name.unwrap_or_else(|| "answer_relevancy".into()),
        version: options.version,
        judges: options.judges,
        quorum: options.quorum,
        verdict_schema: None,
        judge_prompt: None,
        timeout_ms: options.timeout_ms,
    };
    make(guest, options, Some("answer_relevancy")).await
}

async fn make(
    guest: &SharedGuest,
    options: JudgeScorerOptions,
    preset: Option<&'static str>,
) -> MadeScorer {
    let mut request = Map::new();
    request.insert(
        "judges".into(),
        options.judges.iter().map(judge_shape).collect(),
    );
    if let Some(quorum) = options.quorum {
        request.insert("quorum".into(), quorum.into());
    }
    if let Some(timeout) = options.timeout_ms {
        request.insert("timeoutMs".into(), timeout.into());
    }
    let checked = match step(guest, JudgeStep::Options, &Value::Object(request)).await {
        Ok(checked) => checked,
        Err(error) => match error.downcast::<RuleError>() {
            Ok(refused) => return Ok(Err(refused)),
            Err(trap) => return Err(trap),
        },
    };
    let plan = Arc::new(Plan {
        guest: guest.clone(),
        judges: options.judges,
        checked_judges: checked["judges"].as_array().cloned().unwrap_or_default(),
        quorum: checked["quorum"].clone(),
        timeout_ms: checked["timeoutMs"].as_u64(),
        schema: options.verdict_schema,
        prompt: options.judge_prompt,
        preset,
    });
    let mut scorer = Scorer::new(options.name, move |context: ScoreContext| {
        let plan = plan.clone();
        async move { plan.score(context).await }
    });
    if let Some(version) = options.version {
        scorer = scorer.with_version(version);
    }
    if let Some(timeout) = options.timeout_ms {
        scorer = scorer.with_timeout(Duration::from_millis(timeout));
    }
    Ok(Ok(scorer))
}

/// A judge scorer as made: its checked options, and the guest its judges run on.
struct Plan {
    guest: SharedGuest,
    judges: Vec<AgentConfig>,
    checked_judges: Vec<Value>,
    quorum: Value,
    timeout_ms: Option<u64>,
    schema: Option<Value>,
    prompt: Option<JudgePrompt>,
    preset: Option<&'static str>,
}

impl Plan {
    async fn score(self: Arc<Self>, context: ScoreContext) -> anyhow::Result<ScoreResult> {
        let mut request = Map::new();
        if let Some(preset) = self.preset {
            request.insert("preset".into(), preset.into());
        }
        match &self.prompt {
            Some(JudgePrompt::Text(text)) => {
                request.insert("instruction".into(), text.clone().into());
            }
            Some(JudgePrompt::Fn(make)) => {
                request.insert("instruction".into(), make(&context).into());
            }
            None => {}
        }
        request.insert("input".into(), context.case.input.clone());
        if let Some(expected) = &context.case.expected {
            request.insert("expected".into(), expected.clone());
        }
        request.insert("output".into(), context.output.clone());
        request.insert("metadata".into(), Value::Object(context.metadata.clone()));
        if let Some(schema) = &self.schema {
            request.insert("schema".into(), schema.clone());
        }
        let prompted = step(&self.guest, JudgeStep::Prompt, &Value::Object(request)).await?;
        let Some(prompt) = prompted["prompt"].as_str() else {
            anyhow::bail!("the codec answered a judge prompt without its text");
        };
        let every = Box::pin(Plan::every_judge(
            self.clone(),
            prompt.to_owned(),
            context.clone(),
        ));
        let verdicts = match self.timeout_ms {
            None => every.await?,
            Some(limit) => {
                let mut every = every;
                tokio::select! {
                    verdicts = &mut every => verdicts?,
                    () = tokio::time::sleep(Duration::from_millis(limit)) => {
                        // The judge running is told (a `portable` world run stops between its
                        // steps) and left to end on its own: a call into the guest is never
                        // cut off halfway.
                        context.cancel.cancel();
                        drop(tokio::spawn(every));
                        return Err(RuleError::new(
                            "TimeoutError",
                            format!("Judge scorer exceeded timeout of {limit}ms."),
                        )
                        .into());
                    }
                }
            }
        };
        let aggregate = json!({ "verdicts": verdicts, "quorum": self.quorum });
        let scored = step(&self.guest, JudgeStep::Aggregate, &aggregate).await?;
        Ok(ScoreResult::from_json(&scored)?)
    }

    /// Every judge's verdict, one judge after another; the first failure ends it.
    async fn every_judge(
        self: Arc<Self>,
        prompt: String,
        context: ScoreContext,
    ) -> anyhow::Result<Vec<Value>> {
        let input = RunInput::Text(prompt);
        let mut verdicts = Vec::with_capacity(self.judges.len());
        for (config, checked) in self.judges.iter().zip(&self.checked_judges) {
            if context.cancel.is_cancelled() {
                return Err(RuleError::new("AbortError", "Judge scorer was aborted.").into());
            }
            let run = match self.guest.run(config, &input, &context.cancel).await? {
                Ok(run) => run.result,
                Err(error) => return Err(RuleError::from(error).into()),
            };
            if !run.success {
                return Err(match &run.failure {
                    Some(failure) => {
                        RuleError::new(&failure.error_info.name, failure.error_info.message.clone())
                    }
                    None => RuleError::new("Error", format!("Judge \"{}\" failed.", config.name)),
                }
                .into());
            }
            let mut request = Map::new();
            request.insert("judge".into(), checked.clone());
            request.insert("output".into(), run.output.into());
            if let Some(schema) = &self.schema {
                request.insert("schema".into(), schema.clone());
            }
            verdicts.push(step(&self.guest, JudgeStep::Verdict, &Value::Object(request)).await?);
        }
        Ok(verdicts)
    }
}
