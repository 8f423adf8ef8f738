//! OMA's `beforeRun` hook semantics (`docs/agent.md#the-beforerun-hook`, `docs/agent.md#external-backends`), as plain functions over
//! owned values with no I/O: the prompt a hook sees, the context handed to it, how its result is
//! merged back into the execution list, and the text an external transport sends.
//!
//! Call order for one run: prepare the input (validate, [`reject_structured_for_external`] for
//! structured input on a process/ACP backend, copy), build a [`BeforeRunContext`] from the
//! effective messages, let the host run the hook on a copy of it, turn its JSON answer into a
//! [`BeforeRunResult`], and [`merge`] it. A process/ACP backend then sends
//! [`transport_prompt`] of the merged list.
//!
//! OMA's contract messages are copied byte for byte. No input makes these functions panic.

use serde_json::Value;

use crate::error::Error;
use crate::json::messages_from_value;
use crate::message::{ContentBlock, LlmMessage, Role, TextBlock};

/// An external backend that forwards text only, never structured messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExternalKind {
    /// A local process (`backend: {kind: 'process'}`).
    Process,
    /// An Agent Client Protocol session (`backend: {kind: 'acp'}`).
    Acp,
}

impl ExternalKind {
    /// OMA's word for the backend in its messages: `process` or `acp`.
    pub fn word(self) -> &'static str {
        match self {
            ExternalKind::Process => "process",
            ExternalKind::Acp => "acp",
        }
    }
}

/// What the hook is given: OMA's `ctx` without the agent configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BeforeRunContext {
    /// The text of the latest user message, joined with no separator (see [`prompt_of`]).
    pub prompt: String,
    /// A copy of the complete effective message list.
    pub messages: Vec<LlmMessage>,
}

impl BeforeRunContext {
    /// The context for a run over `messages`; the list is copied, so changing the context
    /// never changes the caller's messages.
    pub fn new(messages: &[LlmMessage]) -> Self {
        BeforeRunContext::from_messages(messages.to_vec())
    }

    /// The context for a run over `messages`, which it takes over: for a run that already holds
    /// its own copy, so large media is not copied again.
    pub fn from_messages(messages: Vec<LlmMessage>) -> Self {
        BeforeRunContext {
            prompt: prompt_of(&messages),
            messages,
        }
    }
}

/// What the hook returned, kept as JSON so that OMA's failures on a bad answer can be
/// reproduced exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct BeforeRunResult {
    /// The returned `prompt`; anything but a JSON string fails the merge.
    pub prompt: Value,
    /// The returned `messages`: `None` when absent (JS `undefined`), `Some(Value::Null)` for
    /// `null`, which fails the shared guard.
    pub messages: Option<Value>,
}

impl BeforeRunResult {
    /// Reads a hook's JSON answer `{prompt, messages?}`. A missing `prompt` and an answer that
    /// is not an object both read as a `null` prompt, so the merge reports
    /// `beforeRun.prompt must be a string`; a missing `messages` is `None`.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Object(mut fields) => BeforeRunResult {
                prompt: fields.remove("prompt").unwrap_or(Value::Null),
                messages: fields.remove("messages"),
            },
            _ => BeforeRunResult {
                prompt: Value::Null,
                messages: None,
            },
        }
    }
}

/// The latest `role: user` message, if any.
fn latest_user(messages: &[LlmMessage]) -> Option<&LlmMessage> {
    messages.iter().rev().find(|m| m.role == Role::User)
}

/// The text blocks of the latest user message, in block order.
fn latest_user_texts(messages: &[LlmMessage]) -> Vec<&str> {
    latest_user(messages)
        .map(|m| {
            m.content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text(TextBlock { text }) => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// OMA's `ctx.prompt`: the text blocks of the latest `role: user` message joined with no
/// separator; `""` when that message has no text or there is no user message.
pub fn prompt_of(messages: &[LlmMessage]) -> String {
    latest_user_texts(messages).concat()
}

/// What an external text transport (process, ACP) sends: the text blocks of the latest user
/// message joined with `"\n"` and trimmed as JavaScript's `String.prototype.trim` does.
pub fn transport_prompt(messages: &[LlmMessage]) -> String {
    latest_user_texts(messages)
        .join("\n")
        .trim_matches(is_js_whitespace)
        .to_owned()
}

/// JavaScript's `trim` set: Unicode white space and line terminators, plus U+FEFF, but not
/// U+0085 (which Rust's `trim` would remove).
pub(crate) fn is_js_whitespace(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// The error for structured input (`LLMMessage[]` to run/stream/runAgent, `ContentBlock[]` to
/// prompt) on an external backend; raised after validation and before the copy (`docs/messages.md#copying`).
pub fn reject_structured_for_external(kind: ExternalKind) -> Error {
    Error::invalid(format!(
        "The {} external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss.",
        kind.word()
    ))
}

/// Merges a hook's result into the execution list (OMA's algorithm, `docs/agent.md#beforerun-merge`) and
/// returns the list the run uses. `ctx` is the context given to the hook; its messages are the
/// execution list before the hook.
///
/// Fails with `InvalidMessage` if:
/// - `external` is set and `messages` is present and not deep-equal to `ctx.messages`
///   (`The <kind> external backend accepts beforeRun.prompt rewrites only; ...`);
/// - `prompt` is not a string (`beforeRun.prompt must be a string`);
/// - `messages` is present and fails the shared guard (its usual message; `null` gives
///   `messages must be an array, got null`).
pub fn merge(
    ctx: BeforeRunContext,
    result: BeforeRunResult,
    external: Option<ExternalKind>,
) -> Result<Vec<LlmMessage>, Error> {
    // 1. External backends forward text only.
    if let (Some(kind), Some(messages)) = (external, &result.messages) {
        let unchanged = js_deep_equal(messages, &crate::json::messages_to_value(&ctx.messages));
        if !unchanged {
            return Err(Error::invalid(format!(
                "The {} external backend accepts beforeRun.prompt rewrites only; beforeRun.messages cannot be forwarded without loss.",
                kind.word()
            )));
        }
    }
    // 2. The prompt must be a string.
    let Value::String(prompt) = result.prompt else {
        return Err(Error::invalid("beforeRun.prompt must be a string"));
    };
    // 3. Returned messages are validated and replace the whole list.
    let mut messages = match result.messages {
        Some(value) => messages_from_value(value)?,
        None => ctx.messages,
    };
    // 4. An unchanged prompt rewrites nothing, even after a replacement.
    if prompt == ctx.prompt {
        return Ok(messages);
    }
    // 5. Rewrite the latest user message of the (possibly replaced) list.
    if let Some(message) = messages.iter_mut().rev().find(|m| m.role == Role::User) {
        rewrite_text(&mut message.content, prompt);
    }
    Ok(messages)
}

/// Replaces the first text block by one holding `prompt` and drops the other text blocks,
/// keeping every other block in order; prepends the text when there is none.
fn rewrite_text(content: &mut Vec<ContentBlock>, prompt: String) {
    let new_block = ContentBlock::Text(TextBlock { text: prompt });
    match content
        .iter()
        .position(|b| matches!(b, ContentBlock::Text(_)))
    {
        Some(first) => {
            let mut index = 0;
            content.retain(|b| {
                let keep = index == first || !matches!(b, ContentBlock::Text(_));
                index += 1;
                keep
            });
            // Blocks before the first text block are all kept, so it stays at `first`.
            if let Some(slot) = content.get_mut(first) {
                *slot = new_block;
            }
        }
        None => content.insert(0, new_block),
    }
}

/// Deep equality as a JavaScript deep-equal sees parsed JSON: object key order does not
/// matter, and numbers compare by value (`1` equals `1.0`).
fn js_deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| js_deep_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| js_deep_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    fn img(data: &str) -> Value {
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
    }

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    fn user(content: Value) -> Value {
        json!({"role": "user", "content": content})
    }

    fn assistant(t: &str) -> Value {
        json!({"role": "assistant", "content": [text(t)]})
    }

    fn msgs(value: Value) -> Vec<LlmMessage> {
        messages_from_value(value).expect("fixture is valid")
    }

    fn prompt_only(prompt: &str) -> BeforeRunResult {
        BeforeRunResult {
            prompt: json!(prompt),
            messages: None,
        }
    }

    fn run(input: Value, result: BeforeRunResult) -> Result<Vec<LlmMessage>, Error> {
        merge(BeforeRunContext::new(&msgs(input)), result, None)
    }

    fn message_of(result: Result<Vec<LlmMessage>, Error>) -> String {
        let error = result.expect_err("merge fails");
        assert_eq!(error.kind(), ErrorKind::InvalidMessage);
        error.to_string()
    }

    /// Found by the `before_run_answer` fuzz target: a hook's image by URL passes the same URL
    /// rules as a video's, so a merged list never fails validation afterwards.
    #[test]
    fn a_hooks_image_by_url_is_held_to_the_url_rules() {
        let with_url = |url: &str| BeforeRunResult {
            prompt: json!("new"),
            messages: Some(json!([user(json!([text("a"), {"type": "image",
                "source": {"type": "url", "media_type": "image/png", "url": url}}]))])),
        };
        let input = json!([user(json!([text("old")]))]);
        assert_eq!(
            message_of(run(input.clone(), with_url("https:/?x.exampl4"))),
            "messages[0].content[1].source.url must be an absolute HTTP(S) URL"
        );
        assert_eq!(
            message_of(run(input.clone(), with_url("file:///etc/passwd"))),
            "messages[0].content[1].source.url must use HTTP or HTTPS"
        );
        let merged = run(input, with_url("https://example.com/a.png")).expect("valid");
        crate::validate::validate_messages(&merged).expect("a merged list is valid");
    }

    #[test]
    fn prompt_joins_latest_user_text_without_separator() {
        let messages = msgs(json!([
            user(json!([text("old")])),
            assistant("a"),
            user(json!([text("first"), img("AAAA"), text("second")])),
            assistant("b"),
        ]));
        assert_eq!(prompt_of(&messages), "firstsecond");
        assert_eq!(prompt_of(&msgs(json!([user(json!([img("AAAA")]))]))), "");
        assert_eq!(prompt_of(&msgs(json!([assistant("a")]))), "");
        assert_eq!(prompt_of(&[]), "");
    }

    #[test]
    fn transport_prompt_joins_with_newline_and_trims() {
        let messages = msgs(json!([
            user(json!([text("earlier")])),
            user(json!([
                text("  \n first"),
                img("AAAA"),
                text("second \u{feff}")
            ])),
        ]));
        assert_eq!(transport_prompt(&messages), "first\nsecond");
        assert_eq!(prompt_of(&messages), "  \n firstsecond \u{feff}");
        // U+0085 is not JavaScript white space, so `trim` keeps it.
        let nel = msgs(json!([user(json!([text("\u{85}x ")]))]));
        assert_eq!(transport_prompt(&nel), "\u{85}x");
        assert_eq!(transport_prompt(&msgs(json!([assistant("a")]))), "");
        assert_eq!(transport_prompt(&[]), "");
    }

    /// `docs/agent.md#the-beforerun-hook`: the context's messages are a copy; changing them leaves the input alone.
    #[test]
    fn context_messages_are_a_copy() {
        let input = msgs(json!([user(json!([text("A"), img("AAAA"), text("B")]))]));
        let before = input.clone();
        let mut ctx = BeforeRunContext::new(&input);
        assert_eq!(ctx.prompt, "AB");
        assert_eq!(ctx.messages, input);
        ctx.messages[0].content.clear();
        ctx.messages.push(LlmMessage::user_text("x"));
        ctx.prompt.push('!');
        assert_eq!(input, before);
        assert_eq!(input[0].content.len(), 3);
    }

    /// The worked examples of `docs/agent.md#beforerun-worked-examples`, one per line.
    #[test]
    fn worked_examples() {
        let tool_result = json!({"type": "tool_result", "tool_use_id": "t1", "content": "ok"});
        let cases = [
            (
                "text blocks collapse into the first one, other blocks keep their order",
                json!([user(json!([
                    img("I1"),
                    text("A"),
                    img("I2"),
                    text("B"),
                    tool_result
                ]))]),
                json!([user(json!([
                    img("I1"),
                    text("NEW"),
                    img("I2"),
                    tool_result
                ]))]),
            ),
            (
                "no text block: the prompt is prepended",
                json!([user(json!([img("I1"), img("I2")]))]),
                json!([user(json!([text("NEW"), img("I1"), img("I2")]))]),
            ),
            (
                "no user message: the change is ignored",
                json!([assistant("a")]),
                json!([assistant("a")]),
            ),
            (
                "no messages at all (run([])): nothing to rewrite",
                json!([]),
                json!([]),
            ),
            (
                "prompt-only result rewrites the latest user turn, not the assistant",
                json!([user(json!([text("A")])), assistant("b")]),
                json!([user(json!([text("NEW")])), assistant("b")]),
            ),
            (
                "only the latest user message is rewritten",
                json!([
                    user(json!([text("A")])),
                    assistant("b"),
                    user(json!([text("C")]))
                ]),
                json!([
                    user(json!([text("A")])),
                    assistant("b"),
                    user(json!([text("NEW")]))
                ]),
            ),
        ];
        for (why, input, expected) in cases {
            assert_eq!(run(input, prompt_only("NEW")), Ok(msgs(expected)), "{why}");
        }
        // Prompt changed to '' on [text A, IMG].
        assert_eq!(
            run(json!([user(json!([text("A"), img("I")]))]), prompt_only("")),
            Ok(msgs(json!([user(json!([text(""), img("I")]))])))
        );
    }

    /// The upstream test: the hook replaces the list and rewrites the prompt of the new list.
    #[test]
    fn replaced_messages_get_the_prompt_rewrite() {
        let result = BeforeRunResult {
            prompt: json!("prompt replacement"),
            messages: Some(json!([
                assistant("caller history"),
                user(json!([
                    img("beforeImg"),
                    text("one"),
                    img("afterImg"),
                    text("two")
                ])),
            ])),
        };
        assert_eq!(
            run(json!([user(json!([text("original")]))]), result),
            Ok(msgs(json!([
                assistant("caller history"),
                user(json!([
                    img("beforeImg"),
                    text("prompt replacement"),
                    img("afterImg")
                ])),
            ])))
        );
    }

    /// Step 4 compares with the original prompt, so replaced messages keep their text.
    #[test]
    fn unchanged_prompt_rewrites_nothing() {
        let input = json!([user(json!([text("A"), img("I"), text("B")]))]);
        assert_eq!(run(input.clone(), prompt_only("AB")), Ok(msgs(input)));
        let replacement = json!([user(json!([text("x"), text("y")]))]);
        let result = BeforeRunResult {
            prompt: json!("AB"),
            messages: Some(replacement.clone()),
        };
        assert_eq!(
            run(json!([user(json!([text("A"), text("B")]))]), result),
            Ok(msgs(replacement))
        );
    }

    #[test]
    fn result_reads_from_host_json() {
        assert_eq!(
            BeforeRunResult::from_value(json!({"prompt": "p", "agent": {}})),
            BeforeRunResult {
                prompt: json!("p"),
                messages: None
            }
        );
        assert_eq!(
            BeforeRunResult::from_value(json!({"prompt": 1, "messages": null})),
            BeforeRunResult {
                prompt: json!(1),
                messages: Some(Value::Null)
            }
        );
        assert_eq!(
            BeforeRunResult::from_value(json!("p")),
            BeforeRunResult {
                prompt: Value::Null,
                messages: None
            }
        );
    }

    /// The one table that pins OMA's wording, byte for byte, and the order of the checks.
    #[test]
    fn failure_messages_match_oma() {
        let input = || json!([user(json!([text("A")]))]);
        let image_turn = || Some(json!([user(json!([img("AAAA")]))]));
        let result = |prompt: Value, messages: Option<Value>| BeforeRunResult { prompt, messages };
        let process = Some(ExternalKind::Process);
        let acp = Some(ExternalKind::Acp);
        let cases = [
            (result(json!(1), None), None, "beforeRun.prompt must be a string"),
            (result(Value::Null, None), None, "beforeRun.prompt must be a string"),
            (result(json!(["A"]), None), process, "beforeRun.prompt must be a string"),
            (
                result(json!("A"), Some(Value::Null)),
                None,
                "messages must be an array, got null",
            ),
            (
                result(json!("A"), Some(json!([{"role": "user", "content": "hi"}]))),
                None,
                "messages[0].content must be a ContentBlock[], got string",
            ),
            // Step 2 runs before step 3.
            (
                result(json!(1), Some(Value::Null)),
                None,
                "beforeRun.prompt must be a string",
            ),
            (
                result(json!("A"), image_turn()),
                process,
                "The process external backend accepts beforeRun.prompt rewrites only; beforeRun.messages cannot be forwarded without loss.",
            ),
            (
                result(json!("NEW"), image_turn()),
                acp,
                "The acp external backend accepts beforeRun.prompt rewrites only; beforeRun.messages cannot be forwarded without loss.",
            ),
            // Step 1 runs first, and null is not the messages the hook was given.
            (
                result(json!(1), Some(Value::Null)),
                process,
                "The process external backend accepts beforeRun.prompt rewrites only; beforeRun.messages cannot be forwarded without loss.",
            ),
        ];
        for (result, external, expected) in cases {
            let ctx = BeforeRunContext::new(&msgs(input()));
            assert_eq!(message_of(merge(ctx.clone(), result, external)), expected);
        }
        assert_eq!(
            reject_structured_for_external(ExternalKind::Process).to_string(),
            "The process external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss."
        );
        assert_eq!(
            reject_structured_for_external(ExternalKind::Acp).to_string(),
            "The acp external backend accepts string prompts only; structured messages or content blocks cannot be forwarded without loss."
        );
        assert_eq!(
            reject_structured_for_external(ExternalKind::Acp).kind(),
            ErrorKind::InvalidMessage
        );
    }

    /// `docs/agent.md#external-backends`: a process backend applies a prompt rewrite to the text it sends.
    #[test]
    fn external_backend_takes_prompt_rewrites() {
        let ctx = BeforeRunContext::new(&[LlmMessage::user_text("plain text")]);
        let merged = merge(
            ctx,
            prompt_only("console.log(\"rewritten\")"),
            Some(ExternalKind::Process),
        )
        .expect("a prompt rewrite is allowed");
        assert_eq!(transport_prompt(&merged), "console.log(\"rewritten\")");
    }

    /// Returning the messages the hook was given is not a change, whatever the key order or
    /// number spelling of the host's JSON.
    #[test]
    fn external_backend_accepts_unchanged_messages() {
        let input = msgs(json!([user(
            json!([text("A"), {"type": "tool_use", "id": "u", "name": "n", "input": {"x": 1.0, "y": [2]}}])
        ),]));
        let ctx = BeforeRunContext::new(&input);
        let echoed = json!([{"content": [
            {"text": "A", "type": "text"},
            {"input": {"y": [2.0], "x": 1}, "name": "n", "id": "u", "type": "tool_use"},
        ], "role": "user"}]);
        let result = BeforeRunResult {
            prompt: json!("NEW"),
            messages: Some(echoed),
        };
        let merged =
            merge(ctx.clone(), result, Some(ExternalKind::Acp)).expect("unchanged messages");
        assert_eq!(prompt_of(&merged), "NEW");
        // An extra key is a change.
        let extra = json!([{"role": "user", "content": [
            {"type": "text", "text": "A", "cache_control": {}},
            {"type": "tool_use", "id": "u", "name": "n", "input": {"x": 1, "y": [2]}},
        ]}]);
        let result = BeforeRunResult {
            prompt: json!("A"),
            messages: Some(extra),
        };
        assert!(merge(ctx.clone(), result, Some(ExternalKind::Acp)).is_err());
    }

    /// No input panics: odd results only ever give errors or a list, and each combination gives
    /// the outcome OMA's merge order (external check, prompt type, the guard, the rewrite)
    /// prescribes.
    #[test]
    fn odd_results_do_not_panic() {
        let original = msgs(json!([user(json!([img("I")]))]));
        let ctx = BeforeRunContext::new(&original);
        assert_eq!(ctx.prompt, "");
        let mut outcomes = 0;
        for prompt in [json!(null), json!(true), json!({}), json!(""), json!("x")] {
            for messages in [
                None,
                Some(json!(null)),
                Some(json!([])),
                Some(json!([[]])),
                Some(json!({})),
            ] {
                for external in [None, Some(ExternalKind::Process)] {
                    let result = merge(
                        ctx.clone(),
                        BeforeRunResult {
                            prompt: prompt.clone(),
                            messages: messages.clone(),
                        },
                        external,
                    );
                    outcomes += 1;
                    let case = format!("{prompt} {messages:?} {external:?}");
                    // 1. An external backend refuses any message list other than its own.
                    if external.is_some() && messages.is_some() {
                        let error = result.expect_err(&case);
                        assert_eq!(
                            error.to_string(),
                            "The process external backend accepts beforeRun.prompt rewrites only; beforeRun.messages cannot be forwarded without loss.",
                            "{case}"
                        );
                        continue;
                    }
                    // 2. The prompt must be a string.
                    let Some(prompt) = prompt.as_str() else {
                        let error = result.expect_err(&case);
                        assert_eq!(error.kind(), ErrorKind::InvalidMessage, "{case}");
                        assert_eq!(error.to_string(), "beforeRun.prompt must be a string");
                        continue;
                    };
                    // 3. Returned messages pass the guard, or fail with its message.
                    let replaced = match &messages {
                        None => original.clone(),
                        Some(value) => match messages_from_value(value.clone()) {
                            Ok(list) => list,
                            Err(expected) => {
                                assert_eq!(result.expect_err(&case), expected, "{case}");
                                continue;
                            }
                        },
                    };
                    let merged = result.expect(&case);
                    // 4. and 5. An unchanged prompt keeps the list; a new one is written into
                    // the latest user message, if there is one.
                    let mut expected = replaced.clone();
                    if prompt != ctx.prompt {
                        if let Some(last) = expected.iter_mut().rev().find(|m| m.role == Role::User)
                        {
                            last.content.insert(
                                0,
                                ContentBlock::Text(TextBlock {
                                    text: prompt.to_string(),
                                }),
                            );
                        }
                    }
                    assert_eq!(merged, expected, "{case}");
                }
            }
        }
        assert_eq!(outcomes, 50);
        // The guard's own messages for the odd lists above.
        assert_eq!(
            messages_from_value(json!(null)).unwrap_err().to_string(),
            "messages must be an array, got null"
        );
        assert_eq!(
            messages_from_value(json!({})).unwrap_err().to_string(),
            "messages must be an array, got object"
        );
        assert!(messages_from_value(json!([[]])).is_err());
        assert_eq!(messages_from_value(json!([])).unwrap(), []);
    }
}
