//! The agent turn loop (OMA's `AgentRunner`), as a state machine with no I/O: it says which chat
//! request to send and which tools to call, and is told what came back. The driver (the
//! transport, or a test with scripted responses) does the sending and the calling.
//!
//! Behaviour follows `docs/agent.md#the-turn-loop` (OMA's runner):
//!
//! * a turn is one chat request; the response becomes one assistant message;
//! * the turn's text (its text blocks joined with `''`) is emitted when not empty;
//! * the summed usage is checked against the token budget right after each response;
//! * when the response has `tool_use` blocks, each is announced, called, and answered; all the
//!   `tool_result` blocks go back in **one** user message, in call order, and the next turn
//!   starts; otherwise the run is over;
//! * `max_turns` caps the number of chat requests (OMA's default is 10).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use crate::adapter::{ChatRequest, Validated};
use crate::agent::context::{
    plan_summary, ContextOptions, ContextStrategy, PendingSummary, SummaryCache, SummaryPlan,
};
use crate::agent::loop_detect::{LoopDetection, LoopGuard, LoopInfo, Verdict};
use crate::agent::outcome::{classify, classify_budget, Ending, RunOutcome, ToolCallRecord};
use crate::error::{Error, Refused};
use crate::message::{
    ContentBlock, LlmMessage, LlmResponse, Role, TextBlock, TokenUsage, ToolResultBlock,
    ToolResultContent, ToolUseBlock,
};

/// OMA's default `maxTurns` (`runner.ts`: `options.maxTurns ?? 10`).
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// The limits and names a run is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOptions {
    /// The agent's name, used in the `TokenBudgetExceededError` message.
    pub agent_name: String,
    /// The most chat requests the run sends (OMA's `maxTurns`).
    pub max_turns: u32,
    /// The most input plus output tokens the run may use, summed over its turns (OMA's
    /// `maxTokenBudget`); `None` for no budget.
    pub token_budget: Option<u64>,
    /// The agent's configured provider, used to classify failures (`errorInfo.kind`).
    pub provider: Option<String>,
    /// Loop detection (OMA's `loopDetection`); `None` for none.
    pub loop_detection: Option<LoopDetection>,
    /// How the conversation is cut down before each request.
    pub context: ContextOptions,
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            agent_name: "unknown".to_owned(),
            max_turns: DEFAULT_MAX_TURNS,
            token_budget: None,
            provider: None,
            loop_detection: None,
            context: ContextOptions::default(),
        }
    }
}

/// OMA's `TokenBudgetExceededError`: the run used more tokens than its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBudgetExceeded {
    /// The agent's name.
    pub agent: String,
    /// Input plus output tokens used so far.
    pub used: u64,
    /// The budget.
    pub budget: u64,
}

impl TokenBudgetExceeded {
    /// OMA's `TokenBudgetExceededError` as JSON: `{name, code, message, agent, tokensUsed,
    /// budget}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": "TokenBudgetExceededError",
            "code": "TOKEN_BUDGET_EXCEEDED",
            "message": self.to_string(),
            "agent": self.agent,
            "tokensUsed": self.used,
            "budget": self.budget,
        })
    }
}

impl fmt::Display for TokenBudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Agent \"{}\" exceeded token budget: {} tokens used (budget: {})",
            self.agent, self.used, self.budget
        )
    }
}

/// An agent-level stream event (`docs/agent.md#streaming`), other than `done` and `error` (those are
/// [`Action::Done`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The whole text of a turn that has text.
    Text(String),
    /// A tool call the model asked for, announced before it is called.
    ToolUse(ToolUseBlock),
    /// A tool's answer, announced once every call of the turn has answered.
    ToolResult(ToolResultBlock),
    /// The token budget was exceeded; the run ends next.
    BudgetExceeded(TokenBudgetExceeded),
    /// The run repeats itself (OMA's `loop_detected`); a warning or the end follows.
    LoopDetected(LoopInfo),
}

/// What the driver should do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send [`TurnLoop::request`] (the whole conversation so far), then call
    /// [`TurnLoop::handle_response`] or [`TurnLoop::handle_failure`]. The request is lent, not
    /// handed out, so its media is never copied from turn to turn.
    SendRequest,
    /// Call this tool, then call [`TurnLoop::handle_tool_result`] with its id.
    CallTool(ToolUseBlock),
    /// OMA's `onLoopDetected` function: ask the host what to do about this loop, then call
    /// [`TurnLoop::handle_loop_decision`] with its answer.
    DecideLoop(LoopInfo),
    /// The `custom` context strategy: hand the conversation about to be sent and its token
    /// estimate to the caller's function, then call [`TurnLoop::handle_compressed`] with what it
    /// returned.
    Compress {
        /// The conversation about to be sent (consumed tool results already compressed).
        messages: Vec<LlmMessage>,
        /// OMA's `estimateTokens` of it.
        estimated_tokens: u64,
    },
    /// Deliver this stream event.
    Emit(Event),
    /// The run is over; nothing follows.
    Done(RunOutcome),
}

/// Where the loop stands.
#[derive(Debug)]
enum State {
    /// A request was handed out; a response is due.
    AwaitingResponse,
    /// A summary request (the `summarize` strategy) was handed out; its response is due, then
    /// the turn's own request follows.
    AwaitingSummary(Box<SummaryCall>),
    /// The conversation was handed to the `custom` strategy's function; its answer is due, then
    /// the turn's request follows.
    AwaitingCompression,
    /// A loop was found and the host's `onLoopDetected` function was asked; its answer is due,
    /// then the turn goes on.
    AwaitingLoopDecision(Box<PendingTurn>),
    /// The turn's tool calls were handed out; their results are due, in any order.
    AwaitingTools {
        calls: Vec<ToolUseBlock>,
        results: Vec<Option<ToolResultBlock>>,
        /// For each id, the positions of its calls still waiting, first first: an answer finds
        /// its call in logarithmic time, so a turn of n calls costs O(n log n), not O(n²).
        waiting: BTreeMap<String, VecDeque<usize>>,
        /// How many results are still due.
        remaining: usize,
    },
    /// `Done` was queued.
    Finished,
}

/// The agent turn loop.
///
/// Call order:
///
/// 1. [`TurnLoop::new`] queues the first [`Action::SendRequest`] (or, with `max_turns` 0, an
///    immediate [`Action::Done`]).
/// 2. Drain [`poll`](TurnLoop::poll) until it returns `None`, acting on each action:
///    * [`Action::SendRequest`]: send [`request`](TurnLoop::request); answer with [`handle_response`](TurnLoop::handle_response)
///      or [`handle_failure`](TurnLoop::handle_failure);
///    * [`Action::CallTool`]: call the tool; answer with
///      [`handle_tool_result`](TurnLoop::handle_tool_result) (tools of one turn may run at once
///      and answer in any order);
///    * [`Action::Emit`]: deliver the event;
///    * [`Action::Done`]: the run is over.
/// 3. Feed the answer, and go back to 2.
///
/// Per response the actions come in this order: `Emit(Text)` when the turn has text;
/// `Emit(BudgetExceeded)` then `Done` when the summed usage exceeds the budget; otherwise, with
/// tool calls, one `Emit(ToolUse)` per call then one `CallTool` per call, in block order; once
/// all have answered, one `Emit(ToolResult)` per call in call order, then the next
/// `SendRequest` (or `Done` when `max_turns` requests have been sent); without tool calls,
/// `Done`.
///
/// Like OMA, the loop goes on whenever the response holds `tool_use` blocks, whatever its
/// `stop_reason`. An input that is not due (a response while tools are pending, an unknown
/// tool id, anything after `Done`) is ignored and the handler returns `false`. Never panics.
#[derive(Debug)]
pub struct TurnLoop {
    /// The template with the conversation so far as its messages: the request of every turn.
    request: ChatRequest,
    options: TurnOptions,
    produced: Vec<LlmMessage>,
    usage: TokenUsage,
    tool_calls: Vec<ToolCallRecord>,
    turns: u32,
    state: State,
    actions: VecDeque<Action>,
    /// Loop detection's state, when configured.
    loop_guard: Option<LoopGuard>,
    /// A loop ended the run.
    loop_detected: bool,
    /// The loop warning to add after this turn's tool results.
    warning: Option<&'static str>,
    /// The last summary of the `summarize` strategy, reused while it covers the same turns.
    summary_cache: Option<SummaryCache>,
}

/// A turn held while the host decides on a loop it showed.
#[derive(Debug)]
struct PendingTurn {
    info: LoopInfo,
    text: String,
    calls: Vec<ToolUseBlock>,
    over_budget: Option<crate::agent::outcome::Failure>,
}

/// A summary request in flight and what the conversation becomes once it is answered.
#[derive(Debug)]
struct SummaryCall {
    request: ChatRequest,
    pending: PendingSummary,
}

impl TurnLoop {
    /// A loop over `messages` (the effective messages, after `beforeRun`). Every request is
    /// `template` with its `messages` replaced by the conversation so far; the template's own
    /// messages are ignored.
    pub fn new(messages: Vec<LlmMessage>, template: ChatRequest, options: TurnOptions) -> Self {
        let loop_guard = options
            .loop_detection
            .map(|config| LoopGuard::new(config, &messages));
        let mut turn_loop = TurnLoop {
            loop_guard,
            loop_detected: false,
            warning: None,
            summary_cache: None,
            request: ChatRequest {
                messages,
                ..template
            },
            options,
            produced: Vec::new(),
            usage: TokenUsage::default(),
            tool_calls: Vec::new(),
            turns: 0,
            state: State::AwaitingResponse,
            actions: VecDeque::new(),
        };
        turn_loop.next_turn();
        turn_loop
    }

    /// The next thing to do, or `None` when nothing is due (waiting for an answer, or done and
    /// drained).
    pub fn poll(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether `Done` has been queued.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Finished)
    }

    /// The chat request of the current turn: the template with the whole conversation so far.
    pub fn request(&self) -> &ChatRequest {
        match &self.state {
            State::AwaitingSummary(call) => &call.request,
            _ => &self.request,
        }
    }

    /// Whether the request due is a summary request (OMA's `llm_call` phase `summary`) rather
    /// than a turn.
    pub fn summarizing(&self) -> bool {
        matches!(self.state, State::AwaitingSummary(_))
    }

    /// The same request, as validated, so the adapter formats it without checking it again.
    /// Every message joined the conversation validated: the loop is made (by the run machine)
    /// over prepared or merged input, which is validated; the machine checks each tool result
    /// at its place before handing it over; and a response holds only text, tool-use and
    /// reasoning blocks, which no rule constrains.
    pub(crate) fn validated(&self) -> Validated<'_> {
        // A summary request is one user message of text.
        Validated::trusted(self.request())
    }

    /// Where the result of the pending tool call `tool_use_id` will sit in the conversation:
    /// `(message, block)`; `None` when no such call is waiting.
    pub fn result_position(&self, tool_use_id: &str) -> Option<(usize, usize)> {
        let State::AwaitingTools { waiting, .. } = &self.state else {
            return None;
        };
        let block = *waiting.get(tool_use_id)?.front()?;
        Some((self.request.messages.len(), block))
    }

    /// The ids of the tool calls whose results are due, in the order of the calls.
    pub fn pending_tools(&self) -> impl Iterator<Item = String> + '_ {
        let pending = match &self.state {
            State::AwaitingTools { calls, results, .. } => Some(
                calls
                    .iter()
                    .zip(results)
                    .filter(|(_, result)| result.is_none())
                    .map(|(call, _)| call.id.clone()),
            ),
            _ => None,
        };
        pending.into_iter().flatten()
    }

    /// Feeds the provider's response to the pending request. Hands it back, refused and
    /// changing nothing, when no response is due.
    #[must_use = "a response that was not due is handed back, refused"]
    pub fn handle_response(&mut self, response: LlmResponse) -> Result<(), Refused<LlmResponse>> {
        if matches!(self.state, State::AwaitingSummary(_)) {
            self.handle_summary(response);
            return Ok(());
        }
        if !matches!(self.state, State::AwaitingResponse) {
            let message = format!(
                "unexpected answer: got a provider response, the turn loop waits for {}",
                self.expected()
            );
            return Err(Refused::new(response, message));
        }
        self.usage.add(response.usage);
        let message = LlmMessage {
            role: Role::Assistant,
            content: response.content,
        };
        let text = text_of(&message);
        let calls: Vec<ToolUseBlock> = message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse(call) => Some(call.clone()),
                _ => None,
            })
            .collect();
        self.request.messages.push(message.clone());
        self.produced.push(message);
        if !text.is_empty() {
            self.emit(Event::Text(text.clone()));
        }
        let used = self.usage.total();
        let mut over_budget = None;
        if let Some(budget) = self.options.token_budget {
            if used > budget {
                let exceeded = TokenBudgetExceeded {
                    agent: self.options.agent_name.clone(),
                    used,
                    budget,
                };
                over_budget = Some(classify_budget(&exceeded.to_string()));
                self.emit(Event::BudgetExceeded(exceeded));
            }
        }
        // Loop detection watches the turn before its tool calls are announced, so a run it
        // ends never announces calls that get no result.
        let verdict = match &mut self.loop_guard {
            Some(guard) => guard.observe(&calls, &text),
            None => Verdict::Clear,
        };
        if let Verdict::Ask(info) = verdict {
            // Announced first, as OMA yields the event before it calls the function.
            self.emit(Event::LoopDetected(info.clone()));
            self.actions.push_back(Action::DecideLoop(info.clone()));
            self.state = State::AwaitingLoopDecision(Box::new(PendingTurn {
                info,
                text,
                calls,
                over_budget,
            }));
            return Ok(());
        }
        self.after_verdict(verdict, true, text, calls, over_budget);
        Ok(())
    }

    /// Whether the `onLoopDetected` decision is due.
    pub fn awaits_loop_decision(&self) -> bool {
        matches!(self.state, State::AwaitingLoopDecision(_))
    }

    /// Feeds the host's `onLoopDetected` answer (OMA's words: `"terminate"`, `"warn"`,
    /// `"inject"`, anything else to go on), or its failure, which ends the run with it. Hands
    /// the answer back, refused and changing nothing, when no decision is due.
    #[must_use = "an answer that was not due is handed back, refused"]
    pub fn handle_loop_decision(
        &mut self,
        answer: Result<String, Error>,
    ) -> Result<(), Refused<Result<String, Error>>> {
        if !self.awaits_loop_decision() {
            let message = format!(
                "unexpected answer: got a loop decision, the turn loop waits for {}",
                self.expected()
            );
            return Err(Refused::new(answer, message));
        }
        let State::AwaitingLoopDecision(pending) =
            std::mem::replace(&mut self.state, State::AwaitingResponse)
        else {
            return Ok(());
        };
        let PendingTurn {
            info,
            text,
            calls,
            over_budget,
        } = *pending;
        match answer {
            Ok(action) => {
                let verdict = match &mut self.loop_guard {
                    Some(guard) => guard.decide(info, &action),
                    None => Verdict::Continue,
                };
                self.after_verdict(verdict, false, text, calls, over_budget);
            }
            Err(error) => {
                let _ = self.handle_failure(error);
            }
        }
        Ok(())
    }

    /// The rest of a turn once loop detection has spoken: the end, a warning, or the tool calls.
    /// `announce` emits the loop event (already emitted when the host was asked).
    fn after_verdict(
        &mut self,
        verdict: Verdict,
        announce: bool,
        text: String,
        calls: Vec<ToolUseBlock>,
        over_budget: Option<crate::agent::outcome::Failure>,
    ) {
        let warning = match verdict {
            Verdict::Clear | Verdict::Continue | Verdict::Ask(_) => None,
            Verdict::Warn(info) => {
                let warning = info.kind.warning();
                if announce {
                    self.emit(Event::LoopDetected(info));
                }
                Some(warning)
            }
            Verdict::Terminate(info) => {
                if announce {
                    self.emit(Event::LoopDetected(info));
                }
                self.loop_detected = true;
                let ending = over_budget.map_or(Ending::Completed, Ending::BudgetExceeded);
                self.finish(text, ending);
                return;
            }
        };
        if let Some(failure) = over_budget {
            self.finish(text, Ending::BudgetExceeded(failure));
            return;
        }
        if calls.is_empty() {
            match warning {
                // Warned: the warning is the next user turn, and the run goes on.
                Some(warning) => {
                    let message = LlmMessage {
                        role: Role::User,
                        content: vec![ContentBlock::Text(TextBlock {
                            text: warning.to_owned(),
                        })],
                    };
                    self.request.messages.push(message.clone());
                    self.produced.push(message);
                    self.next_turn();
                }
                None => self.finish(text, Ending::Completed),
            }
            return;
        }
        self.warning = warning;
        for call in &calls {
            self.emit(Event::ToolUse(call.clone()));
        }
        for call in &calls {
            self.actions.push_back(Action::CallTool(call.clone()));
        }
        let mut waiting: BTreeMap<String, VecDeque<usize>> = BTreeMap::new();
        for (at, call) in calls.iter().enumerate() {
            waiting.entry(call.id.clone()).or_default().push_back(at);
        }
        self.state = State::AwaitingTools {
            results: vec![None; calls.len()],
            remaining: calls.len(),
            waiting,
            calls,
        };
    }

    /// Feeds the answer of the tool call `tool_use_id`. `is_error` marks a failed tool (the
    /// block then carries `is_error: true`; otherwise the field is left out). Hands the content
    /// back, refused and changing nothing, when no call with that id is waiting.
    #[must_use = "a result no call waited for is handed back, refused"]
    pub fn handle_tool_result(
        &mut self,
        tool_use_id: &str,
        content: ToolResultContent,
        is_error: bool,
    ) -> Result<(), Refused<ToolResultContent>> {
        self.handle_tool_answer(tool_use_id, content, is_error.then_some(true))
    }

    /// As [`TurnLoop::handle_tool_result`], with `is_error` exactly as the tool said it (OMA's
    /// optional `isError`): the result block carries it as given, so `Some(false)` travels as
    /// `is_error: false` and `None` leaves the field out.
    #[must_use = "a result no call waited for is handed back, refused"]
    pub fn handle_tool_answer(
        &mut self,
        tool_use_id: &str,
        content: ToolResultContent,
        is_error: Option<bool>,
    ) -> Result<(), Refused<ToolResultContent>> {
        let not_waiting = |content| {
            let id: String = tool_use_id.chars().take(64).collect();
            let message =
                format!("unexpected answer: no tool call with id {id:?} is waiting for its result");
            Err(Refused::new(content, message))
        };
        let State::AwaitingTools {
            calls,
            results,
            waiting,
            remaining,
        } = &mut self.state
        else {
            return not_waiting(content);
        };
        let Some(positions) = waiting.get_mut(tool_use_id) else {
            return not_waiting(content);
        };
        let Some(at) = positions.pop_front() else {
            return not_waiting(content);
        };
        if positions.is_empty() {
            waiting.remove(tool_use_id);
        }
        let Some(slot) = results.get_mut(at) else {
            return not_waiting(content);
        };
        *slot = Some(ToolResultBlock {
            tool_use_id: tool_use_id.to_owned(),
            content,
            is_error,
        });
        *remaining = remaining.saturating_sub(1);
        if *remaining > 0 {
            return Ok(());
        }
        let calls = std::mem::take(calls);
        let results: Vec<ToolResultBlock> = std::mem::take(results).into_iter().flatten().collect();
        for (call, result) in calls.into_iter().zip(&results) {
            self.tool_calls.push(ToolCallRecord {
                tool_name: call.name,
                input: call.input,
                output: result.content.clone(),
                is_error: result.is_error == Some(true),
            });
            self.emit(Event::ToolResult(result.clone()));
        }
        let mut content: Vec<ContentBlock> =
            results.into_iter().map(ContentBlock::ToolResult).collect();
        if let Some(warning) = self.warning.take() {
            // A loop warning rides with the results, after them.
            content.push(ContentBlock::Text(TextBlock {
                text: warning.to_owned(),
            }));
        }
        let message = LlmMessage {
            role: Role::User,
            content,
        };
        self.request.messages.push(message.clone());
        self.produced.push(message);
        self.next_turn();
        Ok(())
    }

    /// Ends the run with `error` (a failed request, or anything else the driver cannot get
    /// past): `Done` with `success: false`, the error's message as output, no messages, zero
    /// usage, and `status`/`errorInfo` from [`classify`]. Events already queued are still
    /// delivered; queued requests and tool calls are dropped. Hands the error back, refused,
    /// when the run is already done.
    #[must_use = "a failure after the end is handed back, refused"]
    pub fn handle_failure(&mut self, error: Error) -> Result<(), Refused<Error>> {
        if self.is_finished() {
            let message = "unexpected answer: got a failure, the turn loop is over".to_owned();
            return Err(Refused::new(error, message));
        }
        self.actions
            .retain(|action| matches!(action, Action::Emit(_)));
        let failure = classify(&error, false, self.options.provider.as_deref());
        self.state = State::Finished;
        self.actions.push_back(Action::Done(RunOutcome::failed(
            &error, self.turns, failure,
        )));
        Ok(())
    }

    /// What the loop waits for, for the message of a refusal.
    fn expected(&self) -> &'static str {
        match self.state {
            State::AwaitingResponse | State::AwaitingSummary(_) => "a provider response",
            State::AwaitingCompression => "the custom context strategy's messages",
            State::AwaitingLoopDecision(_) => "the onLoopDetected decision",
            State::AwaitingTools { .. } => "tool results",
            State::Finished => "nothing: the loop is over",
        }
    }

    /// Starts the next turn, or ends the run when `max_turns` requests have been sent.
    fn next_turn(&mut self) {
        if self.turns >= self.options.max_turns {
            // OMA leaves its loop with no final output, then falls back to the text of the
            // last assistant message of the conversation.
            let output = self
                .request
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant)
                .map(text_of)
                .unwrap_or_default();
            self.finish(output, Ending::Completed);
            return;
        }
        self.turns += 1;
        self.options
            .context
            .apply(&mut self.request.messages, self.turns);
        self.state = State::AwaitingResponse;
        if let Some(ContextStrategy::Custom) = &self.options.context.strategy {
            self.state = State::AwaitingCompression;
            self.actions.push_back(Action::Compress {
                messages: self.request.messages.clone(),
                estimated_tokens: crate::agent::context::estimate_tokens(&self.request.messages),
            });
            return;
        }
        if let Some(ContextStrategy::Summarize(summarize)) = &self.options.context.strategy {
            match plan_summary(
                &self.request.messages,
                summarize.max_tokens,
                self.summary_cache.as_ref(),
            ) {
                SummaryPlan::Keep => {}
                SummaryPlan::Cached(messages) => self.request.messages = messages,
                SummaryPlan::Ask(mut pending) => {
                    // OMA's summary call: the turn's options with the summary model, no tools,
                    // and a whole (not streamed) response.
                    let conversation = std::mem::take(&mut self.request.messages);
                    let mut request = self.request.clone();
                    self.request.messages = conversation;
                    request.messages = std::mem::take(&mut pending.messages);
                    request.tools = Vec::new();
                    request.stream = false;
                    if let Some(model) = &summarize.summary_model {
                        request.model.clone_from(model);
                    }
                    self.state = State::AwaitingSummary(Box::new(SummaryCall { request, pending }));
                }
            }
        }
        self.actions.push_back(Action::SendRequest);
    }

    /// Whether the `custom` strategy's answer is due.
    pub fn awaits_compression(&self) -> bool {
        matches!(self.state, State::AwaitingCompression)
    }

    /// Feeds what the `custom` strategy's function returned (or how it failed). OMA's rules: a
    /// failure ends the run with it; an empty list ends it with OMA's
    /// `contextStrategy.custom.compress must return a non-empty LLMMessage[]`; messages that
    /// break OMA's message rules end it with an `InvalidMessageError` before anything is sent.
    /// Otherwise they become the conversation, and the turn's request follows. Hands the answer
    /// back, refused and changing nothing, when no answer is due.
    #[must_use = "an answer that was not due is handed back, refused"]
    pub fn handle_compressed(
        &mut self,
        answer: Result<Vec<LlmMessage>, Error>,
    ) -> Result<(), Refused<Result<Vec<LlmMessage>, Error>>> {
        if !self.awaits_compression() {
            let message = format!(
                "unexpected answer: got compressed messages, the turn loop waits for {}",
                self.expected()
            );
            return Err(Refused::new(answer, message));
        }
        self.state = State::AwaitingResponse;
        let checked = answer.and_then(|messages| {
            if messages.is_empty() {
                return Err(crate::agent::context::custom_compress_not_messages());
            }
            crate::validate::validate_messages(&messages)?;
            Ok(messages)
        });
        match checked {
            Ok(messages) => {
                self.request.messages = messages;
                self.actions.push_back(Action::SendRequest);
            }
            Err(error) => {
                let _ = self.handle_failure(error);
            }
        }
        Ok(())
    }

    /// The summary request's response: its usage counts, the conversation becomes the first
    /// user message and the recent turns with the summary before them, and the turn's own
    /// request follows.
    fn handle_summary(&mut self, response: LlmResponse) {
        let State::AwaitingSummary(call) =
            std::mem::replace(&mut self.state, State::AwaitingResponse)
        else {
            return;
        };
        self.usage.add(response.usage);
        let text: String = response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let (messages, cache) = call.pending.finish(&text);
        self.request.messages = messages;
        self.summary_cache = Some(cache);
        self.actions.push_back(Action::SendRequest);
    }

    fn emit(&mut self, event: Event) {
        self.actions.push_back(Action::Emit(event));
    }

    fn finish(&mut self, output: String, ending: Ending) {
        self.state = State::Finished;
        let outcome = RunOutcome {
            output,
            messages: std::mem::take(&mut self.produced),
            token_usage: self.usage,
            tool_calls: std::mem::take(&mut self.tool_calls),
            turns: self.turns,
            ending,
            loop_detected: self.loop_detected,
            structured: None,
        };
        self.actions.push_back(Action::Done(outcome));
    }
}

/// The text blocks of a message joined with `''` (OMA's `extractText`).
fn text_of(message: &LlmMessage) -> String {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::TextBlock;

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextBlock { text: t.into() })
    }

    fn call(id: &str, name: &str) -> ToolUseBlock {
        ToolUseBlock {
            id: id.into(),
            name: name.into(),
            input: json!({"q": id}),
            signature: None,
        }
    }

    fn response(content: Vec<ContentBlock>, stop: &str, input: u64, output: u64) -> LlmResponse {
        LlmResponse {
            id: "r".into(),
            content,
            model: "m".into(),
            stop_reason: stop.into(),
            usage: TokenUsage::new(input, output),
            stop_sequence: None,
        }
    }

    fn template() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system_prompt: Some("be brief".into()),
            ..ChatRequest::default()
        }
    }

    fn input() -> Vec<LlmMessage> {
        vec![LlmMessage::user_text("question")]
    }

    fn drain(turn: &mut TurnLoop) -> Vec<Action> {
        std::iter::from_fn(|| turn.poll()).collect()
    }

    fn request<'a>(turn: &'a TurnLoop, action: &Action) -> &'a ChatRequest {
        match action {
            Action::SendRequest => turn.request(),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn done(actions: &[Action]) -> &RunOutcome {
        match actions.last() {
            Some(Action::Done(outcome)) => outcome,
            other => panic!("expected done, got {other:?}"),
        }
    }

    #[test]
    fn single_text_turn() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        let first = drain(&mut turn);
        assert_eq!(first.len(), 1);
        let sent = request(&turn, &first[0]);
        assert_eq!(sent.messages, input());
        assert_eq!(sent.model, "m");
        assert_eq!(sent.system_prompt.as_deref(), Some("be brief"));
        assert!(turn.poll().is_none());

        assert!(turn
            .handle_response(response(vec![text("hi")], "end_turn", 3, 2))
            .is_ok());
        let actions = drain(&mut turn);
        assert_eq!(actions[0], Action::Emit(Event::Text("hi".into())));
        let outcome = done(&actions);
        assert!(outcome.success());
        assert_eq!(outcome.output, "hi");
        assert_eq!(
            outcome.messages,
            vec![LlmMessage {
                role: Role::Assistant,
                content: vec![text("hi")]
            }]
        );
        assert_eq!(outcome.token_usage, TokenUsage::new(3, 2));
        assert_eq!(outcome.turns, 1);
        assert!(outcome.failure().is_none() && !outcome.budget_exceeded());
        assert!(turn.is_finished());
        assert!(turn.poll().is_none());
        assert!(turn
            .handle_response(response(vec![text("late")], "end_turn", 1, 1))
            .is_err());
        assert!(turn.poll().is_none());
    }

    #[test]
    fn output_joins_the_last_turns_text_blocks_with_nothing() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        let reasoning = ContentBlock::Reasoning(crate::message::ReasoningBlock {
            text: "think".into(),
            signature: None,
            redacted_data: None,
            provenance: None,
        });
        assert!(turn
            .handle_response(response(
                vec![text("a"), reasoning, text("b"), text(" c")],
                "end_turn",
                1,
                1,
            ))
            .is_ok());
        let actions = drain(&mut turn);
        assert_eq!(actions[0], Action::Emit(Event::Text("ab c".into())));
        assert_eq!(done(&actions).output, "ab c");
    }

    #[test]
    fn a_turn_without_text_emits_no_text_event() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        assert!(turn
            .handle_response(response(vec![], "end_turn", 1, 0))
            .is_ok());
        let actions = drain(&mut turn);
        assert_eq!(actions.len(), 1);
        assert_eq!(done(&actions).output, "");
    }

    #[test]
    fn two_turn_tool_loop() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        let c = call("t1", "search");
        assert!(turn
            .handle_response(response(
                vec![text("looking"), ContentBlock::ToolUse(c.clone())],
                "tool_use",
                10,
                5,
            ))
            .is_ok());
        let actions = drain(&mut turn);
        assert_eq!(
            actions,
            vec![
                Action::Emit(Event::Text("looking".into())),
                Action::Emit(Event::ToolUse(c.clone())),
                Action::CallTool(c.clone()),
            ]
        );
        assert!(turn
            .handle_response(response(vec![text("early")], "end_turn", 1, 1))
            .is_err());
        assert!(turn
            .handle_tool_result("nope", ToolResultContent::Text("x".into()), false)
            .is_err());
        assert!(turn
            .handle_tool_result("t1", ToolResultContent::Text("found".into()), false)
            .is_ok());
        let actions = drain(&mut turn);
        let result = ToolResultBlock {
            tool_use_id: "t1".into(),
            content: ToolResultContent::Text("found".into()),
            is_error: None,
        };
        assert_eq!(actions.len(), 2);
        assert_eq!(actions[0], Action::Emit(Event::ToolResult(result.clone())));
        let assistant = LlmMessage {
            role: Role::Assistant,
            content: vec![text("looking"), ContentBlock::ToolUse(c.clone())],
        };
        let tool_turn = LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(result)],
        };
        let second = request(&turn, &actions[1]);
        assert_eq!(
            second.messages,
            vec![input()[0].clone(), assistant.clone(), tool_turn.clone()]
        );
        assert_eq!(second.system_prompt.as_deref(), Some("be brief"));

        assert!(turn
            .handle_response(response(vec![text("done")], "end_turn", 20, 3))
            .is_ok());
        let actions = drain(&mut turn);
        let outcome = done(&actions);
        assert!(outcome.success());
        assert_eq!(outcome.output, "done");
        assert_eq!(
            outcome.messages,
            vec![
                assistant,
                tool_turn,
                LlmMessage {
                    role: Role::Assistant,
                    content: vec![text("done")]
                }
            ]
        );
        assert_eq!(outcome.token_usage, TokenUsage::new(30, 8));
        assert_eq!(outcome.turns, 2);
        assert_eq!(
            outcome.tool_calls,
            vec![ToolCallRecord {
                tool_name: "search".into(),
                input: json!({"q": "t1"}),
                output: ToolResultContent::Text("found".into()),
                is_error: false,
            }]
        );
    }

    #[test]
    fn several_tool_calls_answer_in_any_order_and_return_in_call_order() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        let (a, b, c) = (call("a", "one"), call("b", "two"), call("c", "three"));
        assert!(turn
            .handle_response(response(
                vec![
                    ContentBlock::ToolUse(a.clone()),
                    ContentBlock::ToolUse(b.clone()),
                    ContentBlock::ToolUse(c.clone()),
                ],
                "tool_use",
                1,
                1,
            ))
            .is_ok());
        let actions = drain(&mut turn);
        assert_eq!(
            actions,
            vec![
                Action::Emit(Event::ToolUse(a.clone())),
                Action::Emit(Event::ToolUse(b.clone())),
                Action::Emit(Event::ToolUse(c.clone())),
                Action::CallTool(a),
                Action::CallTool(b),
                Action::CallTool(c),
            ]
        );
        assert!(turn
            .handle_tool_result("c", ToolResultContent::Text("C".into()), false)
            .is_ok());
        assert!(turn.poll().is_none());
        assert!(turn
            .handle_tool_result("a", ToolResultContent::Text("A".into()), true)
            .is_ok());
        assert!(turn
            .handle_tool_result("a", ToolResultContent::Text("again".into()), false)
            .is_err());
        assert!(turn.poll().is_none());
        assert!(turn
            .handle_tool_result("b", ToolResultContent::Text("B".into()), false)
            .is_ok());
        let actions = drain(&mut turn);
        let ids: Vec<_> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Emit(Event::ToolResult(r)) => Some(r.tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        let sent = request(
            &turn,
            actions.last().unwrap_or_else(|| panic!("no actions")),
        );
        let last = sent
            .messages
            .last()
            .unwrap_or_else(|| panic!("no messages"));
        assert_eq!(last.role, Role::User);
        let blocks: Vec<_> = last
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult(r) => (r.tool_use_id.as_str(), r.is_error),
                other => panic!("unexpected block {other:?}"),
            })
            .collect();
        assert_eq!(blocks, [("a", Some(true)), ("b", None), ("c", None)]);
        assert_eq!(sent.messages.len(), 3);

        assert!(turn
            .handle_response(response(vec![text("ok")], "end_turn", 1, 1))
            .is_ok());
        let actions = drain(&mut turn);
        let outcome = done(&actions);
        let names: Vec<_> = outcome
            .tool_calls
            .iter()
            .map(|r| r.tool_name.as_str())
            .collect();
        assert_eq!(names, ["one", "two", "three"]);
        assert!(outcome.tool_calls[0].is_error);
    }

    #[test]
    fn tool_use_blocks_drive_the_loop_whatever_the_stop_reason() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        let c = call("x", "t");
        assert!(turn
            .handle_response(response(
                vec![ContentBlock::ToolUse(c.clone())],
                "max_tokens",
                1,
                1,
            ))
            .is_ok());
        assert_eq!(drain(&mut turn).last(), Some(&Action::CallTool(c)));
        // And `tool_use` without blocks ends the run.
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        assert!(turn
            .handle_response(response(vec![text("t")], "tool_use", 1, 1))
            .is_ok());
        assert!(done(&drain(&mut turn)).success());
    }

    #[test]
    fn max_turns_stops_after_the_last_tool_results() {
        let options = TurnOptions {
            max_turns: 2,
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(input(), template(), options);
        let mut requests = 0;
        for i in 0..2 {
            let actions = drain(&mut turn);
            assert!(matches!(actions.last(), Some(Action::SendRequest)));
            requests += 1;
            let id = format!("t{i}");
            assert!(turn
                .handle_response(response(
                    vec![
                        text(&format!("turn {i}")),
                        ContentBlock::ToolUse(call(&id, "t")),
                    ],
                    "tool_use",
                    1,
                    1,
                ))
                .is_ok());
            drain(&mut turn);
            assert!(turn
                .handle_tool_result(&id, ToolResultContent::Text("r".into()), false)
                .is_ok());
        }
        let actions = drain(&mut turn);
        assert_eq!(requests, 2);
        assert!(!actions.iter().any(|a| matches!(a, Action::SendRequest)));
        let outcome = done(&actions);
        assert!(outcome.success());
        assert_eq!(outcome.turns, 2);
        assert_eq!(outcome.output, "turn 1");
        assert_eq!(outcome.messages.len(), 4);
        assert_eq!(outcome.messages[3].role, Role::User);
        assert_eq!(outcome.tool_calls.len(), 2);
    }

    #[test]
    fn zero_max_turns_sends_nothing() {
        let options = TurnOptions {
            max_turns: 0,
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(input(), template(), options);
        let actions = drain(&mut turn);
        assert_eq!(actions.len(), 1);
        let outcome = done(&actions);
        assert!(outcome.success() && outcome.messages.is_empty() && outcome.turns == 0);
    }

    #[test]
    fn token_budget_ends_the_run_after_the_turn_that_exceeds_it() {
        let options = TurnOptions {
            agent_name: "writer".into(),
            token_budget: Some(100),
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(input(), template(), options);
        drain(&mut turn);
        // 60 tokens: within the budget, so the tools run.
        assert!(turn
            .handle_response(response(
                vec![ContentBlock::ToolUse(call("a", "t"))],
                "tool_use",
                50,
                10,
            ))
            .is_ok());
        drain(&mut turn);
        assert!(turn
            .handle_tool_result("a", ToolResultContent::Text("r".into()), false)
            .is_ok());
        drain(&mut turn);
        // 60 + 41 = 101 > 100.
        let c = call("b", "t");
        assert!(turn
            .handle_response(response(
                vec![text("partial"), ContentBlock::ToolUse(c)],
                "tool_use",
                40,
                1,
            ))
            .is_ok());
        let actions = drain(&mut turn);
        let exceeded = TokenBudgetExceeded {
            agent: "writer".into(),
            used: 101,
            budget: 100,
        };
        assert_eq!(
            exceeded.to_string(),
            "Agent \"writer\" exceeded token budget: 101 tokens used (budget: 100)"
        );
        assert_eq!(actions[0], Action::Emit(Event::Text("partial".into())));
        assert_eq!(
            actions[1],
            Action::Emit(Event::BudgetExceeded(exceeded.clone()))
        );
        assert!(!actions.iter().any(|a| matches!(a, Action::CallTool(_))));
        let outcome = done(&actions);
        assert!(!outcome.success() && outcome.budget_exceeded());
        assert_eq!(outcome.output, "partial");
        assert_eq!(outcome.messages.len(), 3);
        assert_eq!(outcome.token_usage, TokenUsage::new(90, 11));
        let failure = outcome.failure().unwrap_or_else(|| panic!("no failure"));
        assert_eq!(
            serde_json::to_value(failure).unwrap_or_default(),
            json!({
                "status": {"code": "budget_exhausted", "message": exceeded.to_string()},
                "errorInfo": {
                    "kind": "budget",
                    "code": "TOKEN_BUDGET_EXCEEDED",
                    "name": "TokenBudgetExceededError",
                    "message": exceeded.to_string(),
                    "retryable": false
                }
            })
        );
    }

    #[test]
    fn usage_equal_to_the_budget_is_within_it() {
        let options = TurnOptions {
            token_budget: Some(10),
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(input(), template(), options);
        drain(&mut turn);
        assert!(turn
            .handle_response(response(vec![text("x")], "end_turn", 5, 5))
            .is_ok());
        let outcome = done(&drain(&mut turn)).clone();
        assert!(outcome.success() && !outcome.budget_exceeded());
    }

    #[test]
    fn a_failure_mid_run_reports_no_messages() {
        let options = TurnOptions {
            provider: Some("anthropic".into()),
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(input(), template(), options);
        drain(&mut turn);
        assert!(turn
            .handle_response(response(
                vec![ContentBlock::ToolUse(call("a", "t"))],
                "tool_use",
                5,
                5,
            ))
            .is_ok());
        drain(&mut turn);
        assert!(turn
            .handle_tool_result("a", ToolResultContent::Text("r".into()), false)
            .is_ok());
        drain(&mut turn);
        let error = Error::Provider {
            provider: "anthropic".into(),
            status: Some(529),
            message: "overloaded".into(),
            code: None,
            error_type: None,
        };
        assert!(turn.handle_failure(error.clone()).is_ok());
        let actions = drain(&mut turn);
        assert_eq!(actions.len(), 1);
        let outcome = done(&actions);
        assert!(!outcome.success());
        assert_eq!(outcome.output, error.to_string());
        assert!(outcome.messages.is_empty() && outcome.tool_calls.is_empty());
        assert_eq!(outcome.token_usage, TokenUsage::default());
        assert_eq!(outcome.turns, 2);
        let failure = outcome.failure().unwrap_or_else(|| panic!("no failure"));
        assert_eq!(failure, &classify(&error, false, Some("anthropic")));
        assert!(turn.handle_failure(error).is_err());
        assert!(turn.poll().is_none());
    }

    #[test]
    fn a_failure_drops_pending_tool_calls_but_keeps_events() {
        let mut turn = TurnLoop::new(input(), template(), TurnOptions::default());
        drain(&mut turn);
        let c = call("a", "t");
        assert!(turn
            .handle_response(response(
                vec![text("hm"), ContentBlock::ToolUse(c.clone())],
                "tool_use",
                1,
                1,
            ))
            .is_ok());
        assert!(turn.handle_failure(Error::invalid("bad")).is_ok());
        let actions = drain(&mut turn);
        assert_eq!(actions[0], Action::Emit(Event::Text("hm".into())));
        assert_eq!(actions[1], Action::Emit(Event::ToolUse(c)));
        assert_eq!(actions.len(), 3);
        assert!(!done(&actions).success());
        assert!(turn
            .handle_tool_result("a", ToolResultContent::Text("r".into()), false)
            .is_err());
    }
}
