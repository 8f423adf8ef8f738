//! The call options: OMA messages as `ModelMessage[]`, and the option object around them, with
//! the key order and override rules of OMA's object literal (sampling keys, then the
//! `extraBody` spread, then the structural keys, which win even when they are unset).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{GENERATE_TEXT_URL, PROVIDER_LABEL, STREAM_TEXT_URL};
use crate::adapter::reasoning::inline_text;
use crate::adapter::{ChatRequest, HttpRequest, ToolDefinition};
use crate::error::Error;
use crate::json::writer::Writer;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, ReasoningBlock, Role, ToolResultBlock,
    ToolResultContent, ToolResultPart,
};

/// A `ModelMessage`: `{role, content}`.
enum ModelMessage<'a> {
    Assistant {
        content: Vec<AssistantPart<'a>>,
    },
    /// `content` is one tool result.
    Tool {
        content: ToolResult<'a>,
    },
    User {
        content: UserContent<'a>,
    },
}

impl ModelMessage<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            ModelMessage::Assistant { content } => {
                w.field_str("role", "assistant");
                w.key("content");
                w.begin_array();
                for part in content {
                    part.write(w);
                }
                w.end_array();
            }
            ModelMessage::Tool { content } => {
                w.field_str("role", "tool");
                w.key("content");
                w.begin_array();
                content.write(w);
                w.end_array();
            }
            ModelMessage::User { content } => {
                w.field_str("role", "user");
                w.key("content");
                match content {
                    UserContent::Text(text) => w.string(text),
                    UserContent::Parts(parts) => {
                        w.begin_array();
                        for part in parts {
                            part.write(w);
                        }
                        w.end_array();
                    }
                }
            }
        }
        w.end_object();
    }
}

/// `{type: "text", text}`, `{type: "reasoning", text}` or `{type: "tool-call", toolCallId,
/// toolName, input}`.
enum AssistantPart<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Reasoning {
        text: &'a str,
    },
    ToolCall {
        tool_call_id: &'a str,
        tool_name: &'a str,
        input: &'a Value,
    },
}

impl AssistantPart<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            AssistantPart::Text { text } => {
                w.field_str("type", "text");
                w.field_str("text", text);
            }
            AssistantPart::Reasoning { text } => {
                w.field_str("type", "reasoning");
                w.field_str("text", text);
            }
            AssistantPart::ToolCall {
                tool_call_id,
                tool_name,
                input,
            } => {
                w.field_str("type", "tool-call");
                w.field_str("toolCallId", tool_call_id);
                w.field_str("toolName", tool_name);
                w.key("input");
                w.json(input);
            }
        }
        w.end_object();
    }
}

/// `{type: "tool-result", toolCallId, toolName, output}`.
struct ToolResult<'a> {
    tool_call_id: &'a str,
    tool_name: &'a str,
    output: Output<'a>,
}

impl ToolResult<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        w.field_str("type", "tool-result");
        w.field_str("toolCallId", self.tool_call_id);
        w.field_str("toolName", self.tool_name);
        w.key("output");
        w.begin_object();
        match &self.output {
            Output::Text { value } => {
                w.field_str("type", "text");
                w.field_str("value", value);
            }
            Output::ErrorText { value } => {
                w.field_str("type", "error-text");
                w.field_str("value", value);
            }
            Output::Content { value } => {
                w.field_str("type", "content");
                w.key("value");
                w.begin_array();
                for part in value {
                    part.write(w);
                }
                w.end_array();
            }
        }
        w.end_object();
        w.end_object();
    }
}

/// A tool result's `output`: `{type: "text" | "error-text", value}` or `{type: "content",
/// value: [...]}`.
enum Output<'a> {
    Text { value: &'a str },
    ErrorText { value: &'a str },
    Content { value: Vec<OutputPart<'a>> },
}

/// `{type: "text", text}`, `{type: "file-data", data, mediaType, filename?}` or `{type:
/// "file-url", url}`.
enum OutputPart<'a> {
    Text {
        text: Cow<'a, str>,
    },
    FileData {
        data: &'a str,
        media_type: &'a str,
        filename: Option<&'a str>,
    },
    FileUrl {
        url: &'a str,
    },
}

impl OutputPart<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            OutputPart::Text { text } => {
                w.field_str("type", "text");
                w.field_str("text", text);
            }
            OutputPart::FileData {
                data,
                media_type,
                filename,
            } => {
                w.field_str("type", "file-data");
                w.field_str("data", data);
                w.field_str("mediaType", media_type);
                if let Some(filename) = filename {
                    w.field_str("filename", filename);
                }
            }
            OutputPart::FileUrl { url } => {
                w.field_str("type", "file-url");
                w.field_str("url", url);
            }
        }
        w.end_object();
    }
}

/// A user message's content: a string or parts.
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<UserPart<'a>>),
}

/// A user part: `{type: "text", text}` or `{type: "image", image, mediaType}`. `image` holds
/// the base64 text as it is: the AI SDK's `DataContent` accepts a base64 string as well as
/// bytes, so the bridge never decodes it.
enum UserPart<'a> {
    Text { text: &'a str },
    Image { image: &'a str, media_type: &'a str },
}

impl UserPart<'_> {
    fn write(&self, w: &mut Writer) {
        w.begin_object();
        match self {
            UserPart::Text { text } => {
                w.field_str("type", "text");
                w.field_str("text", text);
            }
            UserPart::Image { image, media_type } => {
                w.field_str("type", "image");
                w.field_str("image", image);
                w.field_str("mediaType", media_type);
            }
        }
        w.end_object();
    }
}

/// `tools`: a record keyed by name, `{description, inputSchema}` each; a repeated name keeps
/// its first position and its last definition, like `Object.fromEntries`.
struct Tools<'a>(Vec<(&'a str, &'a ToolDefinition)>);

/// One value of the option object.
enum Field<'a> {
    Owned(Value),
    Borrowed(&'a Value),
    Str(&'a str),
    Messages(Vec<ModelMessage<'a>>),
    Tools(Tools<'a>),
}

/// The option object: keys in JS insertion order; a `None` value is a key whose value is
/// `undefined`, which `JSON.stringify` leaves out.
struct Options<'a>(Vec<(&'a str, Option<Field<'a>>)>);

impl<'a> Options<'a> {
    fn set(&mut self, key: &'a str, value: Option<Field<'a>>) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The object's JSON text, into a buffer of `capacity` bytes.
    fn write(&self, capacity: usize) -> String {
        let mut w = Writer::with_capacity(capacity);
        w.begin_object();
        for (key, value) in &self.0 {
            let Some(value) = value else {
                continue;
            };
            w.key(key);
            match value {
                Field::Owned(value) => w.json(value),
                Field::Borrowed(value) => w.json(value),
                Field::Str(text) => w.string(text),
                Field::Messages(messages) => {
                    w.begin_array();
                    for message in messages {
                        message.write(&mut w);
                    }
                    w.end_array();
                }
                Field::Tools(Tools(tools)) => {
                    w.begin_object();
                    for (name, tool) in tools {
                        w.key(name);
                        w.begin_object();
                        w.field_str("description", &tool.description);
                        w.key("inputSchema");
                        w.json(&tool.input_schema);
                        w.end_object();
                    }
                    w.end_object();
                }
            }
        }
        w.end_object();
        w.finish()
    }
}

/// Builds the call (see the module docs for the protocol).
pub(super) fn format(request: &ChatRequest) -> Result<HttpRequest, Error> {
    let messages = to_model_messages(&request.messages, request.reasoning_fallback())?;

    let s = &request.sampling;
    let num = |v: Option<f64>| v.map(|v| Field::Owned(Value::from(v)));
    let int = |v: Option<u32>| v.map(|v| Field::Owned(Value::from(v)));
    let mut options = Options(vec![
        ("maxOutputTokens", int(s.max_tokens)),
        ("temperature", num(s.temperature)),
        ("topP", num(s.top_p)),
        ("topK", int(s.top_k)),
        ("frequencyPenalty", num(s.frequency_penalty)),
        ("presencePenalty", num(s.presence_penalty)),
    ]);
    for (key, value) in &request.extra_body {
        options.set(key, Some(Field::Borrowed(value)));
    }
    options.set("model", Some(Field::Str(&request.model)));
    options.set("messages", Some(Field::Messages(messages)));
    options.set("system", request.system_prompt.as_deref().map(Field::Str));
    options.set("tools", tools(&request.tools).map(Field::Tools));
    options.set("maxRetries", Some(Field::Owned(Value::from(0))));
    options.set(
        "providerOptions",
        provider_options(request).map(Field::Owned),
    );

    let url = if request.stream {
        STREAM_TEXT_URL
    } else {
        GENERATE_TEXT_URL
    };
    Ok(HttpRequest::post_json(
        url.into(),
        options.write(request.size_hint()),
    ))
}

fn tools(defs: &[ToolDefinition]) -> Option<Tools<'_>> {
    if defs.is_empty() {
        return None;
    }
    let mut entries: Vec<(&str, &ToolDefinition)> = Vec::with_capacity(defs.len());
    for def in defs {
        match entries.iter_mut().find(|(name, _)| *name == def.name) {
            Some(entry) => entry.1 = def,
            None => entries.push((&def.name, def)),
        }
    }
    Some(Tools(entries))
}

/// `{openai: {reasoningEffort?, parallelToolCalls?, minP?}}`, or nothing when none is set.
fn provider_options(request: &ChatRequest) -> Option<Value> {
    let s = &request.sampling;
    let mut openai = Map::new();
    if let Some(effort) = &s.reasoning_effort {
        openai.insert("reasoningEffort".into(), Value::from(effort.as_str()));
    }
    if let Some(parallel) = s.parallel_tool_calls {
        openai.insert("parallelToolCalls".into(), Value::from(parallel));
    }
    if let Some(min_p) = s.min_p {
        openai.insert("minP".into(), Value::from(min_p));
    }
    (!openai.is_empty()).then(|| {
        let mut out = Map::new();
        out.insert("openai".into(), Value::Object(openai));
        Value::Object(out)
    })
}

fn unsupported_video() -> Error {
    Error::unsupported_block(PROVIDER_LABEL, "video")
}

fn to_model_messages(
    messages: &[LlmMessage],
    preserve: Option<usize>,
) -> Result<Vec<ModelMessage<'_>>, Error> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    for message in messages.iter().filter(|m| m.role == Role::Assistant) {
        for block in &message.content {
            if let ContentBlock::ToolUse(call) = block {
                names.insert(&call.id, &call.name);
            }
        }
    }
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::Assistant => {
                let parts = assistant_parts(message, preserve)?;
                if !parts.is_empty() {
                    out.push(ModelMessage::Assistant { content: parts });
                }
            }
            Role::User => user_messages(message, &names, &mut out)?,
        }
    }
    Ok(out)
}

fn assistant_parts(
    message: &LlmMessage,
    preserve: Option<usize>,
) -> Result<Vec<AssistantPart<'_>>, Error> {
    let mut parts = Vec::with_capacity(message.content.len());
    for block in &message.content {
        match block {
            ContentBlock::Text(text) => parts.push(AssistantPart::Text {
                text: Cow::Borrowed(&text.text),
            }),
            ContentBlock::Reasoning(reasoning) => parts.extend(reasoning_part(reasoning, preserve)),
            ContentBlock::ToolUse(call) => parts.push(AssistantPart::ToolCall {
                tool_call_id: &call.id,
                tool_name: &call.name,
                input: &call.input,
            }),
            ContentBlock::Video(_) => return Err(unsupported_video()),
            ContentBlock::Image(_) | ContentBlock::ToolResult(_) => {}
        }
    }
    Ok(parts)
}

/// Reasoning is never echoed natively (OMA's `echoesReasoning: 'never'`): with the opt-in it
/// becomes `<thinking>` text (dropped when empty), otherwise a reasoning part whose redacted
/// payload is replaced by `[redacted_thinking]`.
fn reasoning_part(
    reasoning: &ReasoningBlock,
    preserve: Option<usize>,
) -> Option<AssistantPart<'_>> {
    if let Some(max_chars) = preserve {
        let text = inline_text(reasoning, max_chars);
        return (!text.is_empty()).then_some(AssistantPart::Text {
            text: Cow::Owned(text),
        });
    }
    let redacted = reasoning
        .redacted_data
        .as_deref()
        .is_some_and(|d| !d.is_empty());
    Some(AssistantPart::Reasoning {
        text: if redacted {
            "[redacted_thinking]"
        } else {
            &reasoning.text
        },
    })
}

fn user_messages<'a>(
    message: &'a LlmMessage,
    names: &HashMap<&'a str, &'a str>,
    out: &mut Vec<ModelMessage<'a>>,
) -> Result<(), Error> {
    let mut other = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult(result) => out.push(ModelMessage::Tool {
                content: ToolResult {
                    tool_call_id: &result.tool_use_id,
                    tool_name: names
                        .get(result.tool_use_id.as_str())
                        .copied()
                        .unwrap_or("unknown_tool"),
                    output: output(result),
                },
            }),
            ContentBlock::Video(_) => return Err(unsupported_video()),
            other_block => other.push(other_block),
        }
    }
    if let [ContentBlock::Text(text)] = other[..] {
        out.push(ModelMessage::User {
            content: UserContent::Text(&text.text),
        });
        return Ok(());
    }
    let parts: Vec<UserPart<'_>> = other
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(UserPart::Text { text: &text.text }),
            // The AI SDK takes a URL string in `image` as a URL to fetch, other strings as
            // base64.
            ContentBlock::Image(image) => Some(match &image.source {
                MediaSource::Base64 { media_type, data } => UserPart::Image {
                    image: data,
                    media_type,
                },
                MediaSource::Url { media_type, url } => UserPart::Image {
                    image: url,
                    media_type,
                },
            }),
            _ => None,
        })
        .collect();
    if !parts.is_empty() {
        out.push(ModelMessage::User {
            content: UserContent::Parts(parts),
        });
    }
    Ok(())
}

fn output(result: &ToolResultBlock) -> Output<'_> {
    let parts = match &result.content {
        ToolResultContent::Text(value) if result.is_error == Some(true) => {
            return Output::ErrorText { value }
        }
        ToolResultContent::Text(value) => return Output::Text { value },
        ToolResultContent::Parts(parts) => parts,
    };
    let mut value = Vec::with_capacity(parts.len());
    for part in parts {
        let (source, filename) = match part {
            ToolResultPart::Text { text } => {
                value.push(OutputPart::Text {
                    text: Cow::Borrowed(text),
                });
                continue;
            }
            ToolResultPart::Image { source } => (source, None),
            ToolResultPart::File { filename, source } => (source, Some(filename.as_str())),
        };
        match source {
            MediaSource::Base64 { media_type, data } => value.push(OutputPart::FileData {
                data,
                media_type,
                filename,
            }),
            MediaSource::Url { media_type, url } => {
                if let Some(filename) = filename {
                    value.push(OutputPart::Text {
                        text: Cow::Owned(format!("[File: {filename}; {media_type}]")),
                    });
                }
                value.push(OutputPart::FileUrl { url });
            }
        }
    }
    Output::Content { value }
}
