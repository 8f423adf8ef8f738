//! The agent's own LLM adapter (OMA's `AgentConfig.adapter`: an object with `chat` and `stream`
//! that the application wrote), run by the host: what an agent declares about it
//! ([`HostAdapter`]), the model call a run hands its host instead of an HTTP request
//! ([`ModelCall`]), the reading of what the adapter answered (OMA's `LLMResponse`, or the events
//! of its stream: [`read`]), and the call in flight (`HostCall`), which the run machine steps
//! as it steps a provider call. See `docs/agent.md#your-own-llm-adapter`.
//!
//! Everything else of the run stays the core's: validation, hooks, tools, budgets, context
//! strategies, structured output and tracing see an adapter's answer as they see a provider's.
//! What OMA's runner does not do for an adapter the core does not do either: no retries (OMA
//! retries no `chat` call), no egress policy (OMA refuses one for a custom adapter), and the
//! conversation goes to the adapter as it is, reasoning blocks and their provenance included
//! (the adapter's reasoning declaration is its own to act on, as in OMA).

pub mod read;

use serde_json::{json, Map, Value};

use crate::adapter::{ChatRequest, StreamEvent};
use crate::error::{Error, Refused};
use crate::json::object::{Object, ShapeError};
use crate::message::LlmResponse;

pub use self::read::{answer_from_event_json, response_from_json, response_from_value, thrown};

/// How an adapter echoes reasoning back to its model (OMA's
/// `LLMAdapter.capabilities.echoesReasoning`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoesReasoning {
    /// `never`: its wire protocol takes no reasoning input.
    Never,
    /// `own-issued`: it echoes reasoning blocks it issued itself.
    OwnIssued,
    /// `tool-use-only`: it echoes reasoning within tool-calling conversations.
    ToolUseOnly,
}

impl EchoesReasoning {
    /// OMA's word.
    pub fn word(self) -> &'static str {
        match self {
            EchoesReasoning::Never => "never",
            EchoesReasoning::OwnIssued => "own-issued",
            EchoesReasoning::ToolUseOnly => "tool-use-only",
        }
    }

    /// The declaration OMA's word names.
    pub fn from_word(word: &str) -> Option<Self> {
        match word {
            "never" => Some(EchoesReasoning::Never),
            "own-issued" => Some(EchoesReasoning::OwnIssued),
            "tool-use-only" => Some(EchoesReasoning::ToolUseOnly),
            _ => None,
        }
    }
}

/// An agent's own LLM adapter, as the agent's configuration declares it: the host holds the
/// adapter itself and answers each [`ModelCall`] with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAdapter {
    /// The adapter's `name` (OMA's provider name of its model calls in traces).
    pub name: String,
    /// Its `capabilities.echoesReasoning`, when it declares one.
    pub echoes_reasoning: Option<EchoesReasoning>,
}

impl HostAdapter {
    /// Reads `{"name", "capabilities"?: {"echoesReasoning"}}` (the `adapter` key of an agent's
    /// JSON configuration), refusing any other key.
    pub fn from_object(mut adapter: Object) -> Result<Self, ShapeError> {
        let name = adapter.required_string("name")?;
        let echoes_reasoning = match adapter.object("capabilities")? {
            None => None,
            Some(mut capabilities) => {
                let word = capabilities.string("echoesReasoning")?;
                let echoes = match word.as_deref() {
                    None => None,
                    Some(word) => Some(EchoesReasoning::from_word(word).ok_or_else(|| {
                        capabilities.invalid(
                            "echoesReasoning",
                            "must be \"never\", \"own-issued\" or \"tool-use-only\"",
                        )
                    })?),
                };
                capabilities.finish()?;
                echoes
            }
        };
        adapter.finish()?;
        Ok(HostAdapter {
            name,
            echoes_reasoning,
        })
    }

    /// The declaration as its configuration's JSON: what a `beforeRun` hook is shown.
    pub fn to_json(&self) -> Value {
        let mut adapter = json!({ "name": self.name });
        if let Some(echoes) = self.echoes_reasoning {
            adapter["capabilities"] = json!({ "echoesReasoning": echoes.word() });
        }
        adapter
    }
}

/// One model call for the host's adapter: OMA's `adapter.chat(messages, options)`, or
/// `adapter.stream(messages, options)` when the run streams.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelCall {
    /// The adapter's name.
    pub adapter: String,
    /// The conversation (a copy of its own) and the options: the request of the turn, or the
    /// summary request of the `summarize` strategy. `request.stream` says whether the run
    /// streams (and so whether the adapter's stream is wanted).
    pub request: ChatRequest,
    /// The most the call may take, in milliseconds (the agent's call deadline, within what is
    /// left of the run's): past it the call fails with OMA's `LLMCallTimeoutError`. A host may
    /// hand it to the adapter as OMA's `abortSignal`.
    pub timeout_ms: u64,
}

impl ModelCall {
    /// Whether the run streams: the host may answer with the adapter's stream events, whose
    /// text and reasoning then come out as deltas, or with `chat`'s whole response.
    pub fn streamed(&self) -> bool {
        self.request.stream
    }

    /// OMA's `LLMChatOptions` for this call, as the runner builds them: `model`, then each
    /// option the agent sets (`tools`, `maxTokens`, `temperature`, `topP`, `topK`, `minP`,
    /// `parallelToolCalls`, `frequencyPenalty`, `presencePenalty`, `extraBody`, `thinking`,
    /// `preserveReasoningAsText`, `compressReasoningText`, `systemPrompt`), unset ones left out.
    pub fn options_json(&self) -> Value {
        let request = &self.request;
        let sampling = &request.sampling;
        let mut options = Map::new();
        options.insert("model".into(), json!(request.model));
        if !request.tools.is_empty() {
            options.insert(
                "tools".into(),
                Value::Array(
                    request
                        .tools
                        .iter()
                        .map(|tool| {
                            json!({
                                "name": tool.name,
                                "description": tool.description,
                                "inputSchema": tool.input_schema,
                            })
                        })
                        .collect(),
                ),
            );
        }
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                options.insert(key.to_owned(), value);
            }
        };
        put("maxTokens", sampling.max_tokens.map(Value::from));
        put("temperature", sampling.temperature.map(Value::from));
        put("topP", sampling.top_p.map(Value::from));
        put("topK", sampling.top_k.map(Value::from));
        put("minP", sampling.min_p.map(Value::from));
        put(
            "parallelToolCalls",
            sampling.parallel_tool_calls.map(Value::from),
        );
        put(
            "frequencyPenalty",
            sampling.frequency_penalty.map(Value::from),
        );
        put(
            "presencePenalty",
            sampling.presence_penalty.map(Value::from),
        );
        put(
            "extraBody",
            (!request.extra_body.is_empty()).then(|| Value::Object(request.extra_body.clone())),
        );
        let thinking = match (request.thinking, sampling.reasoning_effort.as_deref()) {
            (None, None) => None,
            (thinking, effort) => {
                let mut config = json!({
                    "enabled": thinking.is_some_and(|thinking| thinking.enabled),
                });
                if let Some(budget) = thinking.and_then(|thinking| thinking.budget_tokens) {
                    config["budgetTokens"] = json!(budget);
                }
                if let Some(effort) = effort {
                    config["effort"] = json!(effort);
                }
                Some(config)
            }
        };
        put("thinking", thinking);
        put(
            "preserveReasoningAsText",
            request
                .preserve_reasoning_as_text
                .then_some(Value::Bool(true)),
        );
        put(
            "compressReasoningText",
            request.reasoning_text_max_chars.map(|max| match max {
                usize::MAX => Value::Bool(false),
                max => json!({ "minChars": max }),
            }),
        );
        put(
            "systemPrompt",
            request.system_prompt.clone().map(Value::from),
        );
        Value::Object(options)
    }

    /// The call as one JSON text for hosts that hold JSON: `{"adapter", "messages" (OMA JSON),
    /// "options" (`LLMChatOptions`), "stream", "timeoutMs"}`.
    pub fn to_json(&self) -> String {
        let messages = crate::json::messages_to_json(&self.request.messages);
        let mut text = String::with_capacity(messages.len() + 256);
        text.push_str("{\"adapter\":");
        text.push_str(&Value::from(self.adapter.as_str()).to_string());
        text.push_str(",\"messages\":");
        text.push_str(&messages);
        text.push_str(",\"options\":");
        text.push_str(&self.options_json().to_string());
        text.push_str(",\"stream\":");
        text.push_str(if self.streamed() { "true" } else { "false" });
        text.push_str(",\"timeoutMs\":");
        text.push_str(&self.timeout_ms.to_string());
        text.push('}');
        text
    }
}

/// One answer of the host's adapter to a [`ModelCall`]. Its failures (it threw, its stream
/// yielded an `error` event, or what it gave is not what OMA's contract says) are the `Err` of
/// the answer ([`crate::agent::machine::Answer::Model`]), and end the call.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelAnswer {
    /// `chat`'s whole response, read and checked.
    Response(LlmResponse),
    /// One event of the adapter's stream: a text or reasoning piece, a tool call, or `done`
    /// with the whole response, which ends the call.
    Event(StreamEvent),
    /// The stream ended. After `done` nothing is asked; before it, the call fails.
    End,
}

impl ModelAnswer {
    /// What the answer is, for the message that refuses it.
    pub fn name(&self) -> &'static str {
        match self {
            ModelAnswer::Response(_) => "the adapter's response",
            ModelAnswer::Event(_) => "an event of the adapter's stream",
            ModelAnswer::End => "the end of the adapter's stream",
        }
    }
}

/// Where a [`HostCall`] stands.
#[derive(Debug)]
enum State {
    /// Made; the call is handed out at the next poll.
    Ready(Box<ModelCall>),
    /// Handed out; its first answer is due by `deadline_ms`.
    Asked,
    /// Events of the adapter's stream came; more are due, then `done` (or the end, a failure).
    Streaming,
    /// The result waits to be polled.
    Finished(Result<LlmResponse, Error>),
    /// The result was polled.
    Over,
}

/// What [`HostCall::poll`] found.
#[derive(Debug)]
pub(crate) enum HostPoll {
    /// Hand this call to the host.
    Step(Box<ModelCall>),
    /// A text or reasoning piece of a streamed call, to deliver as a delta.
    Delta(StreamEvent),
    /// An answer is due.
    Waiting,
    /// The call is over: the adapter's response, or why there is none.
    Finished(Result<LlmResponse, Error>),
}

/// One model call of the host's adapter in flight, stepped by the run machine: the call is
/// handed out once, then answered with `chat`'s response, or with the events of the adapter's
/// stream up to `done`, or with a failure; past its deadline it fails with OMA's
/// `LLMCallTimeoutError`. As [`Call`](crate::http::call::Call) does, it refuses an answer that
/// does not fit, changing nothing.
#[derive(Debug)]
pub(crate) struct HostCall {
    state: State,
    adapter: String,
    streamed: bool,
    timeout_ms: u64,
    /// When the call fails with a timeout, once it was handed out.
    deadline_ms: Option<u64>,
    /// Deltas answered, to hand out.
    deltas: std::collections::VecDeque<StreamEvent>,
}

impl HostCall {
    /// A call of `call` on the adapter, handed out at the next poll.
    pub(crate) fn new(call: ModelCall) -> Self {
        HostCall {
            adapter: call.adapter.clone(),
            streamed: call.streamed(),
            timeout_ms: call.timeout_ms,
            state: State::Ready(Box::new(call)),
            deadline_ms: None,
            deltas: std::collections::VecDeque::new(),
        }
    }

    /// What the call needs at `now_ms`.
    pub(crate) fn poll(&mut self, now_ms: u64) -> HostPoll {
        if let Some(delta) = self.deltas.pop_front() {
            return HostPoll::Delta(delta);
        }
        let overdue = self.deadline_ms.is_some_and(|deadline| now_ms >= deadline);
        match std::mem::replace(&mut self.state, State::Over) {
            State::Ready(call) => {
                self.deadline_ms = Some(now_ms.saturating_add(self.timeout_ms));
                self.state = State::Asked;
                HostPoll::Step(call)
            }
            State::Asked | State::Streaming if overdue => HostPoll::Finished(Err(Error::Timeout {
                provider: self.adapter.clone(),
                timeout_ms: self.timeout_ms,
            })),
            waiting @ (State::Asked | State::Streaming) => {
                self.state = waiting;
                HostPoll::Waiting
            }
            State::Finished(result) => HostPoll::Finished(result),
            State::Over => HostPoll::Waiting,
        }
    }

    /// The instant by which the call fails unless answered; `None` before it was handed out
    /// and once it is over.
    pub(crate) fn wake_at(&self) -> Option<u64> {
        match self.state {
            State::Asked | State::Streaming => self.deadline_ms,
            _ => None,
        }
    }

    /// Whether an answer is due (no delta or result waits to be polled).
    pub(crate) fn awaits_answer(&self) -> bool {
        self.deltas.is_empty() && matches!(self.state, State::Asked | State::Streaming)
    }

    /// The answer the call waits for, for the message that refuses another.
    pub(crate) fn expected(&self) -> &'static str {
        match self.state {
            State::Asked => "the adapter's response, its first stream event or its failure",
            State::Streaming => "the next event of the adapter's stream, its end or its failure",
            _ => "no answer (poll for the next step)",
        }
    }

    /// Takes the adapter's answer; refuses, changing nothing, one that does not fit.
    pub(crate) fn handle(
        &mut self,
        answer: Result<ModelAnswer, Error>,
    ) -> Result<(), Refused<Result<ModelAnswer, Error>>> {
        if !self.awaits_answer() {
            return Err(self.refuse(answer));
        }
        let streaming = matches!(self.state, State::Streaming);
        let next = match answer {
            Err(error) => State::Finished(Err(error)),
            // A whole response is `chat`'s answer; a stream already begun ends with `done`.
            Ok(ModelAnswer::Response(response)) if !streaming => State::Finished(Ok(response)),
            Ok(ModelAnswer::Event(StreamEvent::Done(response))) => State::Finished(Ok(response)),
            Ok(ModelAnswer::Event(event)) => {
                if self.streamed
                    && matches!(event, StreamEvent::Text(_) | StreamEvent::Reasoning(_))
                {
                    self.deltas.push_back(event);
                }
                // A tool call is announced by the turn loop once the turn is complete, from
                // `done`'s response, as a provider's streamed call is.
                State::Streaming
            }
            Ok(ModelAnswer::End) => State::Finished(Err(Error::InvalidMessage {
                message: format!(
                    "the stream of adapter \"{}\" ended without a done event",
                    self.adapter
                ),
            })),
            refused @ Ok(ModelAnswer::Response(_)) => return Err(self.refuse(refused)),
        };
        self.state = next;
        Ok(())
    }

    fn refuse(&self, answer: Result<ModelAnswer, Error>) -> Refused<Result<ModelAnswer, Error>> {
        let got = match &answer {
            Ok(answer) => answer.name(),
            Err(_) => "the adapter's failure",
        };
        let message = format!(
            "unexpected answer: got {got}, the model call waits for {}",
            self.expected()
        );
        Refused::new(answer, message)
    }
}

#[cfg(test)]
mod tests;
