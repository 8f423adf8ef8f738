//! Reading Gemini's answers: a `GenerateContentResponse` body, and the SSE stream of them that
//! `streamGenerateContent?alt=sse` sends.

use serde_json::Value;

use super::{IdGen, NAME};
use crate::adapter::sse::SseParser;
use crate::adapter::{malformed, ChatRequest, StreamDecoder, StreamEvent};
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
}

struct Usage {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
}

struct ErrorBody {
    code: Option<u16>,
    message: Option<String>,
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

/// A response or chunk from its JSON text; a body of another shape is malformed.
fn read_response(json: &[u8]) -> Result<Response, Error> {
    crate::json::from_bytes(json)
        .map_err(|e| malformed(NAME, e))
        .and_then(|value| Response::read(value).map_err(|e| malformed(NAME, e)))
}

/// Reads a `generateContent` body.
pub(super) fn parse(
    request: &ChatRequest,
    body: &[u8],
    mut ids: IdGen,
) -> Result<LlmResponse, Error> {
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
            input_tokens: u.prompt_token_count.unwrap_or(0),
            output_tokens: u.candidates_token_count.unwrap_or(0),
        });
    Ok(LlmResponse {
        id,
        stop_reason: stop_reason(finish_reason.as_deref(), &content),
        content,
        model: request.model.clone(),
        usage,
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
}

impl GeminiStream {
    pub(super) fn new(request: &ChatRequest, mut ids: IdGen) -> Self {
        GeminiStream {
            id: ids.next_id(),
            sse: SseParser::new(),
            ids,
            model: request.model.clone(),
            content: Vec::new(),
            usage: TokenUsage::default(),
            finish_reason: None,
            complete: false,
            failed: None,
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
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage.input_tokens = usage.prompt_token_count.unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = usage
                .candidates_token_count
                .unwrap_or(self.usage.output_tokens);
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
            let Some(block) = to_block(part, &mut self.ids) else {
                continue;
            };
            events.push(match &block {
                ContentBlock::Text(t) => StreamEvent::Text(t.text.clone()),
                ContentBlock::Reasoning(r) => StreamEvent::Reasoning(r.text.clone()),
                ContentBlock::ToolUse(call) => StreamEvent::ToolUse(call.clone()),
                _ => continue,
            });
            self.content.push(block);
        }
        Ok(())
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
        }));
        Ok(events)
    }
}
