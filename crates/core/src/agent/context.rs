//! Context management (OMA's `contextStrategy`, `compressToolResults`,
//! `preserveReasoningAsText` and `compressReasoningText`; see `docs/agent.md#context-management`):
//! how the conversation a run sends shrinks as it grows. Everything here rewrites only what is
//! sent; the run's result keeps the messages as they were produced.

use serde_json::{json, Value};

// Lengths in UTF-16 units, as OMA's `string.length` counts.
use crate::js_text::len as units;
use crate::json::object::{Object, ShapeError};
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, Role, TextBlock, ToolResultBlock, ToolResultContent,
    ToolResultPart,
};

/// OMA's default `compressToolResults` threshold, in characters.
pub const DEFAULT_MIN_COMPRESS_CHARS: u32 = 500;

/// The name of OMA's delegation tool, whose results are never compressed.
const DELEGATE: &str = "delegate_to_agent";

/// How the conversation is cut down before each request (OMA's `ContextStrategy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContextStrategy {
    /// Keep the first user turn and about the last `max_turns` pairs of messages.
    SlidingWindow {
        /// The pairs of messages to keep; 0 keeps everything.
        max_turns: u32,
    },
    /// Rule-based compaction of old turns once the estimate passes `max_tokens`.
    Compact(Compact),
    /// Old turns replaced by a summary the model writes, once the estimate passes
    /// `max_tokens` (the run makes the summary request itself: [`plan_summary`]).
    Summarize(Summarize),
    /// The caller's function (OMA's `compress(messages, estimatedTokens)`): before every
    /// request, the host is handed the conversation and its estimate and answers with the
    /// conversation to send. Only hosts that answer callbacks (the `portable` world's sessions,
    /// the `component` world's `host.compress`) take it; the gateway refuses it.
    Custom,
}

/// The `summarize` strategy's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summarize {
    /// The estimated tokens above which old turns are summarized.
    pub max_tokens: u64,
    /// The model asked for the summary; the agent's own model when `None`.
    pub summary_model: Option<String>,
}

/// The `compact` strategy's settings, with OMA's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compact {
    /// The estimated tokens above which old turns are compacted.
    pub max_tokens: u64,
    /// Assistant/user pairs at the end kept as they are (default 4).
    pub preserve_recent_turns: u32,
    /// Tool results shorter than this stay (default 200).
    pub min_tool_result_chars: u32,
    /// Assistant text blocks shorter than this stay (default 2000).
    pub min_text_block_chars: u32,
    /// How much of a long text block is kept (default 200).
    pub text_block_excerpt_chars: u32,
}

impl Compact {
    /// `compact` at `max_tokens` with OMA's defaults for the rest.
    pub fn with_defaults(max_tokens: u64) -> Self {
        Compact {
            max_tokens,
            preserve_recent_turns: 4,
            min_tool_result_chars: 200,
            min_text_block_chars: 2000,
            text_block_excerpt_chars: 200,
        }
    }
}

/// What `compressReasoningText` asks for, when reasoning is sent as text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningText {
    /// OMA's default: each block cut to 1200 characters (head and tail).
    #[default]
    Default,
    /// `false`: sent whole.
    Whole,
    /// `{minChars: n}`: cut to `n` characters.
    MaxChars(u32),
}

/// An agent's context settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextOptions {
    /// The strategy applied before each request; `None` sends the conversation whole.
    pub strategy: Option<ContextStrategy>,
    /// Replace tool results the model has already answered, when at least this many
    /// characters long, with a short marker; `None` keeps them.
    pub compress_tool_results: Option<u32>,
    /// Send reasoning a wire format cannot echo as `<thinking>` text instead of dropping it.
    pub preserve_reasoning_as_text: bool,
    /// How that text is cut.
    pub compress_reasoning_text: ReasoningText,
}

impl ContextOptions {
    /// Reads OMA's keys from an agent configuration: `contextStrategy`, `compressToolResults`
    /// (`true`, `false` or `{minChars}`), `preserveReasoningAsText` and `compressReasoningText`
    /// (`true`, `false` or `{minChars}`).
    pub fn from_config(config: &mut Object) -> Result<Self, ShapeError> {
        let strategy = match config.object("contextStrategy")? {
            Some(object) => Some(ContextStrategy::from_object(object)?),
            None => None,
        };
        let compress_tool_results = match switch(config, "compressToolResults")? {
            Switch::Missing | Switch::Off => None,
            Switch::On => Some(DEFAULT_MIN_COMPRESS_CHARS),
            Switch::MinChars(n) => Some(n.unwrap_or(DEFAULT_MIN_COMPRESS_CHARS)),
        };
        let preserve_reasoning_as_text = config.bool("preserveReasoningAsText")?.unwrap_or(false);
        let compress_reasoning_text = match switch(config, "compressReasoningText")? {
            Switch::Off => ReasoningText::Whole,
            Switch::Missing | Switch::On | Switch::MinChars(None) => ReasoningText::Default,
            Switch::MinChars(Some(n)) => ReasoningText::MaxChars(n),
        };
        Ok(ContextOptions {
            strategy,
            compress_tool_results,
            preserve_reasoning_as_text,
            compress_reasoning_text,
        })
    }

    /// The cap on one reasoning block sent as text, for the chat request.
    pub fn reasoning_text_max_chars(&self) -> Option<usize> {
        match self.compress_reasoning_text {
            ReasoningText::Default => None,
            ReasoningText::Whole => Some(usize::MAX),
            ReasoningText::MaxChars(n) => Some(n as usize),
        }
    }

    /// The settings as OMA's JSON keys, added to what a `beforeRun` hook is shown.
    pub fn write_json(&self, config: &mut Value) {
        if let Some(strategy) = &self.strategy {
            config["contextStrategy"] = strategy.to_json();
        }
        if let Some(min) = self.compress_tool_results {
            config["compressToolResults"] = json!({ "minChars": min });
        }
        if self.preserve_reasoning_as_text {
            config["preserveReasoningAsText"] = json!(true);
        }
        match self.compress_reasoning_text {
            ReasoningText::Default => {}
            ReasoningText::Whole => config["compressReasoningText"] = json!(false),
            ReasoningText::MaxChars(n) => {
                config["compressReasoningText"] = json!({ "minChars": n });
            }
        }
    }

    /// Rewrites the conversation before request number `turn` (1-based): first the consumed
    /// tool results (from the second request on), then the strategy. OMA's order. The
    /// `summarize` strategy needs a model call, which the turn loop makes: it is left alone here
    /// ([`plan_summary`]).
    pub fn apply(&self, messages: &mut Vec<LlmMessage>, turn: u32) {
        if let Some(min) = self.compress_tool_results {
            if turn > 1 {
                compress_consumed_tool_results(messages, min as usize);
            }
        }
        match &self.strategy {
            None | Some(ContextStrategy::Summarize(_) | ContextStrategy::Custom) => {}
            Some(ContextStrategy::SlidingWindow { max_turns }) => {
                sliding_window(messages, *max_turns as usize);
            }
            Some(ContextStrategy::Compact(compact)) => compact_messages(messages, compact),
        }
    }
}

enum Switch {
    Missing,
    Off,
    On,
    MinChars(Option<u32>),
}

/// `true`, `false`, missing, or `{minChars}` (a non-negative integer).
fn switch(config: &mut Object, key: &'static str) -> Result<Switch, ShapeError> {
    match config.take(key) {
        None => Ok(Switch::Missing),
        Some(Value::Bool(false)) => Ok(Switch::Off),
        Some(Value::Bool(true)) => Ok(Switch::On),
        Some(value @ Value::Object(_)) => {
            let mut object = Object::at(value, config.path_of(key))?;
            let min = object.u32("minChars")?;
            let extra: Vec<String> = object.into_map().keys().cloned().collect();
            if let Some(first) = extra.first() {
                return Err(config.invalid(
                    key,
                    &format!("has an unknown field `{first}`, expected `minChars`"),
                ));
            }
            Ok(Switch::MinChars(min))
        }
        Some(_) => Err(config.invalid(key, "must be a boolean or {minChars: number}")),
    }
}

impl ContextStrategy {
    /// Reads OMA's `contextStrategy` object, by its `type`.
    pub fn from_object(mut object: Object) -> Result<Self, ShapeError> {
        let kind = object.required_string("type")?;
        let strategy = match kind.as_str() {
            "sliding-window" => ContextStrategy::SlidingWindow {
                max_turns: required_u32(&mut object, "maxTurns")?,
            },
            "compact" => {
                let d = Compact::with_defaults(required_u64(&mut object, "maxTokens")?);
                ContextStrategy::Compact(Compact {
                    max_tokens: d.max_tokens,
                    preserve_recent_turns: (object.u32("preserveRecentTurns")?)
                        .unwrap_or(d.preserve_recent_turns),
                    min_tool_result_chars: (object.u32("minToolResultChars")?)
                        .unwrap_or(d.min_tool_result_chars),
                    min_text_block_chars: (object.u32("minTextBlockChars")?)
                        .unwrap_or(d.min_text_block_chars),
                    text_block_excerpt_chars: (object.u32("textBlockExcerptChars")?)
                        .unwrap_or(d.text_block_excerpt_chars),
                })
            }
            "summarize" => ContextStrategy::Summarize(Summarize {
                max_tokens: required_u64(&mut object, "maxTokens")?,
                summary_model: object.string("summaryModel")?,
            }),
            "custom" => ContextStrategy::Custom,
            _ => {
                return Err(object.invalid(
                    "type",
                    "must be \"sliding-window\", \"summarize\", \"compact\" or \"custom\"",
                ));
            }
        };
        object.finish()?;
        Ok(strategy)
    }

    /// The strategy as OMA's JSON.
    pub fn to_json(&self) -> Value {
        match self {
            ContextStrategy::SlidingWindow { max_turns } => {
                json!({"type": "sliding-window", "maxTurns": max_turns})
            }
            ContextStrategy::Compact(c) => json!({
                "type": "compact",
                "maxTokens": c.max_tokens,
                "preserveRecentTurns": c.preserve_recent_turns,
                "minToolResultChars": c.min_tool_result_chars,
                "minTextBlockChars": c.min_text_block_chars,
                "textBlockExcerptChars": c.text_block_excerpt_chars,
            }),
            ContextStrategy::Custom => json!({"type": "custom"}),
            ContextStrategy::Summarize(s) => {
                let mut out = json!({"type": "summarize", "maxTokens": s.max_tokens});
                if let Some(model) = &s.summary_model {
                    out["summaryModel"] = json!(model);
                }
                out
            }
        }
    }
}

/// A required non-negative integer; a missing one is reported as missing (the key was taken,
/// so asking for it again gives the missing-field error).
fn required_u32(object: &mut Object, key: &'static str) -> Result<u32, ShapeError> {
    match object.u32(key)? {
        Some(n) => Ok(n),
        None => Err(object
            .required(key)
            .err()
            .unwrap_or_else(|| object.invalid(key, "is missing"))),
    }
}

fn required_u64(object: &mut Object, key: &'static str) -> Result<u64, ShapeError> {
    match object.u64(key)? {
        Some(n) => Ok(n),
        None => Err(object
            .required(key)
            .err()
            .unwrap_or_else(|| object.invalid(key, "is missing"))),
    }
}

fn source_size(source: &MediaSource) -> usize {
    match source {
        MediaSource::Base64 { media_type, data } => units(data) + units(media_type),
        MediaSource::Url { media_type, url } => units(url) + units(media_type),
    }
}

/// OMA's error when the `custom` strategy's function returns anything but a non-empty message
/// list: one place for the turn loop, which checks what a host hands back, and for the hosts
/// that read the function's answer from JSON first.
pub fn custom_compress_not_messages() -> crate::error::Error {
    crate::error::Error::InvalidRequest {
        message: "contextStrategy.custom.compress must return a non-empty LLMMessage[]".to_owned(),
    }
}

/// OMA's `toolResultContentSize`: a text's length; for rich content, the text lengths plus each
/// attachment's source, MIME type, file name and 32.
pub fn tool_result_size(content: &ToolResultContent) -> usize {
    match content {
        ToolResultContent::Text(text) => units(text),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ToolResultPart::Text { text } => units(text),
                ToolResultPart::Image { source } => source_size(source) + 32,
                ToolResultPart::File { filename, source } => {
                    source_size(source) + units(filename) + 32
                }
            })
            .sum(),
    }
}

/// OMA's `estimateTokens`: characters of text, reasoning, tool results and tool inputs (64 per
/// image), and of video as OMA 1.18.0 counts it (see `video_size`), over 4, rounded up.
pub fn estimate_tokens(messages: &[LlmMessage]) -> u64 {
    let chars: usize = messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|block| match block {
            ContentBlock::Text(t) => units(&t.text),
            ContentBlock::Reasoning(r) => units(&r.text),
            ContentBlock::ToolResult(r) => tool_result_size(&r.content),
            ContentBlock::ToolUse(u) => units(&u.input.to_string()),
            ContentBlock::Image(_) => 64,
            ContentBlock::Video(v) => video_size(&v.source),
        })
        .sum();
    (chars as u64).div_ceil(4)
}

/// The characters a video block counts for in [`estimate_tokens`] (OMA 1.18.0 counts video,
/// which OMA 1.16.1 ignored, so that compaction triggers for conversations that carry it):
/// inline (base64) video as OMA counts inline media in a tool result (its data, its MIME type
/// and 32), so a video of megabytes weighs what it costs to send; a video by URL as an image
/// block, a fixed 64, since only the reference is sent (`docs/agent.md#context-management`).
fn video_size(source: &MediaSource) -> usize {
    match source {
        MediaSource::Base64 { .. } => source_size(source) + 32,
        MediaSource::Url { .. } => 64,
    }
}

fn size_description(content: &ToolResultContent, size: usize) -> String {
    match content {
        ToolResultContent::Text(_) => format!("{size} chars"),
        ToolResultContent::Parts(_) => format!("{size} estimated chars"),
    }
}

fn tool_names(messages: &[LlmMessage]) -> std::collections::HashMap<String, String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolUse(u) => Some((u.id.clone(), u.name.clone())),
            _ => None,
        })
        .collect()
}

fn starts_with(content: &ToolResultContent, prefix: &str) -> bool {
    matches!(content, ToolResultContent::Text(t) if t.starts_with(prefix))
}

/// OMA's `compressToolResults`: every tool result in a user turn before the last turn with tool
/// results becomes `[Tool output compressed — N chars, already processed]`, except errors,
/// delegation results, results already compressed, and results under `min_chars`.
pub fn compress_consumed_tool_results(messages: &mut [LlmMessage], min_chars: usize) {
    let last = messages.iter().rposition(|m| {
        m.role == Role::User
            && m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult(_)))
    });
    let Some(last) = last.filter(|&i| i > 0) else {
        return;
    };
    let names = tool_names(messages);
    for message in messages[..last].iter_mut().filter(|m| m.role == Role::User) {
        for block in &mut message.content {
            let ContentBlock::ToolResult(result) = block else {
                continue;
            };
            if result.is_error == Some(true)
                || names.get(&result.tool_use_id).map(String::as_str) == Some(DELEGATE)
                || starts_with(&result.content, "[Tool output compressed")
            {
                continue;
            }
            let size = tool_result_size(&result.content);
            if size < min_chars {
                continue;
            }
            let text = format!(
                "[Tool output compressed — {}, already processed]",
                size_description(&result.content, size)
            );
            result.content = ToolResultContent::Text(text);
        }
    }
}

/// Where a sliding window may cut: a message alone, or an assistant turn with tool calls
/// together with the user turn of their results.
fn turn_lengths(messages: &[LlmMessage]) -> Vec<usize> {
    let mut turns = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let calls = messages[i].role == Role::Assistant
            && messages[i]
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse(_)));
        let answered = calls
            && messages.get(i + 1).is_some_and(|m| {
                m.role == Role::User
                    && m.content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::ToolResult(_)))
            });
        let len = if answered { 2 } else { 1 };
        turns.push(len);
        i += len;
    }
    turns
}

/// OMA's `sliding-window`: keep the first user message and, after it, the fewest whole turns from
/// the end that make at least `2 * max_turns` messages; a notice of how many turns were dropped
/// is put before the first kept user message (or as an assistant preamble when none is kept).
pub fn sliding_window(messages: &mut Vec<LlmMessage>, max_turns: usize) {
    if max_turns == 0 {
        return;
    }
    let first_user = messages.iter().position(|m| m.role == Role::User);
    let after_first = first_user.map_or(0, |i| i + 1);
    let target = max_turns.saturating_mul(2);
    if messages.len() - after_first <= target {
        return;
    }
    let turns = turn_lengths(&messages[after_first..]);
    let mut kept_messages = 0;
    let mut kept_turns = 0;
    for len in turns.iter().rev() {
        kept_messages += len;
        kept_turns += 1;
        if kept_messages >= target {
            break;
        }
    }
    let dropped = turns.len() - kept_turns;
    let keep_from = messages.len() - kept_messages;
    let mut kept: Vec<LlmMessage> = messages.drain(keep_from..).collect();
    messages.truncate(after_first);
    if dropped > 0 {
        let notice =
            format!("[Earlier conversation history truncated — {dropped} turn(s) removed]\n\n");
        prepend_to_first_user(&mut kept, notice);
    }
    messages.extend(kept);
}

/// Puts `prefix` as a text block before the first user message's content; without a user
/// message, an assistant message of the trimmed prefix goes first.
fn prepend_to_first_user(messages: &mut Vec<LlmMessage>, prefix: String) {
    match messages.iter_mut().find(|m| m.role == Role::User) {
        Some(user) => user
            .content
            .insert(0, ContentBlock::Text(TextBlock { text: prefix })),
        None => messages.insert(
            0,
            LlmMessage {
                role: Role::Assistant,
                content: vec![ContentBlock::Text(TextBlock {
                    text: prefix.trim_end().to_owned(),
                })],
            },
        ),
    }
}

/// OMA's `compact`: once the estimate passes `max_tokens`, the turns between the first user
/// message and the last `preserve_recent_turns` assistant/user pairs are compacted: long
/// assistant text becomes an excerpt, assistant images a marker, and long tool results (not
/// errors, not delegation, not already compacted) a marker naming the tool. Tool calls stay.
pub fn compact_messages(messages: &mut [LlmMessage], c: &Compact) {
    if estimate_tokens(messages) <= c.max_tokens {
        return;
    }
    let Some(first_user) = messages.iter().position(|m| m.role == Role::User) else {
        return;
    };
    if first_user == messages.len() - 1 {
        return;
    }
    let mut boundary = messages.len();
    let mut pairs = 0;
    let mut i = messages.len() - 1;
    while i > first_user && pairs < c.preserve_recent_turns {
        if messages[i].role == Role::User && messages[i - 1].role == Role::Assistant {
            pairs += 1;
            boundary = i - 1;
        }
        i -= 1;
    }
    if boundary <= first_user + 1 {
        return;
    }
    let names = tool_names(&messages[first_user + 1..boundary]);
    let excerpt = c.text_block_excerpt_chars as usize;
    for message in &mut messages[first_user + 1..boundary] {
        let assistant = message.role == Role::Assistant;
        for block in &mut message.content {
            match block {
                ContentBlock::Text(t)
                    if assistant && units(&t.text) >= c.min_text_block_chars as usize =>
                {
                    let total = units(&t.text);
                    let head: String = t.text.chars().take(excerpt).collect();
                    t.text = format!("{head}... [truncated — {total} chars total]");
                }
                ContentBlock::Image(_) if assistant => {
                    *block = ContentBlock::Text(TextBlock {
                        text: "[Image compacted]".into(),
                    });
                }
                ContentBlock::ToolResult(result) if !assistant => {
                    compact_result(result, &names, c.min_tool_result_chars as usize);
                }
                _ => {}
            }
        }
    }
}

fn compact_result(
    result: &mut ToolResultBlock,
    names: &std::collections::HashMap<String, String>,
    min: usize,
) {
    if result.is_error == Some(true)
        || starts_with(&result.content, "[Tool output compressed")
        || starts_with(&result.content, "[Tool result:")
    {
        return;
    }
    let size = tool_result_size(&result.content);
    if size < min {
        return;
    }
    let name = names
        .get(&result.tool_use_id)
        .map_or("unknown", String::as_str);
    if name == DELEGATE {
        return;
    }
    let text = format!(
        "[Tool result: {name} — {}, compacted]",
        size_description(&result.content, size)
    );
    result.content = ToolResultContent::Text(text);
}

/// OMA's instruction for a summary request, the first text of its one user message.
pub const SUMMARY_INSTRUCTION: &str = "Summarize the following conversation history for an LLM.\n\
- Preserve user goals, constraints, and decisions.\n\
- Keep key tool outputs and unresolved questions.\n\
- Use concise bullets.\n\
- Do not fabricate details.";

/// A summary a run already has: the old turns it covers (as they were written into the
/// summary request) and the text put before the turns kept. A later pass over the same old
/// turns reuses it instead of asking again (OMA's summary cache).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryCache {
    signature: String,
    prefix: String,
}

/// What a `summarize` pass over the conversation decided.
#[derive(Debug, PartialEq)]
pub enum SummaryPlan {
    /// Under the threshold, or too short to split: the conversation stays.
    Keep,
    /// The cached summary covers the old turns: the conversation to send instead.
    Cached(Vec<LlmMessage>),
    /// A summary request is needed.
    Ask(PendingSummary),
}

/// A summary request and what the conversation becomes once it is answered.
#[derive(Debug, PartialEq)]
pub struct PendingSummary {
    /// The summary request's messages: one user message, the instruction then the old turns.
    pub messages: Vec<LlmMessage>,
    signature: String,
    first_user: LlmMessage,
    recent: Vec<LlmMessage>,
}

impl PendingSummary {
    /// The conversation once the model answered with `text` (its text blocks joined), and the
    /// cache entry for it: the first user message, then the recent turns with
    /// `[Conversation summary]` and the summary (or `[Conversation summary unavailable]` for an
    /// empty answer) as a text block before the first recent user message.
    pub fn finish(self, text: &str) -> (Vec<LlmMessage>, SummaryCache) {
        let text = text.trim_matches(crate::agent::before_run::is_js_whitespace);
        let prefix = if text.is_empty() {
            "[Conversation summary unavailable]".to_owned()
        } else {
            format!("[Conversation summary]\n{text}")
        };
        let mut messages = vec![self.first_user];
        messages.extend(prepend_prefix(self.recent, &prefix));
        (
            messages,
            SummaryCache {
                signature: self.signature,
                prefix,
            },
        )
    }
}

/// OMA's `summarize` strategy, up to the model call: nothing happens while the estimate is at
/// most `max_tokens` or the conversation has fewer than 4 messages. Otherwise the messages after
/// the first user message are split on an even boundary (never between a tool call and its
/// results): the older part, at least two messages and about a quarter of them, is summarized;
/// the first user message and the rest are kept as they are (messages before the first user
/// message are dropped, as OMA drops them). Media in the older part is written into the summary
/// request as placeholders, never as bytes: an image as `[image: <type>]`, a video as
/// `[video: <type>]`, a tool result's image or file as `[image: <type>; inline data]` or
/// `[file: <name>; <type>; URL reference]`.
pub fn plan_summary(
    messages: &[LlmMessage],
    max_tokens: u64,
    cache: Option<&SummaryCache>,
) -> SummaryPlan {
    if estimate_tokens(messages) <= max_tokens || messages.len() < 4 {
        return SummaryPlan::Keep;
    }
    let Some(first) = messages.iter().position(|m| m.role == Role::User) else {
        return SummaryPlan::Keep;
    };
    if first == messages.len() - 1 {
        return SummaryPlan::Keep;
    }
    let rest = &messages[first + 1..];
    if rest.len() < 2 {
        return SummaryPlan::Keep;
    }
    let split = (rest.len() / 4 * 2).max(2);
    let (old, recent) = rest.split_at(split);
    let signature = old
        .iter()
        .map(|m| {
            let stripped = strip_media_for_summary(m);
            let one = crate::json::messages_to_json(std::slice::from_ref(&stripped));
            // `[<message>]`: the message's own JSON, as OMA's `JSON.stringify(message)`.
            one[1..one.len() - 1].to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(cache) = cache.filter(|c| c.signature == signature) {
        let mut kept = vec![messages[first].clone()];
        kept.extend(prepend_prefix(recent.to_vec(), &cache.prefix));
        return SummaryPlan::Cached(kept);
    }
    let request = LlmMessage {
        role: Role::User,
        content: vec![
            ContentBlock::Text(TextBlock {
                text: SUMMARY_INSTRUCTION.to_owned(),
            }),
            ContentBlock::Text(TextBlock {
                text: format!("\n\nConversation:\n{signature}"),
            }),
        ],
    };
    SummaryPlan::Ask(PendingSummary {
        messages: vec![request],
        signature,
        first_user: messages[first].clone(),
        recent: recent.to_vec(),
    })
}

/// A message as it is written into a summary request: image and video blocks become text
/// placeholders, and a tool result's images and files become text parts.
fn strip_media_for_summary(message: &LlmMessage) -> LlmMessage {
    let content = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Image(image) => ContentBlock::Text(TextBlock {
                text: format!("[image: {}]", image.source.media_type()),
            }),
            ContentBlock::Video(video) => ContentBlock::Text(TextBlock {
                text: format!("[video: {}]", video.source.media_type()),
            }),
            ContentBlock::ToolResult(result) => match &result.content {
                ToolResultContent::Parts(parts)
                    if parts
                        .iter()
                        .any(|p| !matches!(p, ToolResultPart::Text { .. })) =>
                {
                    ContentBlock::ToolResult(ToolResultBlock {
                        tool_use_id: result.tool_use_id.clone(),
                        content: ToolResultContent::Parts(
                            parts
                                .iter()
                                .map(|part| ToolResultPart::Text {
                                    text: part.summary(),
                                })
                                .collect(),
                        ),
                        is_error: result.is_error,
                    })
                }
                _ => block.clone(),
            },
            other => other.clone(),
        })
        .collect();
    LlmMessage {
        role: message.role,
        content,
    }
}

/// OMA's `prependSyntheticPrefixToFirstUser`: `prefix` and a blank line as a text block before
/// the first user message's content; with no user message, an assistant message holding the
/// prefix comes first.
fn prepend_prefix(mut messages: Vec<LlmMessage>, prefix: &str) -> Vec<LlmMessage> {
    match messages.iter_mut().find(|m| m.role == Role::User) {
        Some(user) => user.content.insert(
            0,
            ContentBlock::Text(TextBlock {
                text: format!("{prefix}\n\n"),
            }),
        ),
        None => messages.insert(
            0,
            LlmMessage {
                role: Role::Assistant,
                content: vec![ContentBlock::Text(TextBlock {
                    text: prefix.to_owned(),
                })],
            },
        ),
    }
    messages
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::adapter::ChatRequest;
    use crate::agent::turn::{Action, TurnLoop, TurnOptions};
    use crate::message::{ImageBlock, LlmResponse, MediaSource, TokenUsage, ToolUseBlock};

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text(TextBlock { text: t.into() })
    }

    fn assistant(content: Vec<ContentBlock>) -> LlmMessage {
        LlmMessage {
            role: Role::Assistant,
            content,
        }
    }

    fn call(id: &str, name: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolUseBlock {
            id: id.into(),
            name: name.into(),
            input: json!({}),
            signature: None,
        })
    }

    fn result(id: &str, output: &str, is_error: bool) -> LlmMessage {
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: id.into(),
                content: ToolResultContent::Text(output.into()),
                is_error: is_error.then_some(true),
            })],
        }
    }

    fn result_text(message: &LlmMessage) -> &str {
        match &message.content[0] {
            ContentBlock::ToolResult(ToolResultBlock {
                content: ToolResultContent::Text(t),
                ..
            }) => t,
            other => panic!("not a text result: {other:?}"),
        }
    }

    fn read(value: serde_json::Value) -> Result<ContextOptions, ShapeError> {
        let mut object = Object::strict(value).expect("object");
        let options = ContextOptions::from_config(&mut object)?;
        object.finish()?;
        Ok(options)
    }

    #[test]
    fn options_read_omas_names_and_refuse_bad_values() {
        assert_eq!(read(json!({})).expect("empty"), ContextOptions::default());
        let options = read(json!({
            "contextStrategy": {"type": "sliding-window", "maxTurns": 3},
            "compressToolResults": true,
            "preserveReasoningAsText": true,
            "compressReasoningText": {"minChars": 40},
        }))
        .expect("valid");
        assert_eq!(
            options.strategy,
            Some(ContextStrategy::SlidingWindow { max_turns: 3 })
        );
        assert_eq!(options.compress_tool_results, Some(500));
        assert_eq!(options.reasoning_text_max_chars(), Some(40));
        let options = read(json!({"compressToolResults": {"minChars": 9},
                                  "compressReasoningText": false}))
        .expect("valid");
        assert_eq!(options.compress_tool_results, Some(9));
        assert_eq!(options.reasoning_text_max_chars(), Some(usize::MAX));
        let compact =
            read(json!({"contextStrategy": {"type": "compact", "maxTokens": 10}})).expect("valid");
        assert_eq!(
            compact.strategy,
            Some(ContextStrategy::Compact(Compact {
                max_tokens: 10,
                preserve_recent_turns: 4,
                min_tool_result_chars: 200,
                min_text_block_chars: 2000,
                text_block_excerpt_chars: 200,
            }))
        );
        for (value, message) in [
            (
                json!({"contextStrategy": {"type": "sliding-window"}}),
                "missing field `contextStrategy.maxTurns`",
            ),
            (
                json!({"contextStrategy": {"type": "compact"}}),
                "missing field `contextStrategy.maxTokens`",
            ),
            (
                json!({"contextStrategy": {"type": "summarize"}}),
                "missing field `contextStrategy.maxTokens`",
            ),
            (
                json!({"contextStrategy": {"type": "summarize", "maxTokens": 5, "summaryModel": 1}}),
                "`contextStrategy.summaryModel` must be",
            ),
            (
                json!({"contextStrategy": {"type": "summarize", "maxTokens": 5, "model": "m"}}),
                "unknown field `contextStrategy.model`",
            ),
            (
                json!({"contextStrategy": {"type": "sliding-window", "maxTurns": "3"}}),
                "`contextStrategy.maxTurns` must be",
            ),
            (
                json!({"contextStrategy": {"maxTurns": 3}}),
                "missing field `contextStrategy.type`",
            ),
            (
                json!({"contextStrategy": {"type": "window"}}),
                "`contextStrategy.type` must be",
            ),
            (
                json!({"contextStrategy": 3}),
                "`contextStrategy` must be an object",
            ),
            (
                json!({"compressToolResults": "yes"}),
                "`compressToolResults` must be a boolean or {minChars: number}",
            ),
            (
                json!({"compressToolResults": {"minChars": -1}}),
                "`compressToolResults.minChars` must be",
            ),
            (
                json!({"compressReasoningText": {"max": 1}}),
                "`compressReasoningText` has an unknown field `max`",
            ),
            (
                json!({"preserveReasoningAsText": 1}),
                "`preserveReasoningAsText` must be a boolean",
            ),
        ] {
            let error = read(value.clone()).expect_err("invalid");
            assert!(error.to_string().starts_with(message), "{value}: {error}");
        }
    }

    #[test]
    fn summarize_reads_its_settings_and_plans_omas_split() {
        let options = read(
            json!({"contextStrategy": {"type": "summarize", "maxTokens": 7,
                                                     "summaryModel": "mini"}}),
        )
        .expect("valid");
        let Some(ContextStrategy::Summarize(summarize)) = &options.strategy else {
            panic!("{options:?}");
        };
        assert_eq!(summarize.max_tokens, 7);
        assert_eq!(summarize.summary_model.as_deref(), Some("mini"));
        assert_eq!(
            options.strategy.as_ref().map(ContextStrategy::to_json),
            Some(json!({"type": "summarize", "maxTokens": 7, "summaryModel": "mini"}))
        );

        let user = |t: &str| LlmMessage::user_text(t);
        let long = "y".repeat(80);
        // Under the threshold, or fewer than four messages: nothing to do.
        let short = vec![user(&long), assistant(vec![text(&long)]), user(&long)];
        assert_eq!(plan_summary(&short, 1, None), SummaryPlan::Keep);
        let mut conversation = vec![
            assistant(vec![text("before the first user message")]),
            user("goal"),
            assistant(vec![call("c1", "shot")]),
            LlmMessage {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id: "c1".into(),
                    content: ToolResultContent::Parts(vec![
                        ToolResultPart::Text {
                            text: "here".into(),
                        },
                        ToolResultPart::Image {
                            source: MediaSource::Base64 {
                                media_type: "image/png".into(),
                                data: "iVBORw0KGgo=".into(),
                            },
                        },
                    ]),
                    is_error: Some(false),
                })],
            },
            assistant(vec![text(&long)]),
            user("latest"),
        ];
        assert_eq!(plan_summary(&conversation, 10_000, None), SummaryPlan::Keep);
        let SummaryPlan::Ask(pending) = plan_summary(&conversation, 10, None) else {
            panic!("expected a summary request");
        };
        // Four messages after the first user message: two old, two recent.
        let prompt = crate::json::messages_to_value(&pending.messages);
        assert_eq!(prompt[0]["content"][0]["text"], SUMMARY_INSTRUCTION);
        assert_eq!(
            prompt[0]["content"][1]["text"],
            "\n\nConversation:\n\
             {\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"shot\",\"input\":{}}]}\n\
             {\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"here\"},{\"type\":\"text\",\"text\":\"[image: image/png; inline data]\"}],\"is_error\":false}]}"
        );
        let (after, cache) = pending.finish("\u{feff} a summary \n");
        let after = crate::json::messages_to_value(&after);
        assert_eq!(
            after,
            json!([
                {"role": "user", "content": [{"type": "text", "text": "goal"}]},
                {"role": "assistant", "content": [{"type": "text", "text": long}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "[Conversation summary]\na summary\n\n"},
                    {"type": "text", "text": "latest"}
                ]}
            ])
        );
        // The same old turns again: the cached summary, no request.
        let SummaryPlan::Cached(again) = plan_summary(&conversation, 10, Some(&cache)) else {
            panic!("expected the cached summary");
        };
        assert_eq!(crate::json::messages_to_value(&again), after);
        // No user message among the recent turns: the summary comes first, as an assistant turn.
        conversation.pop();
        conversation.push(assistant(vec![text("last")]));
        let SummaryPlan::Ask(pending) = plan_summary(&conversation, 10, None) else {
            panic!("no cache, a request");
        };
        let (after, _) = pending.finish("");
        assert_eq!(
            crate::json::messages_to_value(&after)[1],
            json!({"role": "assistant", "content": [{"type": "text", "text": "[Conversation summary unavailable]"}]})
        );
    }

    #[test]
    fn consumed_tool_results_are_compressed_except_errors_delegation_and_the_newest() {
        let long = "x".repeat(600);
        let mut messages = vec![
            LlmMessage::user_text("go"),
            assistant(vec![call("a", "read"), call("d", DELEGATE)]),
            LlmMessage {
                role: Role::User,
                content: vec![result("a", &long, false).content[0].clone(), {
                    result("d", &long, false).content[0].clone()
                }],
            },
            assistant(vec![call("e", "read")]),
            result("e", &long, true),
            assistant(vec![call("s", "read")]),
            result("s", "short", false),
            assistant(vec![call("n", "read")]),
            result("n", &long, false),
        ];
        compress_consumed_tool_results(&mut messages, 500);
        let ContentBlock::ToolResult(first) = &messages[2].content[0] else {
            panic!("a result");
        };
        assert_eq!(
            first.content,
            ToolResultContent::Text(
                "[Tool output compressed — 600 chars, already processed]".into()
            )
        );
        let ContentBlock::ToolResult(delegated) = &messages[2].content[1] else {
            panic!("a result");
        };
        assert_eq!(delegated.content, ToolResultContent::Text(long.clone()));
        assert_eq!(result_text(&messages[4]), long, "errors stay");
        assert_eq!(result_text(&messages[6]), "short");
        assert_eq!(result_text(&messages[8]), long, "the newest stays");
    }

    #[test]
    fn a_sliding_window_keeps_the_first_user_turn_and_whole_tool_turns() {
        let mut messages = vec![LlmMessage::user_text("task")];
        for i in 0..4 {
            let id = format!("c{i}");
            messages.push(assistant(vec![call(&id, "t")]));
            messages.push(result(&id, "ok", false));
        }
        let all = messages.clone();
        sliding_window(&mut messages, 1);
        // The first user turn, then the last tool turn, the notice before its results.
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0], all[0]);
        assert_eq!(messages[1], all[7]);
        assert_eq!(
            messages[2].content[0],
            text("[Earlier conversation history truncated — 3 turn(s) removed]\n\n")
        );
        assert_eq!(messages[2].content[1], all[8].content[0]);
        // Short enough, or a window of 0: unchanged.
        let mut short = all.clone();
        sliding_window(&mut short, 4);
        assert_eq!(short, all);
        sliding_window(&mut short, 0);
        assert_eq!(short, all);
        // A boundary inside a tool turn keeps the whole turn (one message more).
        let mut odd = vec![LlmMessage::user_text("task"), assistant(vec![text("a")])];
        odd.extend(all[1..].iter().cloned());
        sliding_window(&mut odd, 1);
        assert_eq!(odd.len(), 3);
        // Without a kept user turn, the notice is an assistant preamble.
        let mut texts = vec![
            LlmMessage::user_text("task"),
            assistant(vec![text("1")]),
            assistant(vec![text("2")]),
            assistant(vec![text("3")]),
        ];
        sliding_window(&mut texts, 1);
        assert_eq!(texts.len(), 4);
        assert_eq!(
            texts[1],
            assistant(vec![text(
                "[Earlier conversation history truncated — 1 turn(s) removed]"
            )])
        );
    }

    /// OMA 1.18.0 counts video: inline video by its data, MIME type and 32 (as inline media in a
    /// tool result), a video by URL as an image (64), so compaction sees a video conversation.
    #[test]
    fn video_counts_in_the_estimate() {
        let video = |source: MediaSource| LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::Video(crate::message::VideoBlock { source })],
        };
        let inline = video(MediaSource::Base64 {
            media_type: "video/mp4".into(),
            data: "A".repeat(4000),
        });
        // (4000 + 9 + 32) / 4, rounded up.
        assert_eq!(estimate_tokens(std::slice::from_ref(&inline)), 1011);
        let linked = video(MediaSource::Url {
            media_type: "video/mp4".into(),
            url: "https://example.com/a-long-name-that-does-not-count.mp4".into(),
        });
        assert_eq!(estimate_tokens(&[linked]), 16, "as an image block");
        let image = LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::Image(ImageBlock {
                source: MediaSource::Url {
                    media_type: "image/png".into(),
                    url: "https://example.com/a.png".into(),
                },
            })],
        };
        assert_eq!(estimate_tokens(&[image]), 16);
        // Past a compact strategy's limit because of the video alone.
        let messages = vec![
            inline,
            assistant(vec![text("seen")]),
            LlmMessage::user_text("and?"),
        ];
        assert!(estimate_tokens(&messages) > 1000);
    }

    #[test]
    fn compaction_shortens_old_turns_once_over_the_estimate() {
        let long_text = "t".repeat(2500);
        let long_result = "r".repeat(300);
        let image = ContentBlock::Image(ImageBlock {
            source: MediaSource::Base64 {
                media_type: "image/png".into(),
                data: "AAAA".into(),
            },
        });
        let mut messages = vec![
            LlmMessage::user_text("task"),
            assistant(vec![text(&long_text), image, call("a", "grep")]),
            result("a", &long_result, false),
            assistant(vec![call("b", "grep")]),
            result("b", &long_result, true),
            assistant(vec![call("c", "grep")]),
            result("c", &long_result, false),
        ];
        let all = messages.clone();
        let settings = Compact {
            max_tokens: 100,
            preserve_recent_turns: 1,
            min_tool_result_chars: 200,
            min_text_block_chars: 2000,
            text_block_excerpt_chars: 5,
        };
        compact_messages(&mut messages, &settings);
        assert_eq!(
            messages[1].content[0],
            text("ttttt... [truncated — 2500 chars total]")
        );
        assert_eq!(messages[1].content[1], text("[Image compacted]"));
        assert_eq!(messages[1].content[2], all[1].content[2], "calls stay");
        assert_eq!(
            result_text(&messages[2]),
            "[Tool result: grep — 300 chars, compacted]"
        );
        assert_eq!(messages[4], all[4], "errors stay");
        assert_eq!(messages[5..], all[5..], "the recent pair stays");
        // Under the estimate, nothing changes.
        let mut under = all.clone();
        compact_messages(
            &mut under,
            &Compact {
                max_tokens: 10_000,
                ..settings
            },
        );
        assert_eq!(under, all);
    }

    /// Through the turn loop: what is sent shrinks, what the run returns does not.
    #[test]
    fn the_turn_loop_sends_the_reduced_conversation_and_returns_the_whole_one() {
        let options = TurnOptions {
            context: ContextOptions {
                strategy: Some(ContextStrategy::SlidingWindow { max_turns: 1 }),
                compress_tool_results: Some(3),
                ..ContextOptions::default()
            },
            ..TurnOptions::default()
        };
        let mut turn = TurnLoop::new(
            vec![LlmMessage::user_text("go")],
            ChatRequest::default(),
            options,
        );
        let mut sent = Vec::new();
        for i in 0..3 {
            while let Some(action) = turn.poll() {
                match action {
                    Action::SendRequest => sent.push(turn.request().messages.clone()),
                    Action::CallTool(call) => turn
                        .handle_tool_result(
                            &call.id,
                            ToolResultContent::Text("long output".into()),
                            false,
                        )
                        .expect("due"),
                    _ => {}
                }
            }
            let content = if i < 2 {
                vec![call(&format!("c{i}"), "t")]
            } else {
                vec![text("done")]
            };
            turn.handle_response(LlmResponse {
                id: "r".into(),
                content,
                model: "m".into(),
                stop_reason: "end_turn".into(),
                usage: TokenUsage::default(),
                stop_sequence: None,
            })
            .expect("due");
        }
        let Some(Action::Done(outcome)) = std::iter::from_fn(|| turn.poll()).last() else {
            panic!("done");
        };
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[1].len(), 3, "one tool turn fits the window");
        assert_eq!(result_text(&sent[1][2]), "long output");
        // The third request: the first turn dropped (with a notice); the kept results are the
        // newest, so not compressed.
        assert_eq!(sent[2].len(), 3, "{:?}", sent[2]);
        assert_eq!(
            sent[2][2].content[0],
            text("[Earlier conversation history truncated — 1 turn(s) removed]\n\n")
        );
        assert_eq!(outcome.messages.len(), 5);
        assert_eq!(result_text(&outcome.messages[1]), "long output");
    }

    /// `preserveReasoningAsText` and `compressReasoningText` from an OMA configuration reach
    /// every wire format: a foreign reasoning block becomes `<thinking>` text cut to the cap.
    #[test]
    fn reasoning_options_reach_the_wire_formats() {
        use crate::agent::config::AgentSettings;
        let reasoning = ContentBlock::Reasoning(crate::message::ReasoningBlock {
            text: "r".repeat(100),
            signature: None,
            redacted_data: None,
            provenance: Some("elsewhere".into()),
        });
        let body_of = |provider: &str, extra: &str| {
            let settings = AgentSettings::from_json(&format!(
                r#"{{"model": "m", "provider": "{provider}", "apiKey": "k",
                     "baseURL": "http://127.0.0.1:9"{extra}}}"#
            ))
            .expect("valid");
            let (spec, _) = settings.into_spec().expect("spec");
            let mut request = spec.template;
            request.messages = vec![
                LlmMessage::user_text("q"),
                assistant(vec![reasoning.clone(), text("a")]),
                LlmMessage::user_text("q2"),
            ];
            let adapter = crate::adapter::for_provider(
                provider,
                Some("http://127.0.0.1:9"),
                crate::adapter::IdSource::default(),
            )
            .expect("adapter");
            adapter
                .format(&request, &spec.endpoint)
                .expect("formats")
                .body
        };
        let cut = format!(
            "<thinking>{}...[truncated]...{}</thinking>",
            "r".repeat(10),
            "r".repeat(3)
        );
        for provider in ["openai", "anthropic", "gemini"] {
            let dropped = body_of(provider, "");
            assert!(!dropped.contains("<thinking>"), "{provider}: {dropped}");
            let whole = body_of(provider, r#", "preserveReasoningAsText": true"#);
            assert!(
                whole.contains(&format!("<thinking>{}</thinking>", "r".repeat(100))),
                "{provider}: {whole}"
            );
            let capped = body_of(
                provider,
                r#", "preserveReasoningAsText": true, "compressReasoningText": {"minChars": 30}"#,
            );
            assert!(capped.contains(&cut), "{provider}: {capped}");
        }
    }
}
