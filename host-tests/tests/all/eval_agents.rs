//! OMA's evaluation with agents through the Rust embedding (`oma_wasmtime::eval`), in both
//! worlds: the shared table `fixtures/eval/scorers.json` through the built-in scorers and the
//! LLM judges as `Scorer`s (as the JavaScript and Python packages run it through their
//! factories), judges run as agents with an `LlmAdapter`, and `target_from_agent` in a run whose
//! scorers read each run's stored trace.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oma_host_tests::eval::{
    answer_relevancy_scorer, builtin_scorer, judge_scorer, run_eval_set,
    structured_output_compliance_scorer, target_from_agent, tool_call_success_scorer,
    AgentTargetOptions, AnswerRelevancyOptions, EvalCase, EvalSet, JudgePrompt, JudgeScorerOptions,
    RuleError, RunOptions, ScoreContext, ScoreResult, Scorer, SharedGuest, TargetOutput,
};
use oma_host_tests::observability::InMemoryTraceStore;
use oma_host_tests::{
    agent_config, endpoint, AgentConfig, CancelToken, ContentBlock, DriverHarness, GuestOptions,
    Harness, HostAdapter, LlmAdapter, LlmResponse, LoopbackOnly, ModelCall, Reply, ScriptedHost,
    Shared, Simulator, ThrownError, TokenUsage, ToolDefinition, ToolOutcome, ToolResultContent,
    ToolUseBlock,
};
use serde_json::{json, Map, Value};

use crate::common::fixture;
use crate::worlds::World;

const SCORERS: &str = include_str!("../../../fixtures/eval/scorers.json");
const ADAPTER: &str = "eval-adapter";

/// JSON values equal with numbers compared as numbers (`1` and `1.0`), keys in order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, v), (l, w))| k == l && same(v, w))
        }
        _ => a == b,
    }
}

/// A guest of `world` whose host answers model calls of the adapter [`ADAPTER`] with
/// `adapter`, and tools with `tool`.
async fn guest(world: World, host: ScriptedHost) -> SharedGuest {
    let options = GuestOptions {
        host: Some(Box::new(host)),
        ..GuestOptions::default()
    };
    match world {
        World::Component => SharedGuest::new(
            Harness::shared()
                .expect("the harness")
                .instantiate_with(options)
                .await
                .expect("the guest"),
        ),
        World::Driver => SharedGuest::new(
            DriverHarness::shared()
                .expect("the harness")
                .instantiate_with(options)
                .await
                .expect("the portable guest"),
        ),
    }
}

fn text_response(text: &str, model: &str) -> LlmResponse {
    LlmResponse {
        id: "r".into(),
        content: vec![ContentBlock::Text(text.into())],
        model: model.into(),
        stop_reason: "end_turn".into(),
        usage: TokenUsage {
            input_tokens: 3,
            output_tokens: 2,
        },
    }
}

/// The text of a model call's last message.
fn last_text(call: &ModelCall) -> String {
    call.messages
        .last()
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An adapter answering each call with the next of `answers` (`Err`: what it throws), keeping
/// every prompt it was asked.
#[derive(Clone, Default)]
struct Queue {
    answers: Arc<Mutex<VecDeque<Result<String, String>>>>,
    prompts: Arc<Mutex<Vec<String>>>,
}

impl Queue {
    fn push(&self, answer: Result<String, String>) {
        self.answers.lock().unwrap().push_back(answer);
    }

    fn prompts(&self) -> Vec<String> {
        std::mem::take(&mut *self.prompts.lock().unwrap())
    }
}

impl LlmAdapter for Queue {
    fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
        self.prompts.lock().unwrap().push(last_text(call));
        let model = call.options["model"].as_str().unwrap_or("model").to_owned();
        match self.answers.lock().unwrap().pop_front() {
            Some(Ok(text)) => Ok(text_response(&text, &model)),
            Some(Err(message)) => Err(oma_host_tests::thrown(message)),
            None => Err(oma_host_tests::thrown("no answer scripted")),
        }
    }
}

/// A judge (or agent) configuration answered by [`ADAPTER`].
fn adapted(name: &str, model: &str) -> AgentConfig {
    let mut config = agent_config(name, model, endpoint("", None, None));
    config.adapter = Some(HostAdapter {
        name: ADAPTER.into(),
        echoes_reasoning: None,
    });
    config
}

fn context(case: EvalCase, output: Value, metadata: Map<String, Value>) -> ScoreContext {
    ScoreContext {
        case,
        output,
        result: None,
        trace: None,
        metadata,
        cancel: CancelToken::new(),
    }
}

fn case(input: Value, expected: Option<Value>) -> EvalCase {
    EvalCase {
        id: "c".into(),
        input,
        expected,
        tags: None,
        metadata: None,
    }
}

fn refusal(error: anyhow::Error, wanted: &Value, what: &str) {
    let rule = error
        .downcast_ref::<RuleError>()
        .unwrap_or_else(|| panic!("{what}: {error:#} is no rule's error"));
    assert_eq!(rule.name, wanted["name"].as_str().unwrap(), "{what}");
    assert_eq!(rule.message, wanted["message"].as_str().unwrap(), "{what}");
}

/// Every row of `scorers.json` through the built-in scorers and judge scorers of `world`.
async fn scorers_table(world: World) {
    let queue = Queue::default();
    let guest = guest(
        world,
        ScriptedHost::new().with_adapter(ADAPTER, queue.clone()),
    )
    .await;
    let table = fixture(SCORERS);

    for row in table["scorers"].as_array().unwrap() {
        let what = format!("{world:?} scorers: {}", row["name"]);
        let scorer = builtin_scorer(&guest, row["scorer"].as_str().unwrap(), &row["options"])
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            (scorer.name(), scorer.version()),
            (row["scorer"].as_str().unwrap(), Some("1"))
        );
        let mut given = context(
            case(json!("input"), Some(json!("expected"))),
            json!("output"),
            Map::new(),
        );
        given.result = row["context"].get("result").cloned();
        given.trace = row["context"].get("trace").cloned();
        match (scorer.score(given).await, row.get("error")) {
            (Ok(scored), None) => assert!(
                same(&scored.to_json(), &row["expect"]),
                "{what}: {}",
                scored.to_json()
            ),
            (Err(error), Some(wanted)) => refusal(error, wanted, &what),
            (outcome, _) => panic!("{what}: {outcome:?}"),
        }
    }
    for row in table["options"].as_array().unwrap() {
        let what = format!("{world:?} options: {} {}", row["scorer"], row["options"]);
        let made = if row["scorer"] == "structured_output_compliance" {
            structured_output_compliance_scorer(&guest, row["options"].get("schema")).await
        } else {
            builtin_scorer(&guest, row["scorer"].as_str().unwrap(), &row["options"]).await
        };
        match (made.unwrap(), row.get("error")) {
            (Ok(scorer), None) => {
                assert_eq!(
                    scorer.name(),
                    row["expect"]["name"].as_str().unwrap(),
                    "{what}"
                );
                assert_eq!(
                    scorer.version(),
                    row["expect"]["version"].as_str(),
                    "{what}"
                );
            }
            (Err(refused), Some(wanted)) => refusal(refused.into(), wanted, &what),
            (outcome, _) => panic!("{what}: {}", outcome.is_ok()),
        }
    }
    let refused = builtin_scorer(&guest, "cost_budget", &json!({"maxTokens": 5, "budget": 1}))
        .await
        .unwrap()
        .expect_err("an option OMA does not have");
    assert!(
        refused.message.contains("\"budget\""),
        "{}",
        refused.message
    );

    let judge = &table["judge"];
    // Rows a typed judge scorer cannot be given: a quorum that is not a whole number.
    let mut cannot = Vec::new();
    for row in judge["options"].as_array().unwrap() {
        let what = format!("{world:?} judge options: {}", row["options"]);
        let given = &row["options"];
        let quorum = match given.get("quorum") {
            None => None,
            Some(q) => match q.as_u64() {
                Some(q) => Some(q),
                None => {
                    cannot.push(q.clone());
                    continue;
                }
            },
        };
        let judges = given["judges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                let mut config = adapted(
                    j["name"].as_str().unwrap(),
                    j["model"].as_str().unwrap_or(""),
                );
                if j.get("backend").is_some() {
                    // A backend named by its kind: the typed configuration's external one.
                    config.external = Some(oma_host_tests::ExternalKind::Process);
                }
                config
            })
            .collect();
        let made = judge_scorer(
            &guest,
            JudgeScorerOptions {
                name: "judge".into(),
                version: Some("1".into()),
                judges,
                quorum,
                timeout_ms: given["timeoutMs"].as_u64(),
                ..JudgeScorerOptions::default()
            },
        )
        .await
        .unwrap();
        match (made, row.get("error")) {
            (Ok(scorer), None) => assert_eq!(
                scorer.timeout().map(|t| t.as_millis() as u64),
                row["expect"]["timeoutMs"].as_u64(),
                "{what}"
            ),
            (Err(refused), Some(wanted)) => refusal(refused.into(), wanted, &what),
            (outcome, _) => panic!("{what}: {}", outcome.is_ok()),
        }
    }
    assert_eq!(cannot, vec![json!(1.5)], "{world:?}: the rows left out");

    for row in judge["prompts"].as_array().unwrap() {
        let what = format!("{world:?} judge prompts: {}", row["name"]);
        let request = &row["request"];
        queue.push(Ok(r#"{"score":1,"reason":"r","pass":true}"#.into()));
        let judges = vec![adapted("j", "m")];
        let scorer = if request.get("preset").is_some() {
            answer_relevancy_scorer(
                &guest,
                AnswerRelevancyOptions {
                    version: Some("1".into()),
                    judges,
                    ..AnswerRelevancyOptions::default()
                },
            )
            .await
        } else {
            let instruction = request
                .get("instruction")
                .and_then(Value::as_str)
                .map(str::to_owned);
            judge_scorer(
                &guest,
                JudgeScorerOptions {
                    name: "judge".into(),
                    version: Some("1".into()),
                    judges,
                    verdict_schema: request.get("schema").cloned(),
                    judge_prompt: instruction.map(|text| {
                        JudgePrompt::Fn(Arc::new(move |_: &ScoreContext| text.clone()))
                    }),
                    ..JudgeScorerOptions::default()
                },
            )
            .await
        }
        .unwrap()
        .unwrap();
        let metadata = request["metadata"].as_object().cloned().unwrap_or_default();
        scorer
            .score(context(
                case(request["input"].clone(), request.get("expected").cloned()),
                request["output"].clone(),
                metadata,
            ))
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert_eq!(
            queue.prompts(),
            vec![row["expect"]["prompt"].as_str().unwrap().to_owned()],
            "{what}"
        );
    }

    for row in judge["verdicts"].as_array().unwrap() {
        let what = format!("{world:?} judge verdicts: {}", row["name"]);
        let request = &row["request"];
        let judged = &request["judge"];
        let answer = match request.get("output") {
            Some(output) => output.as_str().unwrap().to_owned(),
            None => request["value"].to_string(),
        };
        queue.push(Ok(answer));
        // A judge named by its backend runs here with the adapter; a value the host checked is
        // the answer under a schema that takes any value.
        let schema = match (request.get("value"), request.get("schema")) {
            (Some(_), _) => Some(json!({})),
            (None, schema) => schema.cloned(),
        };
        let scorer = judge_scorer(
            &guest,
            JudgeScorerOptions {
                name: "judge".into(),
                version: Some("1".into()),
                judges: vec![adapted(
                    judged["name"].as_str().unwrap(),
                    judged["model"].as_str().unwrap_or("unused"),
                )],
                verdict_schema: schema,
                ..JudgeScorerOptions::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
        let scored = scorer
            .score(context(case(json!("i"), None), json!("o"), Map::new()))
            .await;
        queue.prompts();
        match (scored, row.get("error")) {
            (Ok(scored), None) => {
                let verdict = &row["expect"];
                assert_eq!(Some(scored.score), verdict["score"].as_f64(), "{what}");
                assert_eq!(scored.pass, verdict["pass"].as_bool(), "{what}");
                let reason = verdict["reason"].as_str().filter(|r| !r.is_empty());
                assert_eq!(
                    scored.reason,
                    reason.map(|r| format!("{}: {r}", verdict["judge"].as_str().unwrap())),
                    "{what}"
                );
                if judged.get("model").is_some() {
                    let details = json!({"judges": [verdict["judge"]], "models": [verdict["model"]], "scores": [verdict["score"]]});
                    assert!(
                        same(&Value::Object(scored.details.clone().unwrap()), &details),
                        "{what}"
                    );
                }
            }
            (Err(error), Some(wanted)) => refusal(error, wanted, &what),
            (outcome, _) => panic!("{what}: {outcome:?}"),
        }
    }

    for row in judge["aggregates"].as_array().unwrap() {
        let what = format!("{world:?} judge aggregates: {}", row["name"]);
        let verdicts = row["request"]["verdicts"].as_array().unwrap();
        let mut judges = Vec::new();
        for v in verdicts {
            let mut answer = json!({"score": v["score"]});
            for key in ["pass", "reason"] {
                if let Some(value) = v.get(key) {
                    answer[key] = value.clone();
                }
            }
            queue.push(Ok(answer.to_string()));
            judges.push(adapted(
                v["judge"].as_str().unwrap(),
                v["model"].as_str().unwrap(),
            ));
        }
        let scorer = judge_scorer(
            &guest,
            JudgeScorerOptions {
                name: "panel".into(),
                version: Some("1".into()),
                judges,
                quorum: row["request"]["quorum"].as_u64(),
                verdict_schema: Some(json!({})),
                ..JudgeScorerOptions::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
        let scored = scorer
            .score(context(case(json!("i"), None), json!("o"), Map::new()))
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert_eq!(
            queue.prompts().len(),
            verdicts.len(),
            "{what}: one call per judge"
        );
        assert!(
            same(&scored.to_json(), &row["expect"]),
            "{what}: {}",
            scored.to_json()
        );
    }
}

#[tokio::test]
async fn the_scorers_table_through_the_component_worlds_scorers() {
    scorers_table(World::Component).await;
}

#[tokio::test]
async fn the_scorers_table_through_the_portable_worlds_scorers() {
    scorers_table(World::Driver).await;
}

fn set() -> EvalSet {
    EvalSet::define(&json!({"name": "agents", "version": "1", "cases": [
        {"id": "sum", "input": "What is 2 + 2?", "expected": "4", "tags": ["math"]},
        {"id": "capital", "input": "Capital of France?", "expected": "Paris"},
    ]}))
    .unwrap()
}

fn exact() -> Scorer {
    Scorer::new("exact", |context: ScoreContext| async move {
        let hit = Some(&context.output) == context.case.expected.as_ref();
        let mut scored = ScoreResult::new(if hit { 1.0 } else { 0.0 });
        scored.pass = Some(hit);
        Ok(scored)
    })
    .with_version("1")
}

/// An agent's adapter: a `lookup` tool call first, then the answer to the case's question.
struct Answering;

impl LlmAdapter for Answering {
    fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
        let model = call.options["model"].as_str().unwrap_or("model").to_owned();
        let asked = call.messages.first().map(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::Text(t) if t.contains("2 + 2")))
        });
        let looked_up = call.messages.len() > 1;
        if !looked_up {
            let mut response = text_response("", &model);
            response.content = vec![ContentBlock::ToolUse(ToolUseBlock {
                id: "t1".into(),
                name: "lookup".into(),
                input: "{}".into(),
                signature: None,
            })];
            response.stop_reason = "tool_use".into();
            return Ok(response);
        }
        Ok(text_response(
            if asked == Some(true) { "4" } else { "Lyon" },
            &model,
        ))
    }
}

/// `target_from_agent` in a run of both worlds: each sample an agent run with a tool call and
/// its trace records (into a trace store the scorers read), its identity, metadata and usage
/// in the records; the same agent without records gets fresh ids and no trace.
async fn agent_target(world: World) {
    let store = Arc::new(InMemoryTraceStore::new(
        Harness::shared()
            .unwrap()
            .instantiate_with(GuestOptions::default())
            .await
            .unwrap(),
    ));
    let kept = store.clone();
    let host = ScriptedHost::new()
        .with_adapter(ADAPTER, Answering)
        .with_tool(|_: &ToolUseBlock| ToolOutcome {
            content: ToolResultContent::Text("found".into()),
            is_error: None,
            gate: None,
        })
        .with_record_sink(move |record| {
            kept.append_records(std::slice::from_ref(record))
                .expect("kept");
        });
    let runner = guest(world, host).await;
    let mut config = adapted("candidate", "fixture-model");
    config.endpoint.provider = "anthropic".into();
    config.tools = vec![ToolDefinition {
        name: "lookup".into(),
        description: "looks things up".into(),
        input_schema: r#"{"type":"object"}"#.into(),
    }];
    config.records = Some(r#"{"metadata":{"team":"evals"}}"#.into());
    let mut metadata = Map::new();
    metadata.insert("candidate".into(), "b".into());
    let target = target_from_agent(&runner, config.clone(), AgentTargetOptions { metadata });
    let scorers = vec![
        exact(),
        tool_call_success_scorer(&runner).await.unwrap().unwrap(),
    ];
    let mut redactor = runner.clone();
    let report = run_eval_set(
        &set(),
        &target,
        RunOptions {
            scorers,
            concurrency: Some(1),
            trace_store: Some(&*store),
            ..RunOptions::default()
        },
        &mut redactor,
    )
    .await
    .unwrap()
    .unwrap();
    let records = &report.records;
    let scores: Vec<(&str, &str, f64)> = records
        .iter()
        .map(|r| {
            (
                r["caseId"].as_str().unwrap(),
                r["scorer"]["name"].as_str().unwrap(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        scores,
        [
            ("sum", "exact", 1.0),
            ("sum", "tool_call_success", 1.0),
            ("capital", "exact", 0.0),
            ("capital", "tool_call_success", 1.0)
        ],
        "{world:?}: {records:?}"
    );
    // Scores and aggregates are numbers as JavaScript writes them (`1`, not `1.0`).
    let text = report.to_json().to_string();
    assert!(text.contains(r#""score":1,"#), "{world:?}: {text}");
    assert!(text.contains(r#""avg":1,"#), "{world:?}: {text}");
    let first = &records[1];
    assert_eq!(
        first["details"]["source"], "trace",
        "{world:?}: the stored trace's tool spans decide"
    );
    assert_eq!(
        first["metadata"],
        json!({"eval_case": "sum", "eval_repeat": "1", "candidate": "b", "model": "fixture-model", "provider": "anthropic"}),
        "{world:?}"
    );
    assert_eq!(
        report.tokens,
        Some((12, 8)),
        "{world:?}: two calls of 3 and 2 tokens per sample"
    );
    let run_ref = &first["runRef"];
    let run_id = run_ref["runId"].as_str().unwrap();
    assert_eq!(run_id.len(), 36, "{world:?}: a UUID");
    assert_ne!(
        run_id,
        records[2]["runRef"]["runId"].as_str().unwrap(),
        "{world:?}: a run id per sample"
    );
    let stored = store
        .get_run(run_id, true)
        .await
        .unwrap()
        .expect("the run's trace is stored");
    let attempt = &stored["attempts"][0];
    assert_eq!(
        run_ref["traceId"], attempt["traceId"],
        "{world:?}: the root span's trace"
    );
    assert_eq!(
        run_ref["rootSpanId"], attempt["rootSpanId"],
        "{world:?}: the root span"
    );
    assert_eq!(run_ref["attempt"], 1);
    let root = stored["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["recordType"] == "span_start" && r["kind"] == "run")
        .expect("a root span");
    assert_eq!(
        root["attributes"]["oma.meta.team"], "evals",
        "{world:?}: the configuration's metadata kept: {root}"
    );

    // Without records: fresh ids, no trace; each tool call timed by the host.
    config.records = None;
    let target = target_from_agent(&runner, config, AgentTargetOptions::default());
    let context = oma_host_tests::eval::TargetContext {
        case_id: "sum".into(),
        repeat: 2,
        metadata: Map::new(),
        cancel: CancelToken::new(),
    };
    let TargetOutput { output, result } = target(json!(["What is 2 + 2?", null, 1.5]), context)
        .await
        .unwrap();
    assert_eq!(
        output,
        json!("4"),
        "{world:?}: the input as JavaScript's String() writes it"
    );
    let result = result.unwrap();
    let identity = &result["identity"];
    assert_eq!(identity["traceId"].as_str().unwrap().len(), 32, "{world:?}");
    assert_eq!(
        identity["rootSpanId"].as_str().unwrap().len(),
        16,
        "{world:?}"
    );
    assert!(store
        .get_run(identity["runId"].as_str().unwrap(), false)
        .await
        .unwrap()
        .is_none());
    assert_eq!(result["status"], json!({"code": "ok"}));
    assert_eq!(result["metadata"]["eval_repeat"], "2");
    assert_eq!(result["toolCalls"][0]["toolName"], "lookup");
    assert!(
        result["toolCalls"][0]["duration"].is_u64(),
        "{world:?}: {result}"
    );
}

#[tokio::test]
async fn an_agent_target_runs_in_the_component_world() {
    agent_target(World::Component).await;
}

#[tokio::test]
async fn an_agent_target_runs_in_the_portable_world() {
    agent_target(World::Driver).await;
}

/// Judges in a run: an answer-relevancy judge's score recorded per sample; a judge whose run
/// fails is a scorer error naming what it threw, never a score.
async fn judges_in_a_run(world: World) {
    let queue = Queue::default();
    let guest = guest(
        world,
        ScriptedHost::new().with_adapter(ADAPTER, queue.clone()),
    )
    .await;
    let relevancy = answer_relevancy_scorer(
        &guest,
        AnswerRelevancyOptions {
            version: Some("v1".into()),
            judges: vec![adapted("judge", "judge-model")],
            ..AnswerRelevancyOptions::default()
        },
    )
    .await
    .unwrap()
    .unwrap();
    let failing = judge_scorer(
        &guest,
        JudgeScorerOptions {
            name: "strict".into(),
            version: Some("1".into()),
            judges: vec![adapted("j", "m")],
            judge_prompt: Some(JudgePrompt::Text("Grade it.".into())),
            ..JudgeScorerOptions::default()
        },
    )
    .await
    .unwrap()
    .unwrap();
    queue.push(Ok(r#"{"score":0.75,"reason":"mostly relevant"}"#.into()));
    queue.push(Err("judge down".into()));
    queue.push(Ok(r#"{"score":0.1,"reason":"off topic"}"#.into()));
    queue.push(Err("judge down".into()));
    let target = |input: Value, _| async move {
        Ok(TargetOutput::new(json!(if input == "Capital of France?" {
            "Paris."
        } else {
            "an unrelated answer"
        })))
    };
    let mut redactor = guest.clone();
    let report = run_eval_set(
        &set(),
        target,
        RunOptions {
            scorers: vec![relevancy, failing],
            concurrency: Some(1),
            ..RunOptions::default()
        },
        &mut redactor,
    )
    .await
    .unwrap()
    .unwrap();
    let seen: Vec<Value> = report
        .records
        .iter()
        .map(|r| {
            json!([
                r["caseId"],
                r["scorer"]["name"],
                r["status"],
                r["score"],
                r["reason"],
                r["error"]["message"]
            ])
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            json!([
                "sum",
                "answer_relevancy",
                "scored",
                0.75,
                "judge: mostly relevant",
                null
            ]),
            json!(["sum", "strict", "scorer_error", null, null, "judge down"]),
            json!([
                "capital",
                "answer_relevancy",
                "scored",
                0.1,
                "judge: off topic",
                null
            ]),
            json!([
                "capital",
                "strict",
                "scorer_error",
                null,
                null,
                "judge down"
            ]),
        ],
        "{world:?}"
    );
    let prompts = queue.prompts();
    assert!(
        prompts[0].starts_with("Evaluate only answer relevancy."),
        "{world:?}"
    );
    assert!(
        prompts[1].starts_with("Grade it.\n\n## Case input\nWhat is 2 + 2?"),
        "{world:?}"
    );
    assert!(
        prompts[2].contains("## Candidate output\nParis."),
        "{world:?}"
    );
}

#[tokio::test]
async fn judges_score_a_run_in_the_component_world() {
    judges_in_a_run(World::Component).await;
}

#[tokio::test]
async fn judges_score_a_run_in_the_portable_world() {
    judges_in_a_run(World::Driver).await;
}

/// A judge past its `timeout_ms` (a provider that answers late) fails the scorer with OMA's
/// `TimeoutError` at the deadline, not when the provider answers; the judge's run is left to
/// end on its own and the guest serves the next call.
async fn a_late_judge(world: World) {
    let simulator = Simulator::start().expect("the simulator starts");
    simulator.script([Reply::Delay(Duration::from_millis(1500))]);
    let options = GuestOptions {
        hooks: Some(Box::new(LoopbackOnly::new())),
        ..GuestOptions::default()
    };
    let guest = match world {
        World::Component => SharedGuest::new(
            Harness::shared()
                .unwrap()
                .instantiate_with(options)
                .await
                .unwrap(),
        ),
        World::Driver => SharedGuest::new(
            DriverHarness::shared()
                .unwrap()
                .instantiate_with(options)
                .await
                .unwrap(),
        ),
    };
    let judge = agent_config(
        "slow",
        "gpt-4o",
        endpoint(
            "openai",
            Some(&simulator.base_url()),
            Some("sk-judge-0123456789"),
        ),
    );
    let scorer = judge_scorer(
        &guest,
        JudgeScorerOptions {
            name: "late".into(),
            judges: vec![judge],
            timeout_ms: Some(100),
            ..JudgeScorerOptions::default()
        },
    )
    .await
    .unwrap()
    .unwrap();
    let started = Instant::now();
    let failed = scorer
        .score(context(case(json!("i"), None), json!("o"), Map::new()))
        .await
        .expect_err("past its deadline");
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "{world:?}: at the deadline"
    );
    refusal(
        failed,
        &json!({"name": "TimeoutError", "message": "Judge scorer exceeded timeout of 100ms."}),
        &format!("{world:?}"),
    );
    let next = tool_call_success_scorer(&guest).await.unwrap().unwrap();
    let scored = next
        .score(context(case(json!("i"), None), json!("o"), Map::new()))
        .await
        .expect("the guest serves the next call once the judge's run has ended");
    assert_eq!(scored.score, 1.0, "{world:?}");
    assert_eq!(
        simulator.request_count(),
        1,
        "{world:?}: one judge call, not retried"
    );
}

#[tokio::test]
async fn a_late_judge_times_out_in_the_component_world() {
    a_late_judge(World::Component).await;
}

#[tokio::test]
async fn a_late_judge_times_out_in_the_portable_world() {
    a_late_judge(World::Driver).await;
}

/// An adapter that cancels `token` when it is called, then answers a verdict.
struct CancelOnCall(CancelToken);

impl LlmAdapter for CancelOnCall {
    fn chat(&mut self, call: &ModelCall) -> Result<LlmResponse, ThrownError> {
        self.0.cancel();
        let model = call.options["model"].as_str().unwrap_or("model").to_owned();
        Ok(text_response(r#"{"score":1,"reason":"ok"}"#, &model))
    }
}

/// An evaluation cancelled while a judge runs: the judge scorer fails as OMA's `AbortError` (a
/// `cancellation`, not retryable), never a score, and no further sample is taken.
async fn a_cancelled_evaluation_stops_its_judges(world: World) {
    let cancel = CancelToken::new();
    let host = ScriptedHost::new().with_adapter(ADAPTER, CancelOnCall(cancel.clone()));
    let guest = guest(world, host).await;
    let panel = judge_scorer(
        &guest,
        JudgeScorerOptions {
            name: "panel".into(),
            judges: vec![adapted("first", "m"), adapted("second", "m")],
            ..JudgeScorerOptions::default()
        },
    )
    .await
    .unwrap()
    .unwrap();
    let mut redactor = guest.clone();
    let report = run_eval_set(
        &set(),
        |input: Value, _| async move { Ok(TargetOutput::new(input)) },
        RunOptions {
            scorers: vec![panel],
            concurrency: Some(1),
            cancel: Some(cancel),
            ..RunOptions::default()
        },
        &mut redactor,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(report.aborted, "{world:?}");
    assert_eq!(
        report.records.len(),
        1,
        "{world:?}: no sample after the cancel"
    );
    let record = &report.records[0];
    assert_eq!(record["status"], "scorer_error", "{world:?}: {record}");
    let error = &record["error"];
    assert_eq!(
        (&error["kind"], &error["name"], &error["retryable"]),
        (&json!("cancellation"), &json!("AbortError"), &json!(false)),
        "{world:?}: {error}"
    );
}

#[tokio::test]
async fn a_cancelled_evaluation_stops_its_judges_in_the_component_world() {
    a_cancelled_evaluation_stops_its_judges(World::Component).await;
}

#[tokio::test]
async fn a_cancelled_evaluation_stops_its_judges_in_the_portable_world() {
    a_cancelled_evaluation_stops_its_judges(World::Driver).await;
}
