//! The data model: messages and content blocks, in OMA's JSON shape.
//!
//! Serde gives the exact JSON OMA reads and writes: snake_case keys (with OMA's one camelCase key,
//! `redactedData`), a `type` tag on every block and source, and absent optional fields left out.
//! Values are owned, so a clone is a deep, independent copy: the defensive copies of OMA come
//! from `Clone`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The application or end user; tool results travel in user turns.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The role as OMA's JSON writes it: `user` or `assistant`.
    pub fn word(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of a conversation (OMA's `LLMMessage`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmMessage {
    /// Who wrote the turn.
    pub role: Role,
    /// The blocks of the turn, in order.
    pub content: Vec<ContentBlock>,
}

impl LlmMessage {
    /// A user turn holding one text block: what OMA makes of a string input.
    pub fn user_text(text: impl Into<String>) -> Self {
        LlmMessage {
            role: Role::User,
            content: vec![ContentBlock::Text(TextBlock { text: text.into() })],
        }
    }
}

/// One block of a message (OMA's `ContentBlock`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text(TextBlock),
    /// An image: inline (forwarded unchecked, as OMA does) or by URL (checked under the media
    /// rules, like a video URL).
    Image(ImageBlock),
    /// A video, inline or by URL, validated under the media rules.
    Video(VideoBlock),
    /// A tool call made by the model.
    ToolUse(ToolUseBlock),
    /// The answer to a tool call.
    ToolResult(ToolResultBlock),
    /// Provider reasoning.
    Reasoning(ReasoningBlock),
}

impl ContentBlock {
    /// OMA's `type` tag of the block, e.g. `tool_use`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Video(_) => "video",
            ContentBlock::ToolUse(_) => "tool_use",
            ContentBlock::ToolResult(_) => "tool_result",
            ContentBlock::Reasoning(_) => "reasoning",
        }
    }
}

/// A text block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text; it may be empty.
    pub text: String,
}

/// An image block. An inline image is OMA's (base64, forwarded as given, its contents not
/// validated); an image by URL is this component's addition, with the source shape OMA gives
/// tool-result images (`{"type": "url", "media_type", "url"}`), checked under the media rules
/// as a video URL is, and fetched by the provider where its wire format takes an image URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// The image's bytes or URL.
    pub source: MediaSource,
}

/// A video block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoBlock {
    /// The video's bytes or URL.
    pub source: MediaSource,
}

/// Where the bytes of a video or tool-result attachment come from (OMA's `MediaSource`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MediaSource {
    /// Raw canonical base64, carried inline.
    Base64 {
        /// A MIME type without parameters.
        media_type: String,
        /// Raw canonical base64 text.
        data: String,
    },
    /// A reference the provider fetches.
    Url {
        /// A MIME type without parameters.
        media_type: String,
        /// An absolute http or https URL, kept exactly as given.
        url: String,
    },
}

impl MediaSource {
    /// The MIME type the source claims.
    pub fn media_type(&self) -> &str {
        match self {
            MediaSource::Base64 { media_type, .. } | MediaSource::Url { media_type, .. } => {
                media_type
            }
        }
    }
}

/// A tool call made by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUseBlock {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The call's arguments; OMA expects an object but does not check it.
    pub input: Value,
    /// Gemini's `thoughtSignature` on the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The answer to a tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The id of the call this answers.
    pub tool_use_id: String,
    /// What the tool returned.
    pub content: ToolResultContent,
    /// Whether the tool failed; sent only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// What a tool returned: a string (the legacy form) or a non-empty list of parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text; the only form an error result may have.
    Text(String),
    /// Rich content.
    Parts(Vec<ToolResultPart>),
}

/// One part of a rich tool result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultPart {
    /// Text.
    Text {
        /// The text; it may be empty.
        text: String,
    },
    /// An image, inline or by URL.
    Image {
        /// The image's bytes or URL.
        source: MediaSource,
    },
    /// A named file, inline or by URL.
    File {
        /// The file's name; not blank.
        filename: String,
        /// The file's bytes or URL.
        source: MediaSource,
    },
}

impl ToolResultContent {
    /// The result as text (OMA's `summarizeToolResultContent`): text as it is, each part on its
    /// own line ([`ToolResultPart::summary`]). What a trace shows of a tool's output.
    pub fn summary(&self) -> String {
        match self {
            ToolResultContent::Text(text) => text.clone(),
            ToolResultContent::Parts(parts) => parts
                .iter()
                .map(ToolResultPart::summary)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl ToolResultPart {
    /// One part as text: a text part as it is, an image or file as OMA's placeholder, which
    /// holds neither bytes nor URL (`[image: <type>; inline data]`,
    /// `[file: <name>; <type>; URL reference]`).
    pub fn summary(&self) -> String {
        let media = |source: &MediaSource| match source {
            MediaSource::Base64 { .. } => "inline data",
            MediaSource::Url { .. } => "URL reference",
        };
        match self {
            ToolResultPart::Text { text } => text.clone(),
            ToolResultPart::Image { source } => {
                format!("[image: {}; {}]", source.media_type(), media(source))
            }
            ToolResultPart::File { filename, source } => {
                format!(
                    "[file: {filename}; {}; {}]",
                    source.media_type(),
                    media(source)
                )
            }
        }
    }
}

/// Thinking content produced by a provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningBlock {
    /// The reasoning text; empty when redacted.
    pub text: String,
    /// The provider's thinking signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The opaque payload of redacted reasoning.
    #[serde(
        default,
        rename = "redactedData",
        skip_serializing_if = "Option::is_none"
    )]
    pub redacted_data: Option<String>,
    /// The adapter that produced the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
}

/// A provider's answer to one chat request, in OMA's shape (`LLMResponse`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The provider's id for the response (generated locally where the provider has none).
    pub id: String,
    /// The blocks of the assistant turn.
    pub content: Vec<ContentBlock>,
    /// The model that answered.
    pub model: String,
    /// Why the model stopped: `end_turn`, `tool_use`, `max_tokens`, `content_filter`, or the
    /// provider's own value passed through.
    pub stop_reason: String,
    /// The stop sequence that ended the answer, when the provider says which one (Anthropic's
    /// `stop_sequence`); `None` where it does not. Not part of OMA's JSON (OMA's `LLMResponse`
    /// has no such field): the gateway's Anthropic-shaped answers carry it.
    #[serde(skip)]
    pub stop_sequence: Option<String>,
    /// Tokens used.
    pub usage: TokenUsage,
}

/// Tokens used by one request (OMA's `TokenUsage`, with the prompt cache's counts beside it).
///
/// `input_tokens` and `output_tokens` are OMA's, as the provider reports them. The two cache
/// counts are Anthropic's (and Bedrock's, which counts the same way): the input tokens written
/// to and read from the provider's prompt cache, which those providers leave out of
/// `input_tokens`. OpenAI and Gemini count the tokens read from their cache inside their input
/// count, as OMA reports it: those are `cached_input_tokens`, a part of `input_tokens`. The cache
/// counts are zero where the provider reports none, and never part of OMA's JSON (OMA's
/// `TokenUsage` has the two counts only); the gateway answers and traces them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens read.
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic's `cache_creation_input_tokens`,
    /// Bedrock's `cacheWriteInputTokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache (Anthropic's `cache_read_input_tokens`,
    /// Bedrock's `cacheReadInputTokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_input_tokens: u64,
    /// Input tokens read from the prompt cache that `input_tokens` already counts (OpenAI's
    /// `prompt_tokens_details.cached_tokens`, Gemini's `cachedContentTokenCount`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl TokenUsage {
    /// OMA's two counts, with no cache counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        TokenUsage {
            input_tokens,
            output_tokens,
            ..TokenUsage::default()
        }
    }

    /// Adds `other`'s counts to these (saturating): a run's usage over its requests.
    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
    }

    /// Every input token read from the prompt cache, however the provider counts them
    /// (saturating): Anthropic's `cache_read_input_tokens` and OpenAI's `cached_tokens` alike.
    pub fn cache_read(&self) -> u64 {
        self.cache_read_input_tokens
            .saturating_add(self.cached_input_tokens)
    }

    /// The input tokens neither read from nor written to the prompt cache: what Anthropic's
    /// `input_tokens` counts.
    pub fn uncached_input(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cached_input_tokens)
    }

    /// Every input token, the prompt cache's included (saturating): what OpenAI's
    /// `prompt_tokens` and the OpenTelemetry conventions' input count hold.
    pub fn all_input(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }

    /// Every token read and written, the prompt cache's included (saturating): what the
    /// gateway's per-token limits count.
    pub fn all(&self) -> u64 {
        self.all_input().saturating_add(self.output_tokens)
    }

    /// Tokens read and written together (saturating): what a token budget or a per-minute
    /// token limit counts. OMA's two counts only: the cache counts are not in it, as OMA's
    /// budget leaves them out.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_are_summarized_without_media_bytes() {
        let content = ToolResultContent::Parts(vec![
            ToolResultPart::Text {
                text: "chart:".into(),
            },
            ToolResultPart::Image {
                source: MediaSource::Base64 {
                    media_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            },
            ToolResultPart::File {
                filename: "r.pdf".into(),
                source: MediaSource::Url {
                    media_type: "application/pdf".into(),
                    url: "https://x.example/r.pdf".into(),
                },
            },
        ]);
        assert_eq!(
            content.summary(),
            "chart:\n[image: image/png; inline data]\n[file: r.pdf; application/pdf; URL reference]"
        );
    }
}
