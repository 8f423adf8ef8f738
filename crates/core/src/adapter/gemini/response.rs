//! Reading Gemini's answers: a `GenerateContentResponse` body, and the SSE stream of them that
//! `streamGenerateContent?alt=sse` sends.

use serde_json::{Map, Value};

use super::{IdGen, NAME};
use crate::adapter::sse::SseParser;
use crate::adapter::{malformed, StreamDecoder, StreamEvent};
use crate::error::Error;
use crate::json::object::{Object, ShapeError};
use crate::message::{
    ContentBlock, LlmResponse, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock,
};

/// The fields of a `GenerateContentResponse` (or one streamed chunk) that OMA reads.
struct Response {
    /// The first candidate (OMA reads no other).
    candidate: Option<Candidate>,
    usage: Option<Usage>,
    /// `promptFeedback.blockReason` is set: the prompt was refused.
    blocked: bool,
    /// Set on an error sent inside a stream.
    error: Option<ErrorBody>,
}

struct Candidate {
    parts: Vec<Part>,
    finish_reason: Option<String>,
}

struct Part {
    text: Option<String>,
    thought: Option<bool>,
    thought_signature: Option<String>,
    function_call: Option<FunctionCall>,
}

struct FunctionCall {
    id: Option<String>,
    name: Option<String>,
    args: Option<Value>,
    /// Pieces of the arguments, each addressed by a JSON path (streamed function-call
    /// arguments, `docs/wire-formats.md#gemini`).
    partial_args: Vec<PartialArg>,
    /// More parts of this same call follow.
    will_continue: bool,
}

/// One piece of a streamed call's arguments: the value at `json_path`, or, for a string whose
/// piece has `will_continue`, the start of it (the next piece for the same path goes on).
struct PartialArg {
    json_path: String,
    value: Value,
    will_continue: bool,
}

struct Usage {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    /// The prompt tokens read from the context cache, a part of `promptTokenCount`.
    cached_content_token_count: Option<u64>,
}

struct ErrorBody {
    code: Option<u16>,
    message: Option<String>,
    /// `google.rpc.Status.status`, e.g. `RESOURCE_EXHAUSTED`: the error's code.
    status: Option<String>,
}

impl Response {
    /// Reads a response or chunk; every candidate is checked, the first is kept.
    fn read(value: Value) -> Result<Self, ShapeError> {
        let mut o = Object::new(value)?;
        let mut candidate = None;
        for c in o.objects("candidates")? {
            let c = Candidate::read(c)?;
            candidate.get_or_insert(c);
        }
        let usage = match o.object("usageMetadata")? {
            Some(mut u) => Some(Usage {
                prompt_token_count: u.u64("promptTokenCount")?,
                candidates_token_count: u.u64("candidatesTokenCount")?,
                cached_content_token_count: u.u64("cachedContentTokenCount")?,
            }),
            None => None,
        };
        let blocked = match o.object("promptFeedback")? {
            Some(mut f) => f.string("blockReason")?.is_some(),
            None => false,
        };
        let error = match o.object("error")? {
            Some(mut e) => Some(ErrorBody {
                code: match e.u32("code")? {
                    None => None,
                    Some(code) => Some(
                        u16::try_from(code)
                            .map_err(|_| e.invalid("code", "must be an HTTP status"))?,
                    ),
                },
                message: e.string("message")?,
                status: e.string("status")?,
            }),
            None => None,
        };
        Ok(Response {
            candidate,
            usage,
            blocked,
            error,
        })
    }
}

impl Candidate {
    fn read(mut c: Object) -> Result<Self, ShapeError> {
        let parts = match c.object("content")? {
            Some(mut content) => content
                .objects("parts")?
                .into_iter()
                .map(Part::read)
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Candidate {
            parts,
            finish_reason: c.string("finishReason")?,
        })
    }
}

impl Part {
    fn read(mut p: Object) -> Result<Self, ShapeError> {
        let function_call = match p.object("functionCall")? {
            Some(mut f) => Some(FunctionCall {
                id: f.string("id")?,
                name: f.string("name")?,
                args: f.take("args"),
                partial_args: f
                    .objects("partialArgs")?
                    .into_iter()
                    .map(PartialArg::read)
                    .collect::<Result<_, _>>()?,
                will_continue: f.bool("willContinue")?.unwrap_or(false),
            }),
            None => None,
        };
        Ok(Part {
            text: p.string("text")?,
            thought: p.bool("thought")?,
            thought_signature: p.string("thoughtSignature")?,
            function_call,
        })
    }
}

impl PartialArg {
    fn read(mut a: Object) -> Result<Self, ShapeError> {
        let json_path = a.required_string("jsonPath")?;
        let value = if let Some(text) = a.string("stringValue")? {
            Value::String(text)
        } else if let Some(number) = a.take("numberValue") {
            if !number.is_number() {
                return Err(a.invalid("numberValue", "must be a number"));
            }
            number
        } else if let Some(flag) = a.bool("boolValue")? {
            Value::Bool(flag)
        } else {
            // `nullValue`, or no value at all.
            Value::Null
        };
        Ok(PartialArg {
            json_path,
            value,
            will_continue: a.bool("willContinue")?.unwrap_or(false),
        })
    }
}

/// A response or chunk from its JSON text; a body of another shape is malformed.
fn read_response(json: &[u8]) -> Result<Response, Error> {
    crate::json::from_bytes(json)
        .map_err(|e| malformed(NAME, e))
        .and_then(|value| Response::read(value).map_err(|e| malformed(NAME, e)))
}

/// Reads a `generateContent` body.
pub(super) fn parse(model: &str, body: &[u8], mut ids: IdGen) -> Result<LlmResponse, Error> {
    let id = ids.next_id();
    let response = read_response(body)?;
    let (parts, finish_reason) = match response.candidate {
        Some(c) => (c.parts, c.finish_reason),
        None => (Vec::new(), None),
    };
    let content: Vec<ContentBlock> = parts
        .into_iter()
        .filter_map(|part| to_block(part, &mut ids))
        .collect();
    let usage = response
        .usage
        .map_or(TokenUsage::default(), |u| TokenUsage {
            cached_input_tokens: u.cached_content_token_count.unwrap_or(0),
            ..TokenUsage::new(
                u.prompt_token_count.unwrap_or(0),
                u.candidates_token_count.unwrap_or(0),
            )
        });
    Ok(LlmResponse {
        id,
        stop_reason: stop_reason(finish_reason.as_deref(), &content),
        content,
        model: model.to_owned(),
        usage,
        stop_sequence: None,
    })
}

/// One part as an OMA block: a call, a thought, a text; `None` for anything else.
fn to_block(part: Part, ids: &mut IdGen) -> Option<ContentBlock> {
    if let Some(call) = part.function_call {
        return Some(ContentBlock::ToolUse(ToolUseBlock {
            id: call.id.unwrap_or_else(|| ids.next_id()),
            name: call.name.unwrap_or_default(),
            input: match call.args {
                None | Some(Value::Null) => Value::Object(Default::default()),
                Some(args) => args,
            },
            signature: part.thought_signature,
        }));
    }
    let text = part.text.filter(|t| !t.is_empty())?;
    Some(if part.thought == Some(true) {
        ContentBlock::Reasoning(ReasoningBlock {
            text,
            signature: part.thought_signature,
            redacted_data: None,
            provenance: Some(NAME.into()),
        })
    } else {
        ContentBlock::Text(TextBlock { text })
    })
}

/// `MAX_TOKENS` → `max_tokens`; else `tool_use` when the model called a tool; else `end_turn`.
fn stop_reason(finish_reason: Option<&str>, content: &[ContentBlock]) -> String {
    if finish_reason == Some("MAX_TOKENS") {
        "max_tokens"
    } else if content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse(_)))
    {
        "tool_use"
    } else {
        "end_turn"
    }
    .into()
}

/// A streamed function call whose arguments are still arriving in pieces.
struct OpenCall {
    id: Option<String>,
    name: Option<String>,
    /// The arguments assembled so far: always an object.
    args: Value,
    signature: Option<String>,
    /// The JSON path of a string whose last piece said more of it follows.
    continuing: Option<String>,
}

impl OpenCall {
    /// The call as one whole `functionCall` part.
    fn into_part(self) -> Part {
        Part {
            text: None,
            thought: None,
            thought_signature: self.signature,
            function_call: Some(FunctionCall {
                id: self.id,
                name: self.name,
                args: Some(self.args),
                partial_args: Vec::new(),
                will_continue: false,
            }),
        }
    }
}

/// One step of a JSON path: a member name or an array index.
#[derive(Debug, PartialEq)]
enum PathStep {
    Key(String),
    Index(usize),
}

/// The largest array index a path may name: a piece cannot make the decoder allocate more.
const MAX_PATH_INDEX: usize = 4096;

/// The most steps a path may have.
const MAX_PATH_DEPTH: usize = 64;

/// A JSON path (RFC 9535) of the singular form Google uses for `partialArgs`: `$`, then
/// `.name`, `['name']` or `["name"]`, and `[index]` steps (`$.recipe.ingredients[0].name`).
/// `None` for anything else (wildcards, filters, slices, negative indices).
fn parse_json_path(path: &str) -> Option<Vec<PathStep>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if steps.len() == MAX_PATH_DEPTH {
            return None;
        }
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() || name == "*" {
                return None;
            }
            steps.push(PathStep::Key(name.to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let quote = after.chars().next()?;
            if quote == '\'' || quote == '"' {
                // A quoted name; `\` escapes the next character.
                let mut name = String::new();
                let mut chars = after[1..].char_indices();
                let close = loop {
                    let (at, c) = chars.next()?;
                    match c {
                        '\\' => name.push(chars.next()?.1),
                        c if c == quote => break at + 1,
                        c => name.push(c),
                    }
                };
                rest = after[1 + close..].strip_prefix(']')?;
                steps.push(PathStep::Key(name));
            } else {
                let end = after.find(']')?;
                let digits = &after[..end];
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let index: usize = digits.parse().ok()?;
                if index > MAX_PATH_INDEX {
                    return None;
                }
                steps.push(PathStep::Index(index));
                rest = &after[end + 1..];
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Puts `value` at `path` in `root`, making the objects and arrays on the way (an array is
/// padded with `null` up to the index). With `append`, a string value goes on the end of the
/// string already there. A path through a value of another kind (a member of a string) is a
/// malformed stream; the root path `$` itself names the arguments object and takes an object.
fn set_at(root: &mut Value, path: &[PathStep], value: Value, append: bool) -> Result<(), Error> {
    let clash = || {
        malformed(
            NAME,
            "partialArgs paths disagree about the arguments' shape",
        )
    };
    let mut slot = root;
    for step in path {
        slot = match step {
            PathStep::Key(key) => {
                if slot.is_null() {
                    *slot = Value::Object(Map::new());
                }
                slot.as_object_mut()
                    .ok_or_else(clash)?
                    .entry(key.clone())
                    .or_insert(Value::Null)
            }
            PathStep::Index(index) => {
                if slot.is_null() {
                    *slot = Value::Array(Vec::new());
                }
                let array = slot.as_array_mut().ok_or_else(clash)?;
                if array.len() <= *index {
                    array.resize(index + 1, Value::Null);
                }
                &mut array[*index]
            }
        };
    }
    match (slot, value) {
        (Value::String(existing), Value::String(more)) if append => existing.push_str(&more),
        (slot, value) => {
            if path.is_empty() && !value.is_object() {
                return Err(clash());
            }
            *slot = value;
        }
    }
    Ok(())
}

/// The decoder of a `streamGenerateContent?alt=sse` body: every chunk's parts become events at
/// once and are appended as blocks of their own; usage and the finish reason are the last seen.
/// A stream that ends before any chunk carried a `finishReason` (or, for a refused prompt, a
/// `promptFeedback.blockReason`) was cut short: an error.
pub(super) struct GeminiStream {
    sse: SseParser,
    ids: IdGen,
    id: String,
    model: String,
    content: Vec<ContentBlock>,
    usage: TokenUsage,
    finish_reason: Option<String>,
    /// A `finishReason` or a `blockReason` arrived: the answer is complete.
    complete: bool,
    failed: Option<Error>,
    /// A function call whose argument pieces are still arriving.
    open_call: Option<OpenCall>,
}

impl GeminiStream {
    pub(super) fn new(model: &str, mut ids: IdGen) -> Self {
        GeminiStream {
            id: ids.next_id(),
            sse: SseParser::new(),
            ids,
            model: model.to_owned(),
            content: Vec::new(),
            usage: TokenUsage::default(),
            finish_reason: None,
            complete: false,
            failed: None,
            open_call: None,
        }
    }

    fn chunk(&mut self, data: &str, events: &mut Vec<StreamEvent>) -> Result<(), Error> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let chunk = read_response(data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(Error::Provider {
                provider: NAME.into(),
                status: error.code,
                message: error
                    .message
                    .unwrap_or_else(|| "gemini stream reported an error".into()),
                code: error
                    .status
                    .or_else(|| error.code.map(|code| code.to_string())),
                error_type: None,
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage.input_tokens = usage.prompt_token_count.unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = usage
                .candidates_token_count
                .unwrap_or(self.usage.output_tokens);
            self.usage.cached_input_tokens = usage
                .cached_content_token_count
                .unwrap_or(self.usage.cached_input_tokens);
        }
        if chunk.blocked {
            self.complete = true;
        }
        let Some(candidate) = chunk.candidate else {
            return Ok(());
        };
        if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
            self.finish_reason = Some(reason);
            self.complete = true;
        }
        for part in candidate.parts {
            let part = match self.assemble(part, events)? {
                Some(part) => part,
                None => continue,
            };
            let Some(block) = to_block(part, &mut self.ids) else {
                continue;
            };
            self.push(block, events);
        }
        if self.complete {
            // The turn is over: a call still waiting for its last piece ends with what came.
            if let Some(open) = self.open_call.take() {
                let block = to_block(open.into_part(), &mut self.ids);
                if let Some(block) = block {
                    self.push(block, events);
                }
            }
        }
        Ok(())
    }

    /// Appends a block and its events: a thought's text, then its signature when it has one
    /// (which ends the thought, as each thought part is a block of its own).
    fn push(&mut self, block: ContentBlock, events: &mut Vec<StreamEvent>) {
        match &block {
            ContentBlock::Text(t) => events.push(StreamEvent::Text(t.text.clone())),
            ContentBlock::Reasoning(r) => {
                events.push(StreamEvent::Reasoning(r.text.clone()));
                if let Some(signature) = &r.signature {
                    events.push(StreamEvent::ReasoningSignature(signature.clone()));
                }
            }
            ContentBlock::ToolUse(call) => events.push(StreamEvent::ToolUse(call.clone())),
            _ => return,
        }
        self.content.push(block);
    }

    /// Streamed function-call arguments (`docs/wire-formats.md#gemini`): a `functionCall` part
    /// with `willContinue: true` opens a call (its name, id and signature); the parts that
    /// follow carry pieces of its arguments (`partialArgs`, each at a JSON path, a string in
    /// several pieces while its piece has `willContinue`) and keep it open while their own
    /// `willContinue` is true; the first one without it (often an empty `functionCall`) closes
    /// it. Returns the part to map: the whole call once it is closed, the part itself when it is
    /// no piece of a call, `None` while a call is being assembled.
    fn assemble(
        &mut self,
        mut part: Part,
        events: &mut Vec<StreamEvent>,
    ) -> Result<Option<Part>, Error> {
        let Some(call) = part.function_call.take() else {
            return Ok(Some(part));
        };
        // A part that names a call while another is open starts a new one: the open one ends.
        if call.name.is_some() && self.open_call.as_ref().is_some_and(|o| o.name.is_some()) {
            if let Some(open) = self.open_call.take() {
                if let Some(block) = to_block(open.into_part(), &mut self.ids) {
                    self.push(block, events);
                }
            }
        }
        let mut open = match self.open_call.take() {
            Some(open) => open,
            None if !call.will_continue && call.partial_args.is_empty() => {
                part.function_call = Some(call);
                return Ok(Some(part));
            }
            None => OpenCall {
                id: None,
                name: None,
                args: Value::Object(Map::new()),
                signature: None,
                continuing: None,
            },
        };
        open.id = open.id.or(call.id);
        open.name = open.name.or(call.name);
        open.signature = open.signature.or(part.thought_signature);
        if let Some(Value::Object(args)) = call.args {
            for (key, value) in args {
                set_at(&mut open.args, &[PathStep::Key(key)], value, false)?;
            }
        }
        for piece in call.partial_args {
            let path = parse_json_path(&piece.json_path).ok_or_else(|| {
                malformed(
                    NAME,
                    format_args!(
                        "partialArgs has an unsupported jsonPath {:?}",
                        piece.json_path
                    ),
                )
            })?;
            let append = open.continuing.as_deref() == Some(piece.json_path.as_str());
            set_at(&mut open.args, &path, piece.value, append)?;
            open.continuing = piece.will_continue.then_some(piece.json_path);
        }
        if call.will_continue {
            self.open_call = Some(open);
            Ok(None)
        } else {
            Ok(Some(open.into_part()))
        }
    }

    /// Events decoded before an error are returned first; the error comes on the next call.
    fn fail(&mut self, error: Error, events: Vec<StreamEvent>) -> Result<Vec<StreamEvent>, Error> {
        self.failed = Some(error.clone());
        if events.is_empty() {
            Err(error)
        } else {
            Ok(events)
        }
    }
}

impl StreamDecoder for GeminiStream {
    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut events = Vec::new();
        for sse in self.sse.feed(bytes) {
            if let Err(error) = self.chunk(&sse.data, &mut events) {
                return self.fail(error, events);
            }
        }
        Ok(events)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let mut events = Vec::new();
        if let Some(sse) = self.sse.finish() {
            if let Err(error) = self.chunk(&sse.data, &mut events) {
                self.failed = Some(error.clone());
                return Err(error);
            }
        }
        if !self.complete {
            let error = malformed(
                NAME,
                "the stream ended before a chunk carried a finishReason",
            );
            self.failed = Some(error.clone());
            return Err(error);
        }
        let content = std::mem::take(&mut self.content);
        events.push(StreamEvent::Done(LlmResponse {
            id: self.id.clone(),
            stop_reason: stop_reason(self.finish_reason.as_deref(), &content),
            content,
            model: self.model.clone(),
            usage: self.usage,
            stop_sequence: None,
        }));
        Ok(events)
    }
}
