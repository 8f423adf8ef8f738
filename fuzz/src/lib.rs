//! Shared helpers of the fuzz targets: arbitrary messages built from the fuzzer's bytes, with
//! media fields drawn now from plausible values (so the media rules are reached) and now from
//! arbitrary strings.

use arbitrary::{Result, Unstructured};
use oma_core::message::{
    ContentBlock, ImageBlock, LlmMessage, MediaSource, ReasoningBlock, Role, TextBlock,
    ToolResultBlock, ToolResultContent, ToolResultPart, ToolUseBlock, VideoBlock,
};
use serde_json::Value;

/// The providers an adapter target picks from with one byte.
pub const PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "minimax",
    "deepseek",
    "grok",
    "gemini",
    "bedrock",
    "ai-sdk",
    "custom-compatible",
];

/// The adapter for a selector byte (`custom-compatible` gets a base URL).
pub fn adapter(selector: u8) -> Box<dyn oma_core::adapter::Adapter> {
    let name = PROVIDERS[usize::from(selector) % PROVIDERS.len()];
    oma_core::adapter::for_provider(
        name,
        Some("http://127.0.0.1:9"),
        oma_core::adapter::IdSource::default(),
    )
    .unwrap_or_else(|e| panic!("{name} is a known provider: {e}"))
}

/// One of `plausible`, or (one time in three) an arbitrary string.
fn pick(u: &mut Unstructured<'_>, plausible: &[&str]) -> Result<String> {
    if u.ratio(1, 3)? {
        u.arbitrary()
    } else {
        Ok((*u.choose(plausible)?).to_string())
    }
}

const MEDIA_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "video/mp4",
    "application/pdf",
    "video/mp4; codecs=x",
    "",
    " ",
    "image/",
    "IMAGE/PNG",
];
const DATA: &[&str] = &[
    "AAAA",
    "AAAAGGZ0eXA=",
    "AA==",
    "A===",
    "AAA",
    "data:video/mp4;base64,AAAA",
    "",
    "QUJD\n",
    "_-__",
];
const URLS: &[&str] = &[
    "https://x.example/v.mp4",
    "http://a",
    "HTTPS://A.EXAMPLE/%zz",
    "ftp://x.example/a",
    "mm_file://abc",
    "data:video/mp4;base64,AAAA",
    "https://ü.example/ä",
    "//x.example",
    "",
];

/// An arbitrary media source.
pub fn source(u: &mut Unstructured<'_>) -> Result<MediaSource> {
    let media_type = pick(u, MEDIA_TYPES)?;
    Ok(if u.arbitrary()? {
        MediaSource::Base64 {
            media_type,
            data: pick(u, DATA)?,
        }
    } else {
        MediaSource::Url {
            media_type,
            url: pick(u, URLS)?,
        }
    })
}

/// An arbitrary JSON value, at most `depth` levels deep.
pub fn json(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=if depth == 0 { 3 } else { 5 })? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        3 => Value::String(u.arbitrary()?),
        4 => Value::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| json(u, depth - 1))
                .collect::<Result<_>>()?,
        ),
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..u.int_in_range(0..=3)? {
                let key: String = u.arbitrary()?;
                map.insert(key, json(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

/// An arbitrary content block.
pub fn block(u: &mut Unstructured<'_>) -> Result<ContentBlock> {
    Ok(match u.int_in_range(0..=5)? {
        0 => ContentBlock::Text(TextBlock {
            text: u.arbitrary()?,
        }),
        // Inline or by URL, as a video.
        1 => ContentBlock::Image(ImageBlock { source: source(u)? }),
        2 => ContentBlock::Video(VideoBlock { source: source(u)? }),
        3 => ContentBlock::ToolUse(ToolUseBlock {
            id: u.arbitrary()?,
            name: u.arbitrary()?,
            input: json(u, 2)?,
            signature: u.arbitrary()?,
        }),
        4 => {
            let content = if u.arbitrary()? {
                ToolResultContent::Text(u.arbitrary()?)
            } else {
                let mut parts = Vec::new();
                for _ in 0..u.int_in_range(0..=3)? {
                    parts.push(match u.int_in_range(0..=2)? {
                        0 => ToolResultPart::Text {
                            text: u.arbitrary()?,
                        },
                        1 => ToolResultPart::Image { source: source(u)? },
                        _ => ToolResultPart::File {
                            filename: u.arbitrary()?,
                            source: source(u)?,
                        },
                    });
                }
                ToolResultContent::Parts(parts)
            };
            ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: u.arbitrary()?,
                content,
                is_error: u.arbitrary()?,
            })
        }
        _ => ContentBlock::Reasoning(ReasoningBlock {
            text: u.arbitrary()?,
            signature: u.arbitrary()?,
            redacted_data: u.arbitrary()?,
            provenance: if u.arbitrary()? {
                Some(pick(
                    u,
                    &["anthropic", "openai", "deepseek", "gemini", "bedrock"],
                )?)
            } else {
                None
            },
        }),
    })
}

/// An arbitrary message list (up to 4 messages of up to 4 blocks).
pub fn messages(u: &mut Unstructured<'_>) -> Result<Vec<LlmMessage>> {
    let mut out = Vec::new();
    for _ in 0..u.int_in_range(0..=4)? {
        let role = if u.arbitrary()? {
            Role::User
        } else {
            Role::Assistant
        };
        let mut content = Vec::new();
        for _ in 0..u.int_in_range(0..=4)? {
            content.push(block(u)?);
        }
        out.push(LlmMessage { role, content });
    }
    Ok(out)
}

/// Splits `data` into chunks whose sizes come from `sizes` (each 1 to 64 bytes, cycled).
pub fn chunks<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .map_or(rest.len(), |s| usize::from(s % 64) + 1)
            .min(rest.len());
        let (head, tail) = rest.split_at(size);
        out.push(head);
        rest = tail;
        i += 1;
    }
    out
}
