//! Message lists read straight from JSON text into the typed model, without a [`Value`] for
//! the whole.
//!
//! Parsing a long conversation into a [`Value`] (with `preserve_order`, an ordered map and a
//! `String` key for every field of every message and block) and then taking it apart is the
//! largest cost of a long history. [`direct_messages`] reads the list, its messages and their
//! `text`, `tool_use`, `reasoning` and string-content `tool_result` blocks straight into the
//! model, where OMA's guard has nothing to check. A block with media (an `image` or `video`
//! block, a `tool_result` with a list of parts) is read as a small [`Value`] of the fields those
//! types take and handed to the guard and the typing ([`super::guard`], [`super::typing`]), the
//! one implementation of their rules. It gives up (`None`) at the first thing it does not read
//! or that those refuse: another block type, a field of the wrong type, a field given twice, a
//! value past the limits. The caller then takes the full path ([`super::messages_from_value`]),
//! which decides and words every verdict. So this module refuses nothing itself, and what it
//! reads is what the full path gives for the same text (checked by the tests below and by the
//! property tests over arbitrary messages and texts).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::message::{
    ContentBlock, LlmMessage, ReasoningBlock, Role, TextBlock, ToolResultBlock, ToolResultContent,
    ToolUseBlock,
};

use super::guard::guard_block;
use super::typing::convert_block;

/// The messages of `text` when it is a message list this reading takes (module docs), read
/// without a [`Value`]; `None` for anything else, which the caller reads the one full way.
pub fn direct_messages(text: &str) -> Option<Vec<LlmMessage>> {
    crate::limits::check_json_text(text.as_bytes()).ok()?;
    let mut reader = serde_json::Deserializer::from_str(text);
    let messages = reader.deserialize_seq(MessagesVisitor).ok()?;
    reader.end().ok()?;
    Some(messages)
}

/// Why the direct reading stopped; never shown (the full path words every verdict).
#[derive(Debug)]
struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read directly")
    }
}

impl std::error::Error for GiveUp {}

/// The error every visitor gives up with (serde_json keeps only its text, never shown).
fn give_up<E: de::Error>() -> E {
    E::custom(GiveUp)
}

/// Stores `value` in an empty `slot`; a field given twice gives up (the full path keeps the
/// last one, which this reading does not follow).
fn set<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    match slot {
        Some(_) => Err(give_up()),
        None => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// A JSON value that is a string: its text; anything else gives up.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_string(TextVisitor)
    }
}

struct TextVisitor;

impl Visitor<'_> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// A string, or `null` for none (an optional string field); anything else gives up.
struct OptionalText;

impl<'de> DeserializeSeed<'de> for OptionalText {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_option(OptionalTextVisitor)
    }
}

struct OptionalTextVisitor;

impl<'de> Visitor<'de> for OptionalTextVisitor {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        Text.deserialize(d).map(Some)
    }
}

/// A boolean; anything else gives up.
struct Flag;

impl<'de> DeserializeSeed<'de> for Flag {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_bool(FlagVisitor)
    }
}

struct FlagVisitor;

impl Visitor<'_> for FlagVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
}

/// The keys this reading takes; every other key's value is skipped, as the full path
/// drops unknown fields.
#[derive(Clone, Copy)]
enum Key {
    Role,
    Content,
    Type,
    Text,
    Id,
    Name,
    Input,
    Signature,
    ToolUseId,
    IsError,
    RedactedData,
    Provenance,
    Source,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_identifier(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "role" => Key::Role,
            "content" => Key::Content,
            "type" => Key::Type,
            "text" => Key::Text,
            "id" => Key::Id,
            "name" => Key::Name,
            "input" => Key::Input,
            "signature" => Key::Signature,
            "tool_use_id" => Key::ToolUseId,
            "is_error" => Key::IsError,
            "redactedData" => Key::RedactedData,
            "provenance" => Key::Provenance,
            "source" => Key::Source,
            _ => Key::Other,
        })
    }
}

struct MessagesVisitor;

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Vec<LlmMessage>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<LlmMessage>, A::Error> {
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(message) = seq.next_element_seed(MessageSeed)? {
            messages.push(message);
        }
        Ok(messages)
    }
}

struct MessageSeed;

impl<'de> DeserializeSeed<'de> for MessageSeed {
    type Value = LlmMessage;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<LlmMessage, D::Error> {
        d.deserialize_map(MessageSeed)
    }
}

impl<'de> Visitor<'de> for MessageSeed {
    type Value = LlmMessage;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LlmMessage, A::Error> {
        let mut role = None;
        let mut content = None;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Role => {
                    let role_word = map.next_value_seed(Text)?;
                    let value = match role_word.as_str() {
                        "user" => Role::User,
                        "assistant" => Role::Assistant,
                        _ => return Err(give_up()),
                    };
                    set(&mut role, value)?;
                }
                Key::Content => {
                    let blocks = map.next_value_seed(BlocksSeed)?;
                    set(&mut content, blocks)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (role, content) {
            (Some(role), Some(content)) => Ok(LlmMessage { role, content }),
            _ => Err(give_up()),
        }
    }
}

struct BlocksSeed;

impl<'de> DeserializeSeed<'de> for BlocksSeed {
    type Value = Vec<ContentBlock>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<ContentBlock>, D::Error> {
        d.deserialize_seq(BlocksSeed)
    }
}

impl<'de> Visitor<'de> for BlocksSeed {
    type Value = Vec<ContentBlock>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a block list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<ContentBlock>, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(block) = seq.next_element_seed(BlockSeed)? {
            blocks.push(block);
        }
        Ok(blocks)
    }
}

/// The fields a block may carry, as read (each at most once).
#[derive(Default)]
struct BlockFields {
    kind: Option<String>,
    text: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    signature: Option<Option<String>>,
    tool_use_id: Option<String>,
    is_error: Option<bool>,
    content: Option<Value>,
    source: Option<Value>,
    redacted_data: Option<Option<String>>,
    provenance: Option<Option<String>>,
}

impl BlockFields {
    /// The block these fields make, as the full path makes it; `None` for a type this reading
    /// leaves to that path, a field the type needs that is missing, or a block with media that
    /// the guard or the typing refuses.
    fn block(self) -> Option<ContentBlock> {
        let kind = self.kind?;
        Some(match kind.as_str() {
            "text" => ContentBlock::Text(TextBlock { text: self.text? }),
            "tool_use" => ContentBlock::ToolUse(ToolUseBlock {
                id: self.id?,
                name: self.name?,
                input: self.input?,
                signature: self.signature.flatten(),
            }),
            "tool_result" => match self.content? {
                Value::String(content) => ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id: self.tool_use_id?,
                    content: ToolResultContent::Text(content),
                    is_error: self.is_error,
                }),
                parts => {
                    let mut fields = serde_json::Map::new();
                    fields.insert("tool_use_id".into(), Value::String(self.tool_use_id?));
                    if let Some(is_error) = self.is_error {
                        fields.insert("is_error".into(), Value::Bool(is_error));
                    }
                    fields.insert("content".into(), parts);
                    return checked(kind, fields);
                }
            },
            "image" | "video" => {
                let mut fields = serde_json::Map::new();
                fields.insert("source".into(), self.source?);
                return checked(kind, fields);
            }
            "reasoning" => ContentBlock::Reasoning(ReasoningBlock {
                text: self.text?,
                signature: self.signature.flatten(),
                redacted_data: self.redacted_data.flatten(),
                provenance: self.provenance.flatten(),
            }),
            _ => return None,
        })
    }
}

/// A block with media, as the full path reads it: OMA's guard, then the typing, on its `type`
/// and the `fields` its type takes (the others are not looked at by either).
fn checked(kind: String, mut fields: serde_json::Map<String, Value>) -> Option<ContentBlock> {
    fields.insert("type".into(), Value::String(kind));
    let block = Value::Object(fields);
    guard_block(0, 0, &block).ok()?;
    convert_block(0, 0, block).ok()
}

struct BlockSeed;

impl<'de> DeserializeSeed<'de> for BlockSeed {
    type Value = ContentBlock;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ContentBlock, D::Error> {
        d.deserialize_map(BlockSeed)
    }
}

impl<'de> Visitor<'de> for BlockSeed {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        let mut f = BlockFields::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Type => set(&mut f.kind, map.next_value_seed(Text)?)?,
                Key::Text => set(&mut f.text, map.next_value_seed(Text)?)?,
                Key::Id => set(&mut f.id, map.next_value_seed(Text)?)?,
                Key::Name => set(&mut f.name, map.next_value_seed(Text)?)?,
                Key::Input => set(&mut f.input, map.next_value::<Value>()?)?,
                Key::Signature => set(&mut f.signature, map.next_value_seed(OptionalText)?)?,
                Key::ToolUseId => set(&mut f.tool_use_id, map.next_value_seed(Text)?)?,
                Key::IsError => set(&mut f.is_error, map.next_value_seed(Flag)?)?,
                Key::Content => set(&mut f.content, map.next_value::<Value>()?)?,
                Key::Source => set(&mut f.source, map.next_value::<Value>()?)?,
                Key::RedactedData => set(&mut f.redacted_data, map.next_value_seed(OptionalText)?)?,
                Key::Provenance => set(&mut f.provenance, map.next_value_seed(OptionalText)?)?,
                Key::Role | Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        f.block().ok_or_else(give_up)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::json::messages_from_json;

    /// The direct reading of `text`, which must be what the full path gives.
    fn agrees(text: &str) -> Option<Vec<LlmMessage>> {
        let direct = direct_messages(text);
        if let Some(messages) = &direct {
            assert_eq!(
                Ok(messages),
                messages_from_json(text).as_ref(),
                "the direct reading differs from the full path for {text}"
            );
        }
        direct
    }

    #[test]
    fn reads_every_block_type_as_the_full_path_does() {
        let cases = [
            json!([]),
            json!([{"role": "user", "content": []}]),
            json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
            json!([{"content": [{"text": "a\"b\\u00e9\n", "type": "text"}], "role": "assistant", "extra": {"x": [1, 2]}}]),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                {"role": "assistant", "content": [
                    {"type": "reasoning", "text": "think", "signature": "sig", "redactedData": null, "provenance": "anthropic"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "t1", "name": "get", "input": {"b": 1, "a": [true, null, 1.5e300]}, "signature": null}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "", "is_error": true},
                    {"type": "tool_result", "tool_use_id": "t3", "content": "ok", "is_error": false, "name": "x"}
                ]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "", "name": "n", "input": null}]},
            ]),
            json!([{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"source": {"url": "https://x.example/a.png", "media_type": "image/png", "type": "url"}, "type": "image"},
                {"type": "video", "source": {"type": "url", "media_type": "video/mp4", "url": "https://x.example/v.mp4"}},
                {"type": "tool_result", "tool_use_id": "t", "is_error": false, "content": [
                    {"type": "text", "text": "x"},
                    {"type": "image", "source": {"type": "url", "media_type": "image/png", "url": "https://x.example/s.png"}},
                    {"type": "file", "filename": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "x": 1}
                ]}
            ]}]),
            json!([{"role": "user", "content": [{"type": "text", "text": "x", "input": {}, "tool_use_id": "t"}]}]),
        ];
        for case in cases {
            let text = case.to_string();
            assert!(agrees(&text).is_some(), "not read directly: {text}");
        }
        let spaced = "[ {\"role\" : \"user\" ,\n \"content\" : [ { \"type\" : \"text\" , \"text\" : \"hi\" } ] } ]\n";
        assert!(agrees(spaced).is_some());
    }

    #[test]
    fn leaves_everything_else_to_the_full_path() {
        let cases = [
            "\"hi\"",
            "{}",
            "null",
            "[1]",
            "[{\"role\": \"user\"}]",
            "[{\"content\": []}]",
            "[{\"role\": \"system\", \"content\": []}]",
            "[{\"role\": 1, \"content\": []}]",
            "[{\"role\": \"user\", \"content\": \"hi\"}]",
            "[{\"role\": \"user\", \"role\": \"assistant\", \"content\": []}]",
            "[{\"role\": \"user\", \"content\": [], \"content\": []}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\", \"text\": \"b\"}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]",
            "[{\"role\": \"user\", \"content\": [{\"text\": \"a\"}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": 1, \"text\": \"a\"}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 1}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"video\", \"source\": {}}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {\"type\": \"url\", \"media_type\": \"image/png\", \"url\": \"ftp://x\"}}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": \"image/png\"}}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}], \"is_error\": true}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": [{\"type\": \"file\", \"filename\": \" \", \"source\": {\"type\": \"url\", \"media_type\": \"application/pdf\", \"url\": \"https://x.example/a\"}}]}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": 3}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": []}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": \"x\", \"is_error\": null}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t\", \"content\": \"x\", \"is_error\": \"yes\"}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"content\": \"x\"}]}]",
            "[{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": \"t\", \"name\": \"n\"}]}]",
            "[{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": \"t\", \"name\": \"n\", \"input\": {}, \"signature\": 1}]}]",
            "[{\"role\": \"assistant\", \"content\": [{\"type\": \"reasoning\", \"text\": \"t\", \"provenance\": 2}]}]",
            "[{\"role\": \"user\", \"content\": [{\"type\": \"thinking\", \"text\": \"t\"}]}]",
            // A field of another block type's, of a value this reading does not take for it.
            "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\", \"id\": 3}]}]",
            "[{\"role\": \"user\", \"content\": [null]}]",
            "[{\"role\": \"user\", \"content\": []}] x",
            "[{\"role\": \"user\", \"content\": []}",
            "",
        ];
        for text in cases {
            assert!(agrees(text).is_none(), "read directly: {text}");
        }
        // Past the value limit: left to the full path, which refuses it by name.
        let many = format!(
            "[{{\"role\": \"user\", \"content\": [{{\"type\": \"tool_use\", \"id\": \"t\", \"name\": \"n\", \"input\": [{}0]}}]}}]",
            "0,".repeat(crate::limits::MAX_JSON_VALUES)
        );
        assert!(agrees(&many).is_none());
        assert!(messages_from_json(&many).is_err());
    }
}
