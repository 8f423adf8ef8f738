//! Loop detection (OMA's `loopDetection`, see `docs/agent.md#loop-detection`): a run that keeps
//! making the same tool calls, or keeps writing the same text, is stuck. The detector watches
//! each assistant turn; when one kind of output has repeated `max_repetitions` times in a row,
//! the run is warned once (a warning joins the conversation) and ended if it goes on, or ended
//! at once, as configured.

use serde_json::{json, Map, Value};

use crate::json::object::{Object, ShapeError};
use crate::message::{ContentBlock, LlmMessage, Role, ToolUseBlock};

/// OMA's default `maxRepetitions`.
pub const DEFAULT_MAX_REPETITIONS: u32 = 3;
/// OMA's default `loopDetectionWindow`.
pub const DEFAULT_WINDOW: u32 = 4;

/// What a run does when a loop is found (OMA's `onLoopDetected` words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoopAction {
    /// Add a warning to the conversation and go on; end the run if the next turn still loops
    /// (OMA's default).
    #[default]
    Warn,
    /// End the run at once.
    Terminate,
    /// Ask the host (OMA's `onLoopDetected` function): it answers `"terminate"`, `"warn"` or
    /// `"inject"` (both: OMA's warning), or anything else to go on as if nothing was found.
    Ask,
}

/// How loops are detected (OMA's `LoopDetectionConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopDetection {
    /// How many identical turns in a row make a loop (at least 1).
    pub max_repetitions: u32,
    /// How many recent turns are remembered; raised to `max_repetitions` when smaller, so
    /// detection can always fire.
    pub window: u32,
    /// What happens then.
    pub action: LoopAction,
}

impl Default for LoopDetection {
    fn default() -> Self {
        LoopDetection {
            max_repetitions: DEFAULT_MAX_REPETITIONS,
            window: DEFAULT_WINDOW,
            action: LoopAction::Warn,
        }
    }
}

impl LoopDetection {
    /// Reads OMA's `loopDetection` object: `maxRepetitions`, `loopDetectionWindow` (positive
    /// integers) and `onLoopDetected` (`"warn"` or `"terminate"`). A callback is a host
    /// concern and is not accepted here.
    pub fn from_object(mut object: Object) -> Result<Self, ShapeError> {
        let defaults = LoopDetection::default();
        let positive = |object: &Object, key: &'static str, value: Option<u32>| match value {
            Some(0) => Err(object.invalid(key, "must be a positive integer, got 0")),
            other => Ok(other),
        };
        let max = object.u32("maxRepetitions")?;
        let max_repetitions =
            positive(&object, "maxRepetitions", max)?.unwrap_or(defaults.max_repetitions);
        let window = object.u32("loopDetectionWindow")?;
        let window = positive(&object, "loopDetectionWindow", window)?.unwrap_or(defaults.window);
        let action = match object.string("onLoopDetected")?.as_deref() {
            None | Some("warn") => LoopAction::Warn,
            Some("terminate") => LoopAction::Terminate,
            // The word a host that holds OMA's function sends for it.
            Some("callback") => LoopAction::Ask,
            Some(_) => {
                return Err(object.invalid("onLoopDetected", "must be \"warn\" or \"terminate\""))
            }
        };
        object.finish()?;
        Ok(LoopDetection {
            max_repetitions,
            window,
            action,
        })
    }

    /// The configuration as OMA's JSON, as a `beforeRun` hook is shown it.
    pub fn to_json(&self) -> Value {
        json!({
            "maxRepetitions": self.max_repetitions,
            "loopDetectionWindow": self.window,
            "onLoopDetected": match self.action {
                LoopAction::Warn => "warn",
                LoopAction::Terminate => "terminate",
                LoopAction::Ask => "callback",
            },
        })
    }
}

/// Which output repeated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// The same tool calls with the same arguments.
    ToolRepetition,
    /// The same text.
    TextRepetition,
}

impl LoopKind {
    /// OMA's word: `tool_repetition` or `text_repetition`.
    pub fn word(self) -> &'static str {
        match self {
            LoopKind::ToolRepetition => "tool_repetition",
            LoopKind::TextRepetition => "text_repetition",
        }
    }

    /// The user turn that tells the model it repeats itself (OMA's wording).
    pub fn warning(self) -> &'static str {
        match self {
            LoopKind::TextRepetition => {
                "WARNING: You appear to be generating the same response repeatedly. This \
                 suggests you are stuck in a loop. Please try a different approach or provide \
                 new information."
            }
            LoopKind::ToolRepetition => {
                "WARNING: You appear to be repeating the same tool calls with identical \
                 arguments. This suggests you are stuck in a loop. Please try a different \
                 approach, use different parameters, or explain what you are trying to \
                 accomplish."
            }
        }
    }
}

/// What the `loop_detected` event carries (OMA's `LoopDetectionInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopInfo {
    /// Which output repeated.
    pub kind: LoopKind,
    /// How many times in a row.
    pub repetitions: u32,
    /// A sentence for people.
    pub detail: String,
}

impl LoopInfo {
    /// OMA's JSON: `{kind, repetitions, detail}`.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind.word(),
            "repetitions": self.repetitions,
            "detail": self.detail,
        })
    }
}

/// What the turn loop does after a turn was watched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No loop: go on.
    Clear,
    /// A loop, first seen: announce it, then add `kind`'s warning to the conversation (to the
    /// tool results when the turn called tools, else as a user turn of its own) and go on.
    Warn(LoopInfo),
    /// A loop the run must end on: announce it and end the run (successfully, with
    /// `loopDetected`), the turn's tool calls not made.
    Terminate(LoopInfo),
    /// A loop the host decides on (OMA's `onLoopDetected` function): announce it, ask, then
    /// [`LoopGuard::decide`].
    Ask(LoopInfo),
    /// The host chose to go on as if no loop was found (OMA's `"continue"`).
    Continue,
}

/// The detector and the warning state of one run.
#[derive(Clone, Debug)]
pub struct LoopGuard {
    config: LoopDetection,
    tool_signatures: Vec<String>,
    texts: Vec<String>,
    /// A warning was given and no clear turn came since.
    warned: bool,
}

impl LoopGuard {
    /// A guard that has already seen the assistant turns of `history` (OMA counts a loop that
    /// began before the run).
    pub fn new(config: LoopDetection, history: &[LlmMessage]) -> Self {
        let mut guard = LoopGuard {
            config,
            tool_signatures: Vec::new(),
            texts: Vec::new(),
            warned: false,
        };
        for message in history.iter().filter(|m| m.role == Role::Assistant) {
            let calls: Vec<&ToolUseBlock> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse(call) => Some(call),
                    _ => None,
                })
                .collect();
            let text: String = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            guard.record_calls(&calls);
            guard.record_text(&text);
        }
        guard
    }

    /// Watches one assistant turn (its tool calls and its text) and says what to do. A repeated
    /// tool call wins over repeated text when both repeat.
    pub fn observe(&mut self, calls: &[ToolUseBlock], text: &str) -> Verdict {
        let calls: Vec<&ToolUseBlock> = calls.iter().collect();
        let tool = self.record_calls(&calls);
        let text = self.record_text(text);
        let Some(info) = tool.or(text) else {
            // The agent recovered: a later loop gets a fresh warning.
            self.warned = false;
            return Verdict::Clear;
        };
        match self.config.action {
            LoopAction::Terminate => Verdict::Terminate(info),
            LoopAction::Ask => Verdict::Ask(info),
            LoopAction::Warn => self.warn(info),
        }
    }

    /// A warning, or the end when one was already given and no clear turn came since.
    fn warn(&mut self, info: LoopInfo) -> Verdict {
        if self.warned {
            return Verdict::Terminate(info);
        }
        self.warned = true;
        Verdict::Warn(info)
    }

    /// The host's answer to a [`Verdict::Ask`], OMA's words: `"terminate"` ends the run,
    /// `"warn"` and `"inject"` warn (or end, when a warning was already given), anything else
    /// goes on.
    pub fn decide(&mut self, info: LoopInfo, action: &str) -> Verdict {
        match action {
            "terminate" => Verdict::Terminate(info),
            "warn" | "inject" => self.warn(info),
            _ => Verdict::Continue,
        }
    }

    fn window(&self) -> usize {
        self.config.window.max(self.config.max_repetitions) as usize
    }

    fn record_calls(&mut self, calls: &[&ToolUseBlock]) -> Option<LoopInfo> {
        if calls.is_empty() {
            return None;
        }
        let window = self.window();
        let count = push(&mut self.tool_signatures, signature(calls), window);
        (count >= self.config.max_repetitions).then(|| {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            LoopInfo {
                kind: LoopKind::ToolRepetition,
                repetitions: count,
                detail: format!(
                    "Tool call \"{}\" with identical arguments has repeated {count} times \
                     consecutively. The agent appears to be stuck in a loop.",
                    names.join(", ")
                ),
            }
        })
    }

    fn record_text(&mut self, text: &str) -> Option<LoopInfo> {
        let normalised = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if normalised.is_empty() {
            return None;
        }
        let window = self.window();
        let count = push(&mut self.texts, normalised, window);
        (count >= self.config.max_repetitions).then(|| LoopInfo {
            kind: LoopKind::TextRepetition,
            repetitions: count,
            detail: format!(
                "The agent has produced the same text response {count} times consecutively. It \
                 appears to be stuck in a loop."
            ),
        })
    }
}

/// Appends `entry`, keeps the last `window` entries, and counts the identical entries at the end.
fn push(buffer: &mut Vec<String>, entry: String, window: usize) -> u32 {
    buffer.push(entry);
    if buffer.len() > window {
        let excess = buffer.len() - window;
        buffer.drain(..excess);
    }
    let last = buffer.last();
    let count = buffer.iter().rev().take_while(|e| Some(*e) == last).count();
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// One turn's calls as one text that ignores the order of the calls and of object keys.
fn signature(calls: &[&ToolUseBlock]) -> String {
    let mut items: Vec<(String, String)> = calls
        .iter()
        .map(|c| (c.name.clone(), sorted(&c.input).to_string()))
        .collect();
    crate::sort::sort_by(&mut items, &|a, b| a.cmp(b));
    let items: Vec<Value> = items
        .into_iter()
        .map(|(name, input)| json!([name, input]))
        .collect();
    Value::Array(items).to_string()
}

/// The value with the keys of every object sorted.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            crate::sort::sort_by(&mut keys, &|a, b| a.cmp(b));
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: Value) -> ToolUseBlock {
        ToolUseBlock {
            id: "id".into(),
            name: name.into(),
            input,
            signature: None,
        }
    }

    fn config(max: u32, window: u32, action: LoopAction) -> LoopDetection {
        LoopDetection {
            max_repetitions: max,
            window,
            action,
        }
    }

    #[test]
    fn the_same_calls_in_any_key_order_repeat() {
        let mut guard = LoopGuard::new(LoopDetection::default(), &[]);
        let a = call("search", json!({"q": "x", "n": {"b": 1, "a": 2}}));
        let b = call("search", json!({"n": {"a": 2, "b": 1}, "q": "x"}));
        assert_eq!(guard.observe(std::slice::from_ref(&a), ""), Verdict::Clear);
        assert_eq!(guard.observe(&[b], ""), Verdict::Clear);
        let Verdict::Warn(info) = guard.observe(std::slice::from_ref(&a), "") else {
            panic!("the third identical turn warns");
        };
        assert_eq!(info.kind, LoopKind::ToolRepetition);
        assert_eq!(info.repetitions, 3);
        assert!(info.detail.contains("\"search\""), "{}", info.detail);
        // Still looping after the warning: the run ends.
        assert!(matches!(
            guard.observe(&[a], ""),
            Verdict::Terminate(LoopInfo { repetitions: 4, .. })
        ));
    }

    #[test]
    fn different_arguments_or_a_recovery_reset_the_count() {
        let mut guard = LoopGuard::new(config(2, 4, LoopAction::Warn), &[]);
        let a = call("t", json!({"x": 1}));
        assert_eq!(guard.observe(std::slice::from_ref(&a), ""), Verdict::Clear);
        assert!(matches!(
            guard.observe(std::slice::from_ref(&a), ""),
            Verdict::Warn(_)
        ));
        // A clear turn clears the warning too: the next loop is warned again, not ended.
        assert_eq!(
            guard.observe(&[call("t", json!({"x": 2}))], ""),
            Verdict::Clear
        );
        assert_eq!(guard.observe(std::slice::from_ref(&a), ""), Verdict::Clear);
        assert!(matches!(guard.observe(&[a], ""), Verdict::Warn(_)));
    }

    #[test]
    fn text_repeats_modulo_whitespace_and_terminate_ends_at_once() {
        let mut guard = LoopGuard::new(config(2, 1, LoopAction::Terminate), &[]);
        assert_eq!(guard.observe(&[], "  I am  stuck\n"), Verdict::Clear);
        let Verdict::Terminate(info) = guard.observe(&[], "I am stuck") else {
            panic!("the window is raised to the threshold, and terminate ends the run");
        };
        assert_eq!(info.kind, LoopKind::TextRepetition);
        assert_eq!(
            info.to_json(),
            json!({"kind": "text_repetition", "repetitions": 2, "detail": info.detail})
        );
        // Empty text never counts.
        let mut guard = LoopGuard::new(config(1, 1, LoopAction::Warn), &[]);
        assert_eq!(guard.observe(&[], " \n"), Verdict::Clear);
    }

    #[test]
    fn history_counts_towards_a_loop() {
        let turn = LlmMessage {
            role: Role::Assistant,
            content: vec![ContentBlock::Text(crate::message::TextBlock {
                text: "again".into(),
            })],
        };
        let mut guard = LoopGuard::new(LoopDetection::default(), &[turn.clone(), turn]);
        assert!(matches!(guard.observe(&[], "again"), Verdict::Warn(_)));
    }

    #[test]
    fn configuration_reads_omas_names_and_refuses_bad_values() {
        let read = |v: Value| LoopDetection::from_object(Object::strict(v).expect("object"));
        assert_eq!(read(json!({})).expect("defaults"), LoopDetection::default());
        assert_eq!(
            read(json!({"maxRepetitions": 5, "loopDetectionWindow": 8, "onLoopDetected": "terminate"}))
                .expect("valid"),
            config(5, 8, LoopAction::Terminate)
        );
        for (value, message) in [
            (
                json!({"maxRepetitions": 0}),
                "`maxRepetitions` must be a positive integer, got 0",
            ),
            (json!({"maxRepetitions": "3"}), "`maxRepetitions` must be"),
            (
                json!({"onLoopDetected": "stop"}),
                "`onLoopDetected` must be \"warn\" or \"terminate\"",
            ),
            (json!({"window": 3}), "unknown field `window`"),
        ] {
            let error = read(value.clone()).expect_err("invalid");
            assert!(error.to_string().starts_with(message), "{value}: {error}");
        }
    }
}

/// Loop detection driven through the turn loop, with scripted responses.
#[cfg(test)]
mod turn_tests {
    use serde_json::json;

    use super::*;
    use crate::adapter::ChatRequest;
    use crate::agent::turn::{Action, Event, TurnLoop, TurnOptions};
    use crate::message::{LlmResponse, TextBlock, TokenUsage, ToolResultContent};

    fn response(content: Vec<ContentBlock>) -> LlmResponse {
        LlmResponse {
            id: "r".into(),
            content,
            model: "m".into(),
            stop_reason: "end_turn".into(),
            usage: TokenUsage::default(),
            stop_sequence: None,
        }
    }

    fn call_block(id: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolUseBlock {
            id: id.into(),
            name: "lookup".into(),
            input: json!({"q": "same"}),
            signature: None,
        })
    }

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextBlock { text: t.into() })
    }

    fn turn_loop(action: LoopAction) -> TurnLoop {
        let options = TurnOptions {
            loop_detection: Some(LoopDetection {
                max_repetitions: 2,
                window: 4,
                action,
            }),
            ..TurnOptions::default()
        };
        TurnLoop::new(
            vec![LlmMessage::user_text("go")],
            ChatRequest::default(),
            options,
        )
    }

    fn drain(turn: &mut TurnLoop) -> Vec<Action> {
        std::iter::from_fn(|| turn.poll()).collect()
    }

    fn answer_tools(turn: &mut TurnLoop, actions: &[Action]) {
        for action in actions {
            if let Action::CallTool(call) = action {
                turn.handle_tool_result(&call.id, ToolResultContent::Text("r".into()), false)
                    .expect("due");
            }
        }
    }

    #[test]
    fn a_repeated_tool_call_is_warned_then_ended() {
        let mut turn = turn_loop(LoopAction::Warn);
        drain(&mut turn);
        turn.handle_response(response(vec![call_block("1")]))
            .expect("due");
        let first = drain(&mut turn);
        assert!(!first
            .iter()
            .any(|a| matches!(a, Action::Emit(Event::LoopDetected(_)))));
        answer_tools(&mut turn, &first);
        drain(&mut turn);

        // The second identical turn: announced as a loop before its calls, then warned.
        turn.handle_response(response(vec![call_block("2")]))
            .expect("due");
        let second = drain(&mut turn);
        let Some(Action::Emit(Event::LoopDetected(info))) = second.first() else {
            panic!("loop_detected comes first: {second:?}");
        };
        assert_eq!(info.kind, LoopKind::ToolRepetition);
        assert!(matches!(second[1], Action::Emit(Event::ToolUse(_))));
        answer_tools(&mut turn, &second);
        drain(&mut turn);
        // The warning rides after the tool results of that turn.
        let results = turn.request().messages.last().expect("results");
        assert!(matches!(results.content[0], ContentBlock::ToolResult(_)));
        assert_eq!(results.content[1], text(LoopKind::ToolRepetition.warning()));

        // Still looping: the run ends, successfully, without calling the tool again.
        turn.handle_response(response(vec![text("again"), call_block("3")]))
            .expect("due");
        let third = drain(&mut turn);
        assert!(!third
            .iter()
            .any(|a| matches!(a, Action::CallTool(_) | Action::Emit(Event::ToolUse(_)))));
        let Some(Action::Done(outcome)) = third.last() else {
            panic!("done: {third:?}");
        };
        assert!(outcome.success() && outcome.loop_detected);
        assert_eq!(outcome.output, "again");
        assert_eq!(outcome.turns, 3);
        let json = crate::agent::outcome::outcome_json(outcome);
        assert_eq!(json["loopDetected"], true);
    }

    #[test]
    fn repeated_text_gets_a_warning_turn_and_terminate_ends_at_once() {
        let mut turn = turn_loop(LoopAction::Warn);
        drain(&mut turn);
        turn.handle_response(response(vec![text("same")]))
            .expect("due");
        // Not a loop yet, and no tool calls: a normal end.
        assert!(matches!(drain(&mut turn).last(), Some(Action::Done(o)) if !o.loop_detected));

        let mut turn = TurnLoop::new(
            vec![
                LlmMessage::user_text("go"),
                LlmMessage {
                    role: Role::Assistant,
                    content: vec![text("same")],
                },
                LlmMessage::user_text("and?"),
            ],
            ChatRequest::default(),
            TurnOptions {
                loop_detection: Some(LoopDetection {
                    max_repetitions: 2,
                    ..LoopDetection::default()
                }),
                ..TurnOptions::default()
            },
        );
        drain(&mut turn);
        turn.handle_response(response(vec![text("same")]))
            .expect("due");
        let actions = drain(&mut turn);
        assert!(matches!(actions[1], Action::Emit(Event::LoopDetected(_))));
        assert_eq!(actions.last(), Some(&Action::SendRequest), "{actions:?}");
        let warning = turn.request().messages.last().expect("warning");
        assert_eq!(warning.role, Role::User);
        assert_eq!(
            warning.content,
            vec![text(LoopKind::TextRepetition.warning())]
        );
        // A different answer ends the run normally; the warning is one of its messages.
        turn.handle_response(response(vec![text("new")]))
            .expect("due");
        let Some(Action::Done(outcome)) = drain(&mut turn).pop() else {
            panic!("done");
        };
        assert!(!outcome.loop_detected);
        assert_eq!(outcome.messages.len(), 3);

        let mut turn = turn_loop(LoopAction::Terminate);
        drain(&mut turn);
        turn.handle_response(response(vec![call_block("1")]))
            .expect("due");
        let first = drain(&mut turn);
        answer_tools(&mut turn, &first);
        drain(&mut turn);
        turn.handle_response(response(vec![call_block("2")]))
            .expect("due");
        let Some(Action::Done(outcome)) = drain(&mut turn).pop() else {
            panic!("terminate ends at the first detection");
        };
        assert!(outcome.loop_detected && outcome.success());
        assert_eq!(outcome.turns, 2);
    }
}
