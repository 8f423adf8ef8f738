//! The `generateContent` request: OMA messages to Gemini `contents`, and the body, URL and
//! headers around them.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use super::{DEFAULT_BASE_URL, PROVIDER_LABEL};
use crate::adapter::reasoning::inline_text;
use crate::adapter::{join_url, ChatRequest, Credentials, Endpoint, HttpRequest};
use crate::error::Error;
use crate::json::writer::Writer;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, Role, ToolResultBlock, ToolResultContent, ToolResultPart,
};

/// `{contents, systemInstruction?, tools?, toolConfig?, generationConfig}`.
struct Body<'a> {
    contents: Vec<Content<'a>>,
    system_instruction: Option<&'a str>,
    tools: &'a [crate::adapter::ToolDefinition],
    max_output_tokens: u32,
    temperature: Option<f64>,
    /// `thinkingConfig: {includeThoughts: true, thinkingBudget?}` when `Some`.
    thinking: Option<Option<u32>>,
    /// More keys of `generationConfig` ([`ChatRequest::generation_extra`]).
    extra: &'a serde_json::Map<String, serde_json::Value>,
    /// The forced tool call ([`ChatRequest::forced_tool`]).
    forced: Option<&'a crate::adapter::ForcedTool>,
}

impl Body<'_> {
    /// The body's JSON text, into a buffer of `capacity` bytes.
    fn write(&self, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        self.write_into(&mut w, None);
        w.finish()
    }

    /// The body of `countTokens`: `{generateContentRequest: {model, contents,
    /// systemInstruction?, tools?}}`, what the counter counts (no tool or generation config).
    fn write_count(&self, model: &str, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        w.key("generateContentRequest");
        self.write_into(&mut w, Some(model));
        w.end_object();
        w.finish()
    }

    /// The object of a `generateContent` request; for counting (`model` given), with the model
    /// first and no configuration.
    fn write_into(&self, w: &mut Writer, model: Option<&str>) {
        w.begin_object();
        if let Some(model) = model {
            w.field_str("model", model);
        }
        w.key("contents");
        w.begin_array();
        for content in &self.contents {
            content.write(w);
        }
        w.end_array();
        if let Some(text) = self.system_instruction {
            w.key("systemInstruction");
            Content {
                role: "user",
                parts: vec![Part::Text(Cow::Borrowed(text))],
            }
            .write(w);
        }
        if !self.tools.is_empty() {
            // `[{functionDeclarations: [{name, description, parametersJsonSchema}]}]`.
            w.key("tools");
            w.begin_array();
            w.begin_object();
            w.key("functionDeclarations");
            w.begin_array();
            for tool in self.tools {
                w.begin_object();
                w.field_str("name", &tool.name);
                w.field_str("description", &tool.description);
                w.key("parametersJsonSchema");
                w.json(&tool.input_schema);
                w.end_object();
            }
            w.end_array();
            w.end_object();
            w.end_array();
        }
        if model.is_some() {
            w.end_object();
            return;
        }
        if !self.tools.is_empty() {
            // `{functionCallingConfig: {mode: "AUTO"}}`, or `ANY` (with the one allowed
            // name) for a forced call.
            w.key("toolConfig");
            w.begin_object();
            w.key("functionCallingConfig");
            w.begin_object();
            match self.forced {
                None => w.field_str("mode", "AUTO"),
                Some(forced) => {
                    w.field_str("mode", "ANY");
                    if let crate::adapter::ForcedTool::Named(name) = forced {
                        w.key("allowedFunctionNames");
                        w.begin_array();
                        w.string(name);
                        w.end_array();
                    }
                }
            }
            w.end_object();
            w.end_object();
        }
        w.key("generationConfig");
        w.begin_object();
        w.key("maxOutputTokens");
        w.u64(u64::from(self.max_output_tokens));
        if let Some(temperature) = self.temperature {
            w.key("temperature");
            w.f64(temperature);
        }
        if let Some(budget) = self.thinking {
            w.key("thinkingConfig");
            w.begin_object();
            w.key("includeThoughts");
            w.bool(true);
            if let Some(budget) = budget {
                w.key("thinkingBudget");
                w.u64(u64::from(budget));
            }
            w.end_object();
        }
        for (key, value) in self.extra {
            if !matches!(
                key.as_str(),
                "maxOutputTokens" | "temperature" | "thinkingConfig"
            ) {
                w.key(key);
                w.json(value);
            }
        }
        w.end_object();
        w.end_object();
    }
}

/// `{role, parts}`.
struct Content<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
}

impl Content<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("role", self.role);
        w.key("parts");
        w.begin_array();
        for part in &self.parts {
            part.write(w);
        }
        w.end_array();
        w.end_object();
    }
}

/// One Gemini `Part`; each variant is an object of its own shape.
enum Part<'a> {
    /// `{text}`.
    Text(Cow<'a, str>),
    /// `{text, thought: true, thoughtSignature}`.
    Thought { text: &'a str, signature: &'a str },
    /// `{inlineData: {mimeType, data}}`.
    InlineData(Blob<'a>),
    /// `{fileData: {mimeType, fileUri}}`: an image by URL, which Gemini fetches.
    FileData(FileData<'a>),
    /// `{functionCall: {id, name, args}, thoughtSignature?}`.
    FunctionCall {
        id: &'a str,
        name: &'a str,
        args: &'a Value,
        thought_signature: Option<&'a str>,
    },
    /// `{functionResponse: {id, name, response: {content, isError}, parts?}}`.
    FunctionResponse(FunctionResponse<'a>),
}

impl Part<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            Part::Text(text) => w.field_str("text", text),
            Part::Thought { text, signature } => {
                w.field_str("text", text);
                w.key("thought");
                w.bool(true);
                w.field_str("thoughtSignature", signature);
            }
            Part::InlineData(blob) => {
                w.key("inlineData");
                blob.write(w);
            }
            Part::FileData(file) => file.write(w),
            Part::FunctionCall {
                id,
                name,
                args,
                thought_signature,
            } => {
                w.key("functionCall");
                w.begin_object();
                w.field_str("id", id);
                w.field_str("name", name);
                w.key("args");
                w.json(args);
                w.end_object();
                if let Some(signature) = thought_signature {
                    w.field_str("thoughtSignature", signature);
                }
            }
            Part::FunctionResponse(response) => {
                w.key("functionResponse");
                response.write(w);
            }
        }
        w.end_object();
    }
}

/// `{mimeType, data, displayName?}`.
struct Blob<'a> {
    mime_type: &'a str,
    data: &'a str,
    display_name: Option<&'a str>,
}

impl Blob<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("mimeType", self.mime_type);
        w.field_str("data", self.data);
        if let Some(name) = self.display_name {
            w.field_str("displayName", name);
        }
        w.end_object();
    }
}

/// `{mimeType, fileUri, displayName?}`.
struct FileData<'a> {
    mime_type: &'a str,
    file_uri: &'a str,
    display_name: Option<&'a str>,
}

impl FileData<'_> {
    /// The `fileData` field: `"fileData": {mimeType, fileUri, displayName?}`.
    fn write(&self, w: &mut Writer) {
        w.key("fileData");
        w.begin_object();
        w.field_str("mimeType", self.mime_type);
        w.field_str("fileUri", self.file_uri);
        if let Some(name) = self.display_name {
            w.field_str("displayName", name);
        }
        w.end_object();
    }
}

struct FunctionResponse<'a> {
    id: &'a str,
    name: &'a str,
    content: Cow<'a, str>,
    is_error: bool,
    /// Left out when empty.
    parts: Vec<ResponsePart<'a>>,
}

impl FunctionResponse<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("id", self.id);
        w.field_str("name", self.name);
        w.key("response");
        w.begin_object();
        w.field_str("content", &self.content);
        w.key("isError");
        w.bool(self.is_error);
        w.end_object();
        if !self.parts.is_empty() {
            w.key("parts");
            w.begin_array();
            for part in &self.parts {
                w.begin_object();
                match part {
                    ResponsePart::Inline(blob) => {
                        w.key("inlineData");
                        blob.write(w);
                    }
                    ResponsePart::File(file) => file.write(w),
                }
                w.end_object();
            }
            w.end_array();
        }
        w.end_object();
    }
}

/// A `FunctionResponsePart`: `{inlineData}` or `{fileData}`.
enum ResponsePart<'a> {
    Inline(Blob<'a>),
    File(FileData<'a>),
}

/// Builds the request (see the module docs for the route and the body).
/// The `generateContent` request (`streamGenerateContent` when streamed); with `count`, the
/// `countTokens` request for the same content.
pub(super) fn format(
    request: &ChatRequest,
    endpoint: &Endpoint,
    count: bool,
) -> Result<HttpRequest, Error> {
    let contents = to_contents(&request.messages, request.reasoning_fallback())?;
    let body = Body {
        contents,
        system_instruction: request.system_prompt.as_deref(),
        tools: &request.tools,
        max_output_tokens: request.sampling.max_tokens.unwrap_or(4096),
        temperature: request.sampling.temperature,
        thinking: request
            .thinking
            .filter(|t| t.enabled)
            .map(|t| t.budget_tokens),
        extra: &request.generation_extra,
        forced: request.forced_tool.as_ref(),
    };

    let base = endpoint.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
    let method = if count {
        ":countTokens"
    } else if request.stream {
        ":streamGenerateContent?alt=sse"
    } else {
        ":generateContent"
    };
    crate::adapter::check_model_in_path(&request.model)?;
    let model = model_path(&request.model);
    let path = format!("v1beta/{model}{method}");
    let text = if count {
        body.write_count(&model, request.size_hint())
    } else {
        body.write(request.size_hint())
    };
    let mut http = HttpRequest::post_json(join_url(base, &path), text);
    match &endpoint.credentials {
        Credentials::None => {}
        Credentials::ApiKey(key) => http.headers.push(("x-goog-api-key".into(), key.clone())),
        Credentials::Aws { .. } => {
            return Err(Error::InvalidRequest {
                message: "gemini authenticates with an api key, not aws credentials".into(),
            })
        }
    }
    Ok(http)
}

/// `models/<model>` as the SDK writes it (a `models/` or `tunedModels/` prefix is kept), with
/// every character outside the URL-safe set percent-encoded.
fn model_path(model: &str) -> String {
    let full = if model.starts_with("models/") || model.starts_with("tunedModels/") {
        Cow::Borrowed(model)
    } else {
        Cow::Owned(format!("models/{model}"))
    };
    let mut out = String::with_capacity(full.len());
    for byte in full.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn to_contents(
    messages: &[LlmMessage],
    preserve: Option<usize>,
) -> Result<Vec<Content<'_>>, Error> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    for block in messages.iter().flat_map(|m| &m.content) {
        if let ContentBlock::ToolUse(call) = block {
            names.insert(&call.id, &call.name);
        }
    }
    messages
        .iter()
        .map(|message| {
            let mut parts = Vec::with_capacity(message.content.len());
            for block in &message.content {
                if let Some(part) = to_part(block, &names, preserve)? {
                    parts.push(part);
                }
            }
            let role = match message.role {
                Role::Assistant => "model",
                Role::User => "user",
            };
            Ok(Content { role, parts })
        })
        .collect()
}

fn to_part<'a>(
    block: &'a ContentBlock,
    names: &HashMap<&'a str, &'a str>,
    preserve: Option<usize>,
) -> Result<Option<Part<'a>>, Error> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Part::Text(Cow::Borrowed(&text.text)),
        ContentBlock::Image(image) => match &image.source {
            MediaSource::Base64 { media_type, data } => Part::InlineData(Blob {
                mime_type: media_type,
                data,
                display_name: None,
            }),
            MediaSource::Url { media_type, url } => Part::FileData(FileData {
                mime_type: media_type,
                file_uri: url,
                display_name: None,
            }),
        },
        ContentBlock::ToolUse(call) => Part::FunctionCall {
            id: &call.id,
            name: &call.name,
            args: &call.input,
            thought_signature: call.signature.as_deref(),
        },
        ContentBlock::ToolResult(result) => {
            Part::FunctionResponse(function_response(result, names))
        }
        ContentBlock::Reasoning(reasoning) => {
            match (reasoning.provenance.as_deref(), &reasoning.signature) {
                (Some(super::NAME), Some(signature)) => Part::Thought {
                    text: &reasoning.text,
                    signature,
                },
                _ => {
                    let Some(max_chars) = preserve else {
                        return Ok(None);
                    };
                    let text = inline_text(reasoning, max_chars);
                    if text.is_empty() {
                        return Ok(None);
                    }
                    Part::Text(Cow::Owned(text))
                }
            }
        }
        ContentBlock::Video(_) => return Err(Error::unsupported_block(PROVIDER_LABEL, "video")),
    }))
}

fn function_response<'a>(
    result: &'a ToolResultBlock,
    names: &HashMap<&'a str, &'a str>,
) -> FunctionResponse<'a> {
    let id = result.tool_use_id.as_str();
    let name = names.get(id).copied().unwrap_or(id);
    let (content, parts) = match &result.content {
        ToolResultContent::Text(text) => (Cow::Borrowed(text.as_str()), Vec::new()),
        ToolResultContent::Parts(parts) => rich_content(parts),
    };
    FunctionResponse {
        id,
        name,
        content,
        is_error: result.is_error.unwrap_or(false),
        parts,
    }
}

/// `response.content` (the text parts joined with `\n`, or `[N tool-result attachment(s)]`
/// when that is empty) and the media parts.
fn rich_content(parts: &[ToolResultPart]) -> (Cow<'_, str>, Vec<ResponsePart<'_>>) {
    let mut texts = Vec::new();
    let mut media = Vec::new();
    for part in parts {
        let (source, display_name) = match part {
            ToolResultPart::Text { text } => {
                texts.push(text.as_str());
                continue;
            }
            ToolResultPart::Image { source } => (source, None),
            ToolResultPart::File { filename, source } => (source, Some(filename.as_str())),
        };
        media.push(match source {
            MediaSource::Base64 { media_type, data } => ResponsePart::Inline(Blob {
                mime_type: media_type,
                data,
                display_name,
            }),
            MediaSource::Url { media_type, url } => ResponsePart::File(FileData {
                mime_type: media_type,
                file_uri: url,
                display_name,
            }),
        });
    }
    let text = texts.join("\n");
    let content = if text.is_empty() {
        format!("[{} tool-result attachment(s)]", media.len())
    } else {
        text
    };
    (Cow::Owned(content), media)
}
