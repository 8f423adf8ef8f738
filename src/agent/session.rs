//! The agent runtime (OMA's `Agent` and `runAgent`), driving the turn loop through an [`Io`]:
//! the one seam through which a run reaches a provider and the host. The component implements
//! [`Io`] with wasi-http and the `host` imports; native tests implement it with scripts, so
//! every rule of §3 and §4 here runs without wasm.
//!
//! One run, in order (`behaviour.md` §3.2-§3.6, §4):
//!
//! 1. the input is prepared by the caller ([`crate::agent::input`]): validated and owned;
//! 2. `beforeRun`, when configured, gets its own copy; its answer is merged
//!    ([`before_run::merge`]); a hook failure ends the run as a failed result (kind `callback`);
//! 3. an external backend gets the latest user text ([`transport_prompt`]); otherwise the
//!    [`TurnLoop`] runs, each request sent through [`Io::chat`] (or [`Io::open_stream`] when
//!    streaming) and each tool call through [`Io::call_tool`];
//! 4. the outcome becomes the result; [`Agent::prompt`] appends what the run produced.

use std::collections::VecDeque;

use serde_json::{json, Value};

use crate::adapter::{ChatRequest, StreamEvent};
use crate::agent::before_run::{
    self, transport_prompt, BeforeRunContext, BeforeRunResult, ExternalKind,
};
use crate::agent::evaluation::{scorer_input, stored_payload, RunInput, StorePayloads};
use crate::agent::input::{prepare_prompt, prepare_run, PromptInput};
use crate::agent::outcome::classify;
use crate::agent::progress::agent_start_data;
use crate::agent::turn::{Action, Event, RunOutcome, TurnLoop, TurnOptions};
use crate::error::Error;
use crate::message::{
    ContentBlock, LlmMessage, LlmResponse, Role, TextBlock, TokenUsage, ToolResultBlock,
    ToolResultContent, ToolUseBlock,
};
use crate::validate::{validate_messages, validate_tool_result_at};

/// Everything a run needs to know about its agent, apart from where requests go (that is the
/// [`Io`]'s business).
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The request every turn starts from: model, system prompt, tools, sampling; its messages
    /// are ignored.
    pub template: ChatRequest,
    /// The agent's name, turn limit, token budget and provider.
    pub turn: TurnOptions,
    /// Whether to call the `beforeRun` hook.
    pub before_run: bool,
    /// An external text-only backend instead of a provider.
    pub external: Option<ExternalKind>,
    /// The agent's configuration as OMA JSON for the hook's context, without secrets.
    pub config_json: String,
}

impl RunSpec {
    fn name(&self) -> &str {
        &self.turn.agent_name
    }
}

/// How a `beforeRun` hook answered.
#[derive(Clone, Debug, PartialEq)]
pub enum HookAnswer {
    /// Its result, to be merged.
    Result(BeforeRunResult),
    /// It failed (OMA: it threw) with this message.
    Failed(String),
    /// Its answer could not be read (e.g. messages that do not convert); ends the run as a
    /// hook failure with this error.
    Rejected(Error),
}

/// What a tool returned.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// The answer.
    pub content: ToolResultContent,
    /// Whether the tool failed.
    pub is_error: bool,
}

/// A progress event of `run-agent`: OMA's `{type, agent, data}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressEvent {
    /// `agent_start`, `budget_exceeded` or `agent_complete`.
    pub kind: &'static str,
    /// The agent's name.
    pub agent: String,
    /// The event's data, in OMA's JSON shape.
    pub data: Value,
}

/// An online-evaluation case of `run-agent`.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluationRecord {
    /// The agent's name.
    pub agent: String,
    /// What scorers get as input, per the payload policy.
    pub input: String,
    /// The stored payload `{input, output}`; `None` under the `none` policy.
    pub payload: Option<Value>,
    /// The full result.
    pub result: RunOutcome,
    /// How long the run took.
    pub duration_ms: u64,
}

/// A streamed provider turn in flight.
pub trait TurnStream {
    /// The next event; `None` once the stream has ended.
    fn next_event(&mut self) -> Result<Option<StreamEvent>, Error>;
}

/// The world outside a run: the provider and the host. Each method gets its own copy of what
/// it is given.
pub trait Io {
    /// A streamed turn of this provider.
    type Stream: TurnStream;
    /// Sends one chat turn (retries, egress and timeouts are the implementation's).
    fn chat(&mut self, request: &ChatRequest) -> Result<LlmResponse, Error>;
    /// Starts one streamed chat turn (the request has its `stream` flag set).
    fn open_stream(&mut self, request: &ChatRequest) -> Result<Self::Stream, Error>;
    /// Runs the `beforeRun` hook of agent `agent` with its agent configuration `config`; the
    /// hook gets its own copy of `context`.
    fn before_run(&mut self, agent: &str, context: &BeforeRunContext, config: &str) -> HookAnswer;
    /// Calls a tool.
    fn call_tool(&mut self, agent: &str, call: ToolUseBlock) -> ToolOutcome;
    /// Sends text through an external backend; `Err` is its failure message.
    fn external_send(
        &mut self,
        agent: &str,
        kind: ExternalKind,
        text: String,
    ) -> Result<String, String>;
    /// Delivers a progress event.
    fn progress(&mut self, event: ProgressEvent);
    /// Delivers an evaluation case.
    fn evaluation(&mut self, record: EvaluationRecord);
    /// Milliseconds on a monotonic clock.
    fn now_ms(&mut self) -> u64;
    /// A uniform random number in `[0, 1)`, for evaluation sampling.
    fn random_unit(&mut self) -> f64;
}

/// An event of a run, as `stream` delivers it.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentEvent {
    /// A piece of text as the provider sent it (streaming only).
    TextDelta(String),
    /// A piece of reasoning as the provider sent it (streaming only).
    ReasoningDelta(String),
    /// A turn-level event of the loop (text, tool use, tool result, budget exceeded).
    Turn(Event),
    /// The run is over; the result says whether it succeeded.
    Done(RunOutcome),
}

/// Where a run stands.
enum Phase<S> {
    /// Prepared; the hook has not run yet.
    Start(Vec<LlmMessage>),
    /// The turn loop is running.
    Looping(Box<TurnLoop>),
    /// A streamed turn is in flight.
    Streaming(Box<TurnLoop>, S),
    /// `Done` was delivered.
    Finished,
}

/// One run, pulled event by event: `stream` hands out each event as it comes, `run` drains it.
pub struct Run<S> {
    spec: RunSpec,
    streaming: bool,
    phase: Phase<S>,
    queue: VecDeque<AgentEvent>,
}

impl<S: TurnStream> Run<S> {
    /// A run over already prepared `messages`. With `streaming`, each turn goes through
    /// [`Io::open_stream`] and its pieces come out as [`AgentEvent::TextDelta`] and
    /// [`AgentEvent::ReasoningDelta`].
    pub fn new(spec: RunSpec, messages: Vec<LlmMessage>, streaming: bool) -> Self {
        Run {
            spec,
            streaming,
            phase: Phase::Start(messages),
            queue: VecDeque::new(),
        }
    }

    /// The next event, `None` after [`AgentEvent::Done`].
    pub fn next_event<I: Io<Stream = S>>(&mut self, io: &mut I) -> Option<AgentEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            self.phase = match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Start(messages) => self.start(messages, io),
                Phase::Looping(turn_loop) => self.step(turn_loop, io),
                Phase::Streaming(turn_loop, stream) => self.pump(turn_loop, stream),
            };
        }
    }

    /// Drains the run and returns its outcome.
    pub fn finish<I: Io<Stream = S>>(mut self, io: &mut I) -> RunOutcome {
        let mut last = None;
        while let Some(event) = self.next_event(io) {
            if let AgentEvent::Done(outcome) = event {
                last = Some(outcome);
            }
        }
        // `next_event` always ends with `Done`; should that ever break, say so in the result.
        last.unwrap_or_else(|| {
            failed(
                &self.spec,
                Error::Host {
                    message: "the run ended without a result".into(),
                },
                false,
            )
        })
    }

    /// Runs the hook and starts the backend.
    fn start<I: Io<Stream = S>>(&mut self, messages: Vec<LlmMessage>, io: &mut I) -> Phase<S> {
        let messages = if self.spec.before_run {
            // The run's own copy becomes the context; the hook gets a copy of that, and an
            // unchanged list comes back out of the merge without another.
            let context = BeforeRunContext::from_messages(messages);
            let answer = io.before_run(self.spec.name(), &context, &self.spec.config_json);
            let merged = match answer {
                HookAnswer::Failed(message) => Err(Error::Host { message }),
                HookAnswer::Rejected(error) => Err(error),
                HookAnswer::Result(result) => {
                    before_run::merge(context, result, self.spec.external)
                }
            };
            match merged {
                Ok(messages) => messages,
                Err(error) => return self.end(failed(&self.spec, error, true)),
            }
        } else {
            messages
        };
        if let Some(kind) = self.spec.external {
            return self.end(external_run(&self.spec, kind, &messages, io));
        }
        let mut template = self.spec.template.clone();
        template.stream = self.streaming;
        let turn_loop = TurnLoop::new(messages, template, self.spec.turn.clone());
        Phase::Looping(Box::new(turn_loop))
    }

    /// Acts on the loop's next action.
    fn step<I: Io<Stream = S>>(&mut self, mut turn_loop: Box<TurnLoop>, io: &mut I) -> Phase<S> {
        match turn_loop.poll() {
            Some(Action::SendRequest) if self.streaming => {
                match io.open_stream(turn_loop.request()) {
                    Ok(stream) => return Phase::Streaming(turn_loop, stream),
                    Err(error) => {
                        turn_loop.handle_failure(error);
                    }
                }
            }
            Some(Action::SendRequest) => match io.chat(turn_loop.request()) {
                Ok(response) => {
                    turn_loop.handle_response(response);
                }
                Err(error) => {
                    turn_loop.handle_failure(error);
                }
            },
            Some(Action::CallTool(call)) => {
                let id = call.id.clone();
                let outcome = io.call_tool(self.spec.name(), call);
                // A tool's answer is input too: it must pass OMA's rules (media, error results)
                // before it can travel in the next request.
                let result = ToolResultBlock {
                    tool_use_id: id.clone(),
                    content: outcome.content,
                    is_error: outcome.is_error.then_some(true),
                };
                let (i, j) = turn_loop.result_position(&id).unwrap_or_default();
                match validate_tool_result_at(&result, i, j) {
                    Ok(()) => {
                        turn_loop.handle_tool_result(&id, result.content, outcome.is_error);
                    }
                    Err(error) => {
                        turn_loop.handle_failure(error);
                    }
                }
            }
            Some(Action::Emit(event)) => self.queue.push_back(AgentEvent::Turn(event)),
            Some(Action::Done(outcome)) => return self.end(outcome),
            None => {
                // The loop waits for nothing this driver owes it: end rather than spin.
                turn_loop.handle_failure(Error::Host {
                    message: "the turn loop stalled".into(),
                });
            }
        }
        Phase::Looping(turn_loop)
    }

    /// Reads the streamed turn until its next piece or its end.
    fn pump(&mut self, mut turn_loop: Box<TurnLoop>, mut stream: S) -> Phase<S> {
        match stream.next_event() {
            Ok(Some(StreamEvent::Text(text))) => self.queue.push_back(AgentEvent::TextDelta(text)),
            Ok(Some(StreamEvent::Reasoning(text))) => {
                self.queue.push_back(AgentEvent::ReasoningDelta(text))
            }
            // Tool calls are announced by the loop once the turn is complete.
            Ok(Some(StreamEvent::ToolUse(_))) => {}
            Ok(Some(StreamEvent::Done(response))) => {
                turn_loop.handle_response(response);
                return Phase::Looping(turn_loop);
            }
            Ok(None) => {
                turn_loop.handle_failure(Error::Provider {
                    provider: self.spec.turn.provider.clone().unwrap_or_default(),
                    status: None,
                    message: "the stream ended without a complete response".into(),
                });
                return Phase::Looping(turn_loop);
            }
            Err(error) => {
                turn_loop.handle_failure(error);
                return Phase::Looping(turn_loop);
            }
        }
        Phase::Streaming(turn_loop, stream)
    }

    fn end(&mut self, outcome: RunOutcome) -> Phase<S> {
        self.queue.push_back(AgentEvent::Done(outcome));
        Phase::Finished
    }
}

/// A failed outcome for an error that ended the run outside the turn loop.
fn failed(spec: &RunSpec, error: Error, from_hook: bool) -> RunOutcome {
    RunOutcome {
        success: false,
        output: error.to_string(),
        messages: Vec::new(),
        token_usage: TokenUsage::default(),
        tool_calls: Vec::new(),
        turns: 0,
        budget_exceeded: false,
        failure: Some(classify(&error, from_hook, spec.turn.provider.as_deref())),
        error: Some(error),
    }
}

/// A run on an external text-only backend: the latest user text goes out (after the system
/// prompt and a blank line, for a process backend), the answer comes back as one assistant
/// text turn.
fn external_run<I: Io>(
    spec: &RunSpec,
    kind: ExternalKind,
    messages: &[LlmMessage],
    io: &mut I,
) -> RunOutcome {
    let prompt = transport_prompt(messages);
    let text = match (kind, spec.template.system_prompt.as_deref()) {
        (ExternalKind::Process, Some(system)) if !system.is_empty() => {
            format!("{system}\n\n{prompt}")
        }
        _ => prompt,
    };
    match io.external_send(spec.name(), kind, text) {
        Ok(output) => RunOutcome {
            success: true,
            messages: vec![LlmMessage {
                role: Role::Assistant,
                content: vec![ContentBlock::Text(TextBlock {
                    text: output.clone(),
                })],
            }],
            output,
            token_usage: TokenUsage::default(),
            tool_calls: Vec::new(),
            turns: 1,
            budget_exceeded: false,
            failure: None,
            error: None,
        },
        Err(message) => failed(spec, Error::Host { message }, false),
    }
}

/// An agent with a persistent history (OMA's `Agent`).
#[derive(Clone, Debug)]
pub struct Agent {
    spec: RunSpec,
    history: Vec<LlmMessage>,
}

impl Agent {
    /// An agent whose history is seeded with `history`, validated first.
    pub fn new(spec: RunSpec, history: Vec<LlmMessage>) -> Result<Self, Error> {
        validate_messages(&history)?;
        Ok(Agent { spec, history })
    }

    /// What the agent runs with.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }

    /// Prepares a fresh `run`/`stream`; invalid input fails here, before anything happens.
    pub fn start<S: TurnStream>(&self, input: RunInput, streaming: bool) -> Result<Run<S>, Error> {
        let messages = prepare_run(input, self.spec.external)?;
        Ok(Run::new(self.spec.clone(), messages, streaming))
    }

    /// OMA's `prompt()`: appends the user turn, runs on a copy of the whole history, and
    /// appends what the run produced. Invalid input fails before history changes.
    pub fn prompt<I: Io>(&mut self, input: PromptInput, io: &mut I) -> Result<RunOutcome, Error> {
        let turn = prepare_prompt(input, self.spec.external)?;
        self.history.push(turn);
        let run: Run<I::Stream> = Run::new(self.spec.clone(), self.history.clone(), false);
        let outcome = run.finish(io);
        self.history.extend(outcome.messages.iter().cloned());
        Ok(outcome)
    }

    /// The persistent history.
    pub fn history(&self) -> &[LlmMessage] {
        &self.history
    }

    /// Clears the persistent history.
    pub fn reset(&mut self) {
        self.history.clear();
    }
}

/// Online evaluation settings of `run-agent`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// What the record carries.
    pub store_payloads: StorePayloads,
    /// The share of runs evaluated, from 0 to 1.
    pub sample_rate: f64,
}

/// OMA's `runAgent`: prepare the input (which may fail), begin evaluation with its own copy,
/// emit `agent_start`, run, emit `budget_exceeded` when it applies and `agent_complete`, then
/// hand over the evaluation case.
pub fn run_agent<I: Io>(
    spec: RunSpec,
    input: RunInput,
    progress: bool,
    evaluation: Option<Evaluation>,
    io: &mut I,
) -> Result<RunOutcome, Error> {
    // Whether this run is evaluated is drawn up front; the draw has no effect of its own.
    let sampled = evaluation.filter(|e| {
        e.sample_rate >= 1.0 || (e.sample_rate > 0.0 && io.random_unit() < e.sample_rate)
    });
    // Progress and evaluation see the input as it was given: a copy of its own, taken only
    // when one of them is on (the run takes the original).
    let given = (progress || sampled.is_some()).then(|| input.clone());
    let messages = prepare_run(input, spec.external)?;
    let agent = spec.turn.agent_name.clone();
    let started = io.now_ms();
    if let (true, Some(input)) = (progress, &given) {
        io.progress(ProgressEvent {
            kind: "agent_start",
            agent: agent.clone(),
            data: agent_start_data(input),
        });
    }
    let outcome = Run::<I::Stream>::new(spec, messages, false).finish(io);
    if progress {
        if outcome.budget_exceeded {
            io.progress(ProgressEvent {
                kind: "budget_exceeded",
                agent: agent.clone(),
                data: json!({ "message": outcome.output }),
            });
        }
        io.progress(ProgressEvent {
            kind: "agent_complete",
            agent: agent.clone(),
            data: outcome_json(&outcome),
        });
    }
    if let (Some(evaluation), Some(input)) = (sampled, &given) {
        let duration_ms = io.now_ms().saturating_sub(started);
        io.evaluation(EvaluationRecord {
            agent,
            input: scorer_input(input, evaluation.store_payloads),
            payload: stored_payload(input, &outcome.output, evaluation.store_payloads),
            result: outcome.clone(),
            duration_ms,
        });
    }
    Ok(outcome)
}

/// A run result in OMA's JSON shape (`AgentRunResult`): `success`, `output`, `messages`,
/// `tokenUsage`, `toolCalls`, and `budgetExceeded`, `status`, `errorInfo` when they apply.
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
        "success": outcome.success,
        "output": outcome.output,
        "messages": outcome.messages,
        "tokenUsage": outcome.token_usage,
        "toolCalls": tool_calls,
        "turns": outcome.turns,
    });
    if outcome.budget_exceeded {
        value["budgetExceeded"] = json!(true);
    }
    if let Some(failure) = &outcome.failure {
        value["status"] = json!(failure.status);
        value["errorInfo"] = json!(failure.error_info);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Sampling;
    use crate::agent::turn::DEFAULT_MAX_TURNS;
    use crate::message::ImageBlock;

    /// A provider and host played from scripts, recording what they were given.
    #[derive(Default)]
    struct Script {
        responses: VecDeque<Result<LlmResponse, Error>>,
        streams: VecDeque<Vec<Result<StreamEvent, Error>>>,
        hook: Option<HookAnswer>,
        backend: Option<Result<String, String>>,
        sent: Vec<ChatRequest>,
        contexts: Vec<BeforeRunContext>,
        tools: Vec<ToolUseBlock>,
        progress: Vec<ProgressEvent>,
        evaluations: Vec<EvaluationRecord>,
        external: Vec<String>,
    }

    struct Scripted(VecDeque<Result<StreamEvent, Error>>);

    impl TurnStream for Scripted {
        fn next_event(&mut self) -> Result<Option<StreamEvent>, Error> {
            self.0.pop_front().transpose()
        }
    }

    impl Io for Script {
        type Stream = Scripted;
        fn chat(&mut self, request: &ChatRequest) -> Result<LlmResponse, Error> {
            self.sent.push(request.clone());
            self.responses
                .pop_front()
                .unwrap_or_else(|| Ok(reply("end")))
        }
        fn open_stream(&mut self, request: &ChatRequest) -> Result<Scripted, Error> {
            self.sent.push(request.clone());
            Ok(Scripted(
                self.streams.pop_front().unwrap_or_default().into(),
            ))
        }
        fn before_run(&mut self, _: &str, context: &BeforeRunContext, _: &str) -> HookAnswer {
            self.contexts.push(context.clone());
            self.hook
                .clone()
                .unwrap_or(HookAnswer::Result(BeforeRunResult {
                    prompt: Value::String(context.prompt.clone()),
                    messages: None,
                }))
        }
        fn call_tool(&mut self, _: &str, call: ToolUseBlock) -> ToolOutcome {
            self.tools.push(call);
            ToolOutcome {
                content: ToolResultContent::Text("tool says hi".into()),
                is_error: false,
            }
        }
        fn external_send(
            &mut self,
            _: &str,
            _: ExternalKind,
            text: String,
        ) -> Result<String, String> {
            self.external.push(text);
            self.backend.clone().unwrap_or(Ok("external".into()))
        }
        fn progress(&mut self, event: ProgressEvent) {
            self.progress.push(event);
        }
        fn evaluation(&mut self, record: EvaluationRecord) {
            self.evaluations.push(record);
        }
        fn now_ms(&mut self) -> u64 {
            1_000 + 5 * self.sent.len() as u64
        }
        fn random_unit(&mut self) -> f64 {
            0.5
        }
    }

    fn reply(text: &str) -> LlmResponse {
        LlmResponse {
            id: "r".into(),
            content: vec![ContentBlock::Text(TextBlock { text: text.into() })],
            model: "m".into(),
            stop_reason: "end_turn".into(),
            usage: TokenUsage {
                input_tokens: 4,
                output_tokens: 2,
            },
        }
    }

    fn spec() -> RunSpec {
        RunSpec {
            template: ChatRequest {
                model: "m".into(),
                system_prompt: Some("sys".into()),
                messages: Vec::new(),
                tools: Vec::new(),
                sampling: Sampling::default(),
                thinking: None,
                extra_body: Default::default(),
                preserve_reasoning_as_text: false,
                stream: false,
            },
            turn: TurnOptions {
                agent_name: "a".into(),
                max_turns: DEFAULT_MAX_TURNS,
                token_budget: None,
                provider: Some("anthropic".into()),
            },
            before_run: false,
            external: None,
            config_json: "{}".into(),
        }
    }

    fn image() -> ContentBlock {
        ContentBlock::Image(ImageBlock {
            source: crate::message::ImageSource {
                media_type: "image/png".into(),
                data: "aQ==".into(),
            },
        })
    }

    #[test]
    fn prompt_appends_the_turn_and_the_reply() {
        let mut agent = Agent::new(spec(), vec![LlmMessage::user_text("old")]).unwrap();
        let mut io = Script::default();
        let outcome = agent
            .prompt(PromptInput::Text("new".into()), &mut io)
            .unwrap();
        assert!(outcome.success);
        assert_eq!(io.sent[0].messages.len(), 2);
        assert_eq!(agent.history().len(), 3);
        assert_eq!(agent.history()[2].role, Role::Assistant);
        agent.reset();
        assert!(agent.history().is_empty());
    }

    #[test]
    fn a_failed_prompt_keeps_only_the_user_turn() {
        let mut agent = Agent::new(spec(), vec![]).unwrap();
        let mut io = Script::default();
        io.responses.push_back(Err(Error::Provider {
            provider: "anthropic".into(),
            status: Some(500),
            message: "down".into(),
        }));
        let outcome = agent
            .prompt(PromptInput::Text("q".into()), &mut io)
            .unwrap();
        assert!(!outcome.success);
        assert_eq!(agent.history(), &[LlmMessage::user_text("q")]);
    }

    #[test]
    fn the_hook_rewrites_the_execution_copy_only() {
        let mut s = spec();
        s.before_run = true;
        let mut agent = Agent::new(s, vec![]).unwrap();
        let mut io = Script {
            hook: Some(HookAnswer::Result(BeforeRunResult {
                prompt: Value::String("NEW".into()),
                messages: None,
            })),
            ..Script::default()
        };
        let turn = vec![
            image(),
            ContentBlock::Text(TextBlock { text: "old".into() }),
        ];
        agent
            .prompt(PromptInput::Blocks(turn.clone()), &mut io)
            .unwrap();
        assert_eq!(io.contexts[0].prompt, "old");
        assert_eq!(
            io.sent[0].messages[0].content[1],
            ContentBlock::Text(TextBlock { text: "NEW".into() })
        );
        assert_eq!(agent.history()[0].content, turn);
    }

    #[test]
    fn hook_failures_are_callback_failures_and_nothing_is_sent() {
        for answer in [
            HookAnswer::Failed("boom".into()),
            HookAnswer::Rejected(Error::invalid("bad answer")),
            HookAnswer::Result(BeforeRunResult {
                prompt: Value::Null,
                messages: None,
            }),
        ] {
            let mut s = spec();
            s.before_run = true;
            let agent = Agent::new(s, vec![]).unwrap();
            let mut io = Script {
                hook: Some(answer),
                ..Script::default()
            };
            let run: Run<Scripted> = agent.start(RunInput::Text("q".into()), false).unwrap();
            let outcome = run.finish(&mut io);
            let failure = outcome.failure.unwrap();
            assert_eq!(
                failure.error_info.kind,
                crate::agent::outcome::FailureKind::Callback
            );
            assert!(io.sent.is_empty());
        }
    }

    #[test]
    fn external_runs_send_text_and_fail_as_results() {
        let mut s = spec();
        s.external = Some(ExternalKind::Process);
        s.turn.provider = None;
        let agent = Agent::new(s, vec![]).unwrap();
        let mut io = Script::default();
        let run: Run<Scripted> = agent.start(RunInput::Text(" q ".into()), false).unwrap();
        let outcome = run.finish(&mut io);
        assert_eq!(outcome.output, "external");
        assert_eq!(io.external, ["sys\n\nq"]);
        io.backend = Some(Err("process exited with 1".into()));
        let run: Run<Scripted> = agent.start(RunInput::Text("q".into()), false).unwrap();
        let outcome = run.finish(&mut io);
        assert_eq!(outcome.output, "process exited with 1");
        assert_eq!(
            outcome.failure.unwrap().error_info.kind,
            crate::agent::outcome::FailureKind::Unknown
        );
        assert!(io.sent.is_empty());
    }

    #[test]
    fn streaming_yields_pieces_then_the_turn_then_done() {
        let agent = Agent::new(spec(), vec![]).unwrap();
        let mut io = Script::default();
        io.streams.push_back(vec![
            Ok(StreamEvent::Reasoning("hm".into())),
            Ok(StreamEvent::Text("he".into())),
            Ok(StreamEvent::Text("llo".into())),
            Ok(StreamEvent::Done(reply("hello"))),
        ]);
        let mut run: Run<Scripted> = agent.start(RunInput::Text("q".into()), true).unwrap();
        let mut events = Vec::new();
        while let Some(event) = run.next_event(&mut io) {
            events.push(event);
        }
        assert_eq!(events[0], AgentEvent::ReasoningDelta("hm".into()));
        assert_eq!(events[1], AgentEvent::TextDelta("he".into()));
        assert_eq!(events[3], AgentEvent::Turn(Event::Text("hello".into())));
        assert!(matches!(&events[4], AgentEvent::Done(o) if o.success));
        assert_eq!(events.len(), 5);
        assert!(run.next_event(&mut io).is_none());
    }

    #[test]
    fn a_stream_that_ends_early_fails_the_run() {
        let agent = Agent::new(spec(), vec![]).unwrap();
        let mut io = Script::default();
        io.streams
            .push_back(vec![Ok(StreamEvent::Text("he".into()))]);
        let run: Run<Scripted> = agent.start(RunInput::Text("q".into()), true).unwrap();
        let outcome = run.finish(&mut io);
        assert!(!outcome.success);
        assert_eq!(
            outcome.output,
            "the stream ended without a complete response"
        );
    }

    #[test]
    fn run_agent_orders_progress_and_evaluation() {
        let mut io = Script::default();
        let evaluation = Evaluation {
            store_payloads: StorePayloads::Full,
            sample_rate: 1.0,
        };
        let outcome = run_agent(
            spec(),
            RunInput::Text("q".into()),
            true,
            Some(evaluation),
            &mut io,
        )
        .unwrap();
        let kinds: Vec<&str> = io.progress.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["agent_start", "agent_complete"]);
        assert_eq!(io.progress[0].data, json!({"prompt": "q"}));
        assert_eq!(io.progress[1].data, outcome_json(&outcome));
        assert_eq!(io.evaluations[0].input, "q");
        assert_eq!(io.evaluations[0].duration_ms, 5);
        // A sample rate below the draw (0.5) skips evaluation.
        let mut io = Script::default();
        let evaluation = Evaluation {
            sample_rate: 0.4,
            ..evaluation
        };
        run_agent(
            spec(),
            RunInput::Text("q".into()),
            false,
            Some(evaluation),
            &mut io,
        )
        .unwrap();
        assert!(io.evaluations.is_empty() && io.progress.is_empty());
    }

    #[test]
    fn invalid_tool_answers_end_the_run() {
        struct BadTool(Script);
        impl Io for BadTool {
            type Stream = Scripted;
            fn chat(&mut self, r: &ChatRequest) -> Result<LlmResponse, Error> {
                self.0.chat(r)
            }
            fn open_stream(&mut self, r: &ChatRequest) -> Result<Scripted, Error> {
                self.0.open_stream(r)
            }
            fn before_run(&mut self, a: &str, c: &BeforeRunContext, j: &str) -> HookAnswer {
                self.0.before_run(a, c, j)
            }
            fn call_tool(&mut self, _: &str, _: ToolUseBlock) -> ToolOutcome {
                ToolOutcome {
                    content: ToolResultContent::Parts(vec![]),
                    is_error: false,
                }
            }
            fn external_send(
                &mut self,
                a: &str,
                k: ExternalKind,
                t: String,
            ) -> Result<String, String> {
                self.0.external_send(a, k, t)
            }
            fn progress(&mut self, e: ProgressEvent) {
                self.0.progress(e)
            }
            fn evaluation(&mut self, r: EvaluationRecord) {
                self.0.evaluation(r)
            }
            fn now_ms(&mut self) -> u64 {
                0
            }
            fn random_unit(&mut self) -> f64 {
                0.0
            }
        }
        let mut script = Script::default();
        let mut call = reply("");
        call.content = vec![ContentBlock::ToolUse(ToolUseBlock {
            id: "t1".into(),
            name: "x".into(),
            input: json!({}),
            signature: None,
        })];
        script.responses.push_back(Ok(call));
        let mut io = BadTool(script);
        let agent = Agent::new(spec(), vec![]).unwrap();
        let run: Run<Scripted> = agent.start(RunInput::Text("q".into()), false).unwrap();
        let outcome = run.finish(&mut io);
        assert_eq!(
            outcome.output,
            "messages[2].content[0].content must not be an empty content-part array"
        );
        assert_eq!(io.0.sent.len(), 1);
    }

    #[test]
    fn outcome_json_has_oma_field_names() {
        let agent = Agent::new(spec(), vec![]).unwrap();
        let run: Run<Scripted> = agent.start(RunInput::Text("q".into()), false).unwrap();
        let value = outcome_json(&run.finish(&mut Script::default()));
        assert_eq!(value["success"], true);
        assert_eq!(value["output"], "end");
        assert_eq!(
            value["tokenUsage"],
            json!({"input_tokens": 4, "output_tokens": 2})
        );
        assert_eq!(value["toolCalls"], json!([]));
        assert!(value.get("status").is_none() && value.get("errorInfo").is_none());
    }
}
