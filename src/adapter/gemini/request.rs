//! The `generateContent` request: OMA messages to Gemini `contents`, and the body, URL and
//! headers around them.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::{DEFAULT_BASE_URL, PROVIDER_LABEL};
use crate::adapter::body::{self, Text};
use crate::adapter::reasoning::{inline_text, DEFAULT_MAX_CHARS};
use crate::adapter::{join_url, ChatRequest, Credentials, Endpoint, HttpRequest};
use crate::error::Error;
use crate::message::{
    ContentBlock, LlmMessage, MediaSource, Role, ToolResultBlock, ToolResultContent, ToolResultPart,
};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[Tool<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig>,
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
struct Content<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
}

/// One Gemini `Part`; each variant serialises as its own object.
#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Text(TextPart<'a>),
    Thought(ThoughtPart<'a>),
    InlineData(InlineDataPart<'a>),
    FunctionCall(FunctionCallPart<'a>),
    FunctionResponse(FunctionResponsePart<'a>),
}

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(serialize_with = "body::text")]
    text: Cow<'a, str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThoughtPart<'a> {
    #[serde(serialize_with = "body::text")]
    text: &'a str,
    thought: bool,
    thought_signature: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineDataPart<'a> {
    inline_data: Blob<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blob<'a> {
    mime_type: &'a str,
    data: Text<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileData<'a> {
    mime_type: &'a str,
    file_uri: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallPart<'a> {
    function_call: FunctionCall<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'a str>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(serialize_with = "body::json")]
    args: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionResponsePart<'a> {
    function_response: FunctionResponse<'a>,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    id: &'a str,
    name: &'a str,
    response: ResponseBody<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<ResponsePart<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseBody<'a> {
    #[serde(serialize_with = "body::text")]
    content: Cow<'a, str>,
    is_error: bool,
}

/// A `FunctionResponsePart`: inline bytes or a file reference.
#[derive(Serialize)]
#[serde(untagged)]
enum ResponsePart<'a> {
    Inline {
        #[serde(rename = "inlineData")]
        inline_data: Blob<'a>,
    },
    File {
        #[serde(rename = "fileData")]
        file_data: FileData<'a>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tool<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(serialize_with = "body::json")]
    parameters_json_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig {
    function_calling_config: FunctionCallingConfig,
}

#[derive(Serialize)]
struct FunctionCallingConfig {
    mode: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    include_thoughts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<u32>,
}

/// Builds the request (see the module docs for the route and the body).
pub(super) fn format(request: &ChatRequest, endpoint: &Endpoint) -> Result<HttpRequest, Error> {
    crate::validate::validate_messages(&request.messages)?;
    let contents = to_contents(&request.messages, request.preserve_reasoning_as_text)?;

    let tools = (!request.tools.is_empty()).then(|| {
        [Tool {
            function_declarations: request
                .tools
                .iter()
                .map(|t| FunctionDeclaration {
                    name: &t.name,
                    description: &t.description,
                    parameters_json_schema: &t.input_schema,
                })
                .collect(),
        }]
    });
    let tool_config = tools.as_ref().map(|_| ToolConfig {
        function_calling_config: FunctionCallingConfig { mode: "AUTO" },
    });
    let thinking_config = request
        .thinking
        .filter(|t| t.enabled)
        .map(|t| ThinkingConfig {
            include_thoughts: true,
            thinking_budget: t.budget_tokens,
        });
    let body = Body {
        contents,
        system_instruction: request.system_prompt.as_deref().map(|text| Content {
            role: "user",
            parts: vec![Part::Text(TextPart {
                text: Cow::Borrowed(text),
            })],
        }),
        tools,
        tool_config,
        generation_config: GenerationConfig {
            max_output_tokens: request.sampling.max_tokens.unwrap_or(4096),
            temperature: request.sampling.temperature,
            thinking_config,
        },
    };

    let base = endpoint.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
    let method = if request.stream {
        ":streamGenerateContent?alt=sse"
    } else {
        ":generateContent"
    };
    crate::adapter::check_model_in_path(&request.model)?;
    let path = format!("v1beta/{}{method}", model_path(&request.model));
    let mut http = HttpRequest::post_json(
        join_url(base, &path),
        body::to_string(&body, request.size_hint()),
    );
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

fn to_contents(messages: &[LlmMessage], preserve: bool) -> Result<Vec<Content<'_>>, Error> {
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
    preserve: bool,
) -> Result<Option<Part<'a>>, Error> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Part::Text(TextPart {
            text: Cow::Borrowed(&text.text),
        }),
        ContentBlock::Image(image) => Part::InlineData(InlineDataPart {
            inline_data: Blob {
                mime_type: &image.source.media_type,
                data: Text(&image.source.data),
                display_name: None,
            },
        }),
        ContentBlock::ToolUse(call) => Part::FunctionCall(FunctionCallPart {
            function_call: FunctionCall {
                id: &call.id,
                name: &call.name,
                args: &call.input,
            },
            thought_signature: call.signature.as_deref(),
        }),
        ContentBlock::ToolResult(result) => {
            Part::FunctionResponse(function_response(result, names))
        }
        ContentBlock::Reasoning(reasoning) => {
            match (reasoning.provenance.as_deref(), &reasoning.signature) {
                (Some(super::NAME), Some(signature)) => Part::Thought(ThoughtPart {
                    text: &reasoning.text,
                    thought: true,
                    thought_signature: signature,
                }),
                _ if preserve => {
                    let text = inline_text(reasoning, DEFAULT_MAX_CHARS);
                    if text.is_empty() {
                        return Ok(None);
                    }
                    Part::Text(TextPart {
                        text: Cow::Owned(text),
                    })
                }
                _ => return Ok(None),
            }
        }
        ContentBlock::Video(_) => {
            return Err(Error::UnsupportedContentBlock {
                provider: PROVIDER_LABEL.into(),
                block_type: "video".into(),
            })
        }
    }))
}

fn function_response<'a>(
    result: &'a ToolResultBlock,
    names: &HashMap<&'a str, &'a str>,
) -> FunctionResponsePart<'a> {
    let id = result.tool_use_id.as_str();
    let name = names.get(id).copied().unwrap_or(id);
    let (content, parts) = match &result.content {
        ToolResultContent::Text(text) => (Cow::Borrowed(text.as_str()), Vec::new()),
        ToolResultContent::Parts(parts) => rich_content(parts),
    };
    FunctionResponsePart {
        function_response: FunctionResponse {
            id,
            name,
            response: ResponseBody {
                content,
                is_error: result.is_error.unwrap_or(false),
            },
            parts,
        },
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
            MediaSource::Base64 { media_type, data } => ResponsePart::Inline {
                inline_data: Blob {
                    mime_type: media_type,
                    data: Text(data),
                    display_name,
                },
            },
            MediaSource::Url { media_type, url } => ResponsePart::File {
                file_data: FileData {
                    mime_type: media_type,
                    file_uri: url,
                    display_name,
                },
            },
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
