//! What a trace may hold (`docs/observability.md#capture-and-sensitive-data`): OMA's capture
//! policy (`TraceCapturePolicy`) and its sensitive-data processing (OMA's
//! `SensitiveDataProcessor`), which every record of a run passes before a host sees it.
//!
//! Processing reads a record's JSON and gives back the record a sink may keep, or none. In
//! OMA's order: an attribute allowlist when one is given; attributes whose names say they hold
//! a credential or reasoning are removed, always; attributes whose names say they hold content
//! (a prompt, a completion, a tool's input or output) are removed unless the policy captures
//! that content; every other string is redacted ([`redact_secrets`]) and cut to
//! `maxContentChars`; a `stream_chunk` event is dropped when the policy captures no stream
//! events; a span end's status message is redacted and cut to 256 characters, its error's
//! message to 1024, or left out under `errorMessage: "code-only"`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use serde::de::{Deserialize, IgnoredAny};
use serde_json::{Map, Value};

use crate::agent::outcome::truncate_units;
use crate::agent::redact::{may_hold_secret, redact_secrets};
use crate::error::{range_error, type_error};
use crate::json::object::{Object, ShapeError};
use crate::json::writer::Writer;
use crate::Error;

/// Why a processor's options or a capture policy were refused, naming the option: an option
/// that does not exist or a value of the wrong type (JavaScript's `TypeError`), or a value
/// outside the option's choices (`RangeError`), so that each host raises its own class for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An unknown option, or a value of a type the option cannot hold.
    Type(ShapeError),
    /// A value of the right type that is not one of the option's choices.
    Range(ShapeError),
}

impl From<ShapeError> for Refusal {
    fn from(error: ShapeError) -> Self {
        Refusal::Type(error)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Type(error) | Refusal::Range(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for Refusal {}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Type(error) => type_error(error.to_string()),
            Refusal::Range(error) => range_error(error.to_string()),
        }
    }
}

/// Whether one kind of content may be captured (OMA's `'none' | 'redacted'`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Content {
    /// Never (the default).
    #[default]
    None,
    /// Yes, with secrets redacted and cut to `maxContentChars`.
    Redacted,
}

/// Which stream events a trace keeps (OMA's `streamEvents`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamEvents {
    /// No `stream_chunk` events.
    None,
    /// The first piece of each streamed answer only, as a `first_chunk` event (the default).
    #[default]
    First,
    /// A `stream_chunk` event for every event a streamed run delivers too.
    All,
}

/// OMA's `TraceCapturePolicy`: what content a trace may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturePolicy {
    /// Prompts.
    pub prompt: Content,
    /// Completions.
    pub completion: Content,
    /// Tool inputs (OMA 1.18.0: `oma.tool.input` on `execute_tool` spans).
    pub tool_input: Content,
    /// Tool outputs (OMA 1.18.0: `oma.tool.output` on `execute_tool` spans).
    pub tool_output: Content,
    /// Whether an error's message is left out (`errorMessage: "code-only"`); kept, redacted,
    /// by default.
    pub error_code_only: bool,
    /// OMA's `stack` flag: whether stack traces may be kept. The core makes none, so it changes
    /// nothing here; it is read so that a policy that sets it is taken whole.
    pub stack: bool,
    /// Which stream events are kept.
    pub stream_events: StreamEvents,
    /// The most characters (UTF-16 code units) any string attribute keeps; 4096 by default.
    pub max_content_chars: usize,
}

impl Default for CapturePolicy {
    fn default() -> Self {
        CapturePolicy {
            prompt: Content::None,
            completion: Content::None,
            tool_input: Content::None,
            tool_output: Content::None,
            error_code_only: false,
            stack: false,
            stream_events: StreamEvents::First,
            max_content_chars: 4096,
        }
    }
}

impl CapturePolicy {
    /// The policy of OMA's JSON (`{"prompt"?, "completion"?, "toolInput"?, "toolOutput"?,
    /// "errorMessage"?, "stack"?, "streamEvents"?, "maxContentChars"?}`, read under `path`
    /// for messages); any other key or value is refused, naming it.
    pub fn from_object(mut object: Object) -> Result<Self, Refusal> {
        let mut policy = CapturePolicy::default();
        let content = |object: &mut Object, key: &'static str| -> Result<Content, Refusal> {
            match object.string(key)?.as_deref() {
                None | Some("none") => Ok(Content::None),
                Some("redacted") => Ok(Content::Redacted),
                Some(_) => Err(Refusal::Range(
                    object.invalid(key, "must be \"none\" or \"redacted\""),
                )),
            }
        };
        policy.prompt = content(&mut object, "prompt")?;
        policy.completion = content(&mut object, "completion")?;
        policy.tool_input = content(&mut object, "toolInput")?;
        policy.tool_output = content(&mut object, "toolOutput")?;
        policy.error_code_only = match object.string("errorMessage")?.as_deref() {
            None | Some("redacted") => false,
            Some("code-only") => true,
            Some(_) => {
                return Err(Refusal::Range(
                    object.invalid("errorMessage", "must be \"code-only\" or \"redacted\""),
                ))
            }
        };
        policy.stack = object.bool("stack")?.unwrap_or(false);
        policy.stream_events = match object.string("streamEvents")?.as_deref() {
            None | Some("first") => StreamEvents::First,
            Some("none") => StreamEvents::None,
            Some("all") => StreamEvents::All,
            Some(_) => {
                return Err(Refusal::Range(
                    object.invalid("streamEvents", "must be \"none\", \"first\" or \"all\""),
                ))
            }
        };
        if let Some(max) = object.take("maxContentChars") {
            policy.max_content_chars = max
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    Refusal::Range(
                        object.invalid("maxContentChars", "must be a non-negative integer"),
                    )
                })?;
        }
        object.finish()?;
        Ok(policy)
    }

    fn captures(&self, content: ContentKind) -> bool {
        let setting = match content {
            ContentKind::Prompt => self.prompt,
            ContentKind::Completion => self.completion,
            ContentKind::ToolInput => self.tool_input,
            ContentKind::ToolOutput => self.tool_output,
        };
        setting == Content::Redacted
    }
}

/// OMA's `SensitiveDataProcessor`: the capture policy, and optionally an exact allowlist of
/// attribute names, applied to records ([`SensitiveData::process`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SensitiveData {
    /// The only attribute names kept, when given (before anything else is removed).
    pub allowlist: Option<Vec<String>>,
    /// What content is kept.
    pub capture: CapturePolicy,
}

/// The most characters a status message keeps.
const MAX_STATUS_MESSAGE: usize = 256;
/// The most characters an error message keeps.
const MAX_ERROR_MESSAGE: usize = 1024;

impl SensitiveData {
    /// The processor of OMA's options (`{"attributeAllowlist"?: [names], "capture"?: policy}`);
    /// anything else is refused, naming the option.
    pub fn from_value(value: Value) -> Result<Self, Refusal> {
        let mut object = Object::strict(value)?;
        let allowlist = match object.array("attributeAllowlist")? {
            None => None,
            Some(names) => Some(
                names
                    .into_iter()
                    .map(|name| match name {
                        Value::String(name) => Ok(name),
                        _ => Err(Refusal::Type(
                            object.invalid("attributeAllowlist", "must be a list of strings"),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let capture = match object.object("capture")? {
            Some(capture) => CapturePolicy::from_object(capture)?,
            None => CapturePolicy::default(),
        };
        object.finish()?;
        Ok(SensitiveData { allowlist, capture })
    }

    /// `record` (OMA's record JSON) as a sink may keep it, or `None` when it is dropped (a
    /// `stream_chunk` under `streamEvents: "none"`). A value that is no record comes back as
    /// it is: processing never fails.
    pub fn process(&self, record: Value) -> Option<Value> {
        let Value::Object(mut record) = record else {
            return Some(record);
        };
        let record_type = record
            .get("recordType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if self.drops(&record_type, record.get("name").and_then(Value::as_str)) {
            return None;
        }
        if let Some(Value::Object(attributes)) = record.get_mut("attributes") {
            let taken = std::mem::take(attributes);
            *attributes = self.attributes(taken);
        }
        if record_type == "span_end" {
            if let Some(status) = record.get_mut("status") {
                end_status(status);
            }
            if let Some(error) = record.get_mut("error") {
                self.end_error(error);
            }
        }
        Some(Value::Object(record))
    }

    /// Whether a record of `record_type` named `name` is dropped: a `stream_chunk` event when
    /// no stream events are captured.
    fn drops(&self, record_type: &str, name: Option<&str>) -> bool {
        record_type == "span_event"
            && name == Some("stream_chunk")
            && self.capture.stream_events == StreamEvents::None
    }

    /// Whether an attribute named `key` is kept: allowed by the allowlist, naming no credential
    /// nor reasoning, and holding no content the policy leaves out.
    #[inline(never)]
    fn keeps(&self, key: &str) -> bool {
        self.allowlist
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|name| name == key))
            && !is_credential(key)
            && !is_reasoning(key)
            && content_kind(key).is_none_or(|kind| self.capture.captures(kind))
    }

    /// A span end's error as it is kept: its message redacted and cut, or left out when it is
    /// empty, not a string, or the policy keeps error codes only.
    #[inline(never)]
    fn end_error(&self, error: &mut Value) {
        let Value::Object(error) = error else {
            return;
        };
        let keep = match error.get("message") {
            Some(Value::String(message)) if !message.is_empty() => (!self.capture.error_code_only)
                .then(|| truncate_units(&redact_secrets(message), MAX_ERROR_MESSAGE)),
            _ => None,
        };
        match keep {
            Some(message) => {
                error.insert("message".into(), Value::String(message));
            }
            None => {
                error.shift_remove("message");
            }
        }
    }

    fn attributes(&self, mut attributes: Map<String, Value>) -> Map<String, Value> {
        let max = self.capture.max_content_chars;
        // In place: the map is not built again, and a value kept as it is not copied.
        attributes.retain(|key, value| {
            if !self.keeps(key) {
                return false;
            }
            safe_value(value, max);
            true
        });
        attributes
    }

    /// [`SensitiveData::process`] of a record's JSON text, reading only what the rule reads
    /// (the record's type and name, its attributes, a span end's status and error) and copying
    /// every other member as its text, in its place; `Some(None)` for a dropped record. `None`
    /// when the text is not one this reading takes (not JSON, not an object, an `attributes`
    /// that is no object, a member the rule reads given twice, an escaped surrogate, a number
    /// with an exponent or of many digits, nesting past the full reading's depth: whatever the
    /// full reading may refuse), which the caller then reads whole: the same verdicts, at the
    /// cost of a [`Value`]. A record written compactly that the rule leaves as it is comes back
    /// as the same text, byte for byte, so a host can tell that nothing changed by comparing
    /// the two.
    fn process_text(&self, text: &str) -> Option<Option<String>> {
        if has_escaped_surrogate(text)
            || crate::limits::check_json_text(text.as_bytes()).is_err()
            || !is_json(text)
        {
            return None;
        }
        let members = members(text)?;
        let find = |name: &str| -> Option<Option<&str>> {
            let mut found = members.iter().filter(|member| member.key == name);
            let first = found.next().map(|member| member.value);
            found.next().is_none().then_some(first)
        };
        let attributes = find("attributes")?.filter(|raw| raw.starts_with('{'))?;
        let record_type = find("recordType")?.and_then(string_of);
        let record_type = record_type.as_deref().unwrap_or_default();
        let name = find("name")?.and_then(string_of);
        if self.drops(record_type, name.as_deref()) {
            return Some(None);
        }
        let span_end = record_type == "span_end";
        if span_end {
            // Read below only when given once.
            find("status")?;
            find("error")?;
        }
        let mut out = Writer::with_capacity(text.len());
        out.begin_object();
        for member in &members {
            member.write_key(&mut out);
            match member.key.as_ref() {
                "attributes" => self.write_attributes(&mut out, attributes)?,
                "status" | "error" if span_end => {
                    let mut parsed = parse(member.value)?;
                    if member.key == "status" {
                        end_status(&mut parsed);
                    } else {
                        self.end_error(&mut parsed);
                    }
                    out.json(&parsed);
                }
                _ => out.json_text(member.value),
            }
        }
        out.end_object();
        Some(Some(out.finish()))
    }

    /// Writes a record's `attributes` object (its JSON text) as it is kept: the attributes
    /// [`SensitiveData::keeps`] in their order, strings and lists of strings made safe, every
    /// other value copied as its text. `None` when the text is not read.
    #[inline(never)]
    fn write_attributes(&self, out: &mut Writer, attributes: &str) -> Option<()> {
        let max = self.capture.max_content_chars;
        out.begin_object();
        for member in members(attributes)? {
            if !self.keeps(&member.key) {
                continue;
            }
            member.write_key(out);
            let json = member.value;
            if json.starts_with('"') {
                let text = string_of(json)?;
                if needs_safety(&text, max) {
                    let mut text = text.into_owned();
                    safe_text(&mut text, max);
                    out.string(&text);
                    continue;
                }
            } else if json.starts_with('[') {
                let mut parsed = parse(json)?;
                safe_value(&mut parsed, max);
                out.json(&parsed);
                continue;
            }
            out.json_text(json);
        }
        out.end_object();
        Some(())
    }
}

/// A span end's status as it is kept: a message that is not empty redacted and cut.
#[inline(never)]
fn end_status(status: &mut Value) {
    if let Some(Value::String(message)) = status.get_mut("message") {
        if !message.is_empty() {
            *message = truncate_units(&redact_secrets(message), MAX_STATUS_MESSAGE);
        }
    }
}

/// An attribute's value as a trace keeps it: a string, or each string of a list of strings,
/// made safe ([`safe_text`]); any other value as it is.
#[inline(never)]
fn safe_value(value: &mut Value, max: usize) {
    match value {
        Value::String(text) => safe_text(text, max),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            for item in items {
                if let Value::String(text) = item {
                    safe_text(text, max);
                }
            }
        }
        _ => {}
    }
}

/// Whether a JSON text may hold an escaped UTF-16 surrogate (`\uD800` to `\uDFFF`): the full
/// reading refuses a lone one, which the reading that copies values as text would pass on.
#[inline(never)]
fn has_escaped_surrogate(text: &str) -> bool {
    text.contains('\\')
        && text.as_bytes().windows(4).any(|w| {
            w[0] == b'\\'
                && w[1] == b'u'
                && matches!(w[2], b'd' | b'D')
                && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
        })
}

/// Whether `text` is one JSON value (serde_json's check, without building it).
fn is_json(text: &str) -> bool {
    let mut reader = serde_json::Deserializer::from_str(text);
    IgnoredAny::deserialize(&mut reader).is_ok() && reader.end().is_ok()
}

/// One member of a JSON object as it stands in the text: its key (borrowed when it has no
/// escapes) and its value's JSON text.
struct Member<'a> {
    key: Cow<'a, str>,
    value: &'a str,
}

impl Member<'_> {
    /// Writes the key: as it stood in the text when it had no escapes, else escaped anew.
    fn write_key(&self, out: &mut Writer) {
        match &self.key {
            Cow::Borrowed(key) => out.plain_key(key),
            Cow::Owned(key) => out.key(key),
        }
    }
}

/// The most containers a value copied as its text may nest, as many as the full reading
/// takes (serde_json's recursion limit).
const MAX_DEPTH: usize = 127;

/// The members of the JSON object `text`, in their order, found by a scan that takes `text`
/// to be JSON ([`is_json`] said so); `None` when it is no object, or a value is one the full
/// reading may refuse ([`scalar_end`], [`MAX_DEPTH`]).
#[inline(never)]
fn members(text: &str) -> Option<Vec<Member<'_>>> {
    let bytes = text.as_bytes();
    let mut members = Vec::with_capacity(16);
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(members);
    }
    loop {
        let key_end = string_end(bytes, at)?;
        let key = string_of(text.get(at..key_end)?)?;
        at = skip_space(bytes, key_end);
        // The `:`.
        at = skip_space(bytes, at + 1);
        let value_end = value_end(bytes, at)?;
        members.push(Member {
            key,
            value: text.get(at..value_end)?,
        });
        at = skip_space(bytes, value_end);
        match bytes.get(at)? {
            b',' => at = skip_space(bytes, at + 1),
            _ => return Some(members),
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// Where the string that opens at `at` ends (after its closing quote).
#[inline(never)]
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut at = at + 1;
    loop {
        at += bytes
            .get(at..)?
            .iter()
            .position(|&b| b == b'"' || b == b'\\')?;
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        at += 2;
    }
}

/// Where the value that starts at `at` ends.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0;
            let mut at = at;
            loop {
                match bytes.get(at)? {
                    b'"' => at = string_end(bytes, at)?,
                    b'{' | b'[' => {
                        depth += 1;
                        if depth > MAX_DEPTH {
                            return None;
                        }
                        at += 1;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        at += 1;
                        if depth == 0 {
                            return Some(at);
                        }
                    }
                    b'-' | b'0'..=b'9' => at = scalar_end(bytes, at)?,
                    _ => at += 1,
                }
            }
        }
        _ => scalar_end(bytes, at),
    }
}

/// Where the number or literal that starts at `at` ends; `None` for a number the full reading
/// may find out of range (one with an exponent, or of more than 300 characters).
#[inline(never)]
fn scalar_end(bytes: &[u8], at: usize) -> Option<usize> {
    let len = bytes
        .get(at..)?
        .iter()
        .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(bytes.len() - at);
    let scalar = &bytes[at..at + len];
    let number = matches!(scalar.first(), Some(b'-' | b'0'..=b'9'));
    (!number || (len <= 300 && !scalar.iter().any(|b| matches!(b, b'e' | b'E'))))
        .then_some(at + len)
}

/// The value of a JSON text: one call of the core's parser for every part read here.
#[inline(never)]
fn parse(json: &str) -> Option<Value> {
    crate::json::parse_value(json).ok()
}

/// The string a JSON value's text holds, borrowed when it has no escapes; `None` for another
/// value.
#[inline(never)]
fn string_of(json: &str) -> Option<Cow<'_, str>> {
    let inner = json.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    match parse(json)? {
        Value::String(text) => Some(Cow::Owned(text)),
        _ => None,
    }
}

/// The codec's `process-trace-record`: the processor of `options` (OMA's
/// `SensitiveDataProcessorOptions` as JSON: `attributeAllowlist`, `capture`) checked and, when
/// `record` is given, applied to it (one of OMA's trace records as JSON): the record as the
/// processor's sink gets it, as JSON, or `None` when the processor drops it. Without a record
/// only the options are checked, as a processor's constructor checks them.
///
/// Options that are not JSON or not OMA's are refused naming the option (a `TypeError` or a
/// `RangeError`, [`Refusal`]); a record that is not a JSON object with an `attributes` object is
/// refused with a `TypeError`, which a host takes as OMA's processor failing on the record: the
/// record is dropped, the run goes on.
pub fn process_record_json(options: &str, record: Option<&str>) -> Result<Option<String>, Error> {
    thread_local! {
        /// The last options read on this thread and their processor: a host's processor sends
        /// the same options with every record, and reading them was a fifth of the call.
        static LAST: RefCell<Option<(String, SensitiveData)>> = const { RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        let processor = match &mut *last {
            Some((read, processor)) if read == options => processor,
            slot => {
                let value = crate::json::from_str(options).map_err(|e| {
                    type_error(format!("the processor's options are not JSON: {e}"))
                })?;
                let processor = SensitiveData::from_value(value)?;
                &slot.insert((options.to_owned(), processor)).1
            }
        };
        match record {
            Some(record) => process_with(processor, record),
            None => Ok(None),
        }
    })
}

/// One record's text through `processor` ([`process_record_json`]).
fn process_with(processor: &SensitiveData, record: &str) -> Result<Option<String>, Error> {
    if let Some(processed) = processor.process_text(record) {
        return Ok(processed);
    }
    let record = crate::json::from_str(record)
        .map_err(|e| type_error(format!("the trace record is not JSON: {e}")))?;
    if !record.get("attributes").is_some_and(Value::is_object) {
        return Err(type_error(
            "a trace record must be an object with an `attributes` object",
        ));
    }
    Ok(processor.process(record).map(|record| record.to_string()))
}

/// A string attribute as a trace keeps it: secrets redacted, then cut to `max` characters. Most
/// (names, models, ids) hold nothing a redaction rule could match and fit: left as they are.
#[inline(never)]
fn safe_text(text: &mut String, max: usize) {
    if needs_safety(text, max) {
        *text = truncate_units(&redact_secrets(text), max);
    }
}

/// Whether [`safe_text`] may change `text`: it may hold a secret or be too long (a text of at
/// most `max` bytes has at most `max` UTF-16 units: nothing to cut).
fn needs_safety(text: &str, max: usize) -> bool {
    text.len() > max || may_hold_secret(text)
}

/// Which content an attribute holds, by its name (OMA's rule: a name that mentions a prompt, a
/// completion, a tool's input or arguments, or its output or result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContentKind {
    Prompt,
    Completion,
    ToolInput,
    ToolOutput,
}

fn content_kind(key: &str) -> Option<ContentKind> {
    // The words are ASCII, so ASCII case folding finds them as JavaScript's `toLowerCase` does.
    let has = |part: &str| contains_folded(key, part);
    if has("prompt") {
        Some(ContentKind::Prompt)
    } else if has("completion") {
        Some(ContentKind::Completion)
    } else if has("tool.input") || has("tool_input") || has("tool.arguments") {
        Some(ContentKind::ToolInput)
    } else if has("tool.output") || has("tool_output") || has("tool.result") {
        Some(ContentKind::ToolOutput)
    } else {
        None
    }
}

/// Whether `key`, ASCII letters lowercased and `-` read as `_`, contains `part` (lowercase
/// ASCII): the name rule's comparison, made without a folded copy of the key. Not inlined: the
/// rule asks for eight words, and a copy per word would weigh a kilobyte of the component.
#[inline(never)]
fn contains_folded(key: &str, part: &str) -> bool {
    let fold = |byte: u8| {
        if byte == b'-' {
            b'_'
        } else {
            byte.to_ascii_lowercase()
        }
    };
    let part = part.as_bytes();
    key.as_bytes()
        .windows(part.len())
        .any(|window| window.iter().zip(part).all(|(&a, &b)| fold(a) == b))
}

/// Whether `c` separates the words of an attribute name.
fn separator(c: u8) -> bool {
    matches!(c, b'.' | b'_' | b'-')
}

/// Lowercase words (ASCII letters and separators) by their first letter, so that a name is
/// compared only with the words that can start where it stands: a record's attributes pass
/// these checks one by one, and the reasoning words alone are over a hundred.
struct Words {
    by_first: [Vec<Box<[u8]>>; 26],
}

impl Words {
    fn new(words: Vec<String>) -> Self {
        let mut by_first: [Vec<Box<[u8]>>; 26] = Default::default();
        for word in words {
            let bytes = word.into_bytes().into_boxed_slice();
            by_first[usize::from(bytes[0] - b'a')].push(bytes);
        }
        Words { by_first }
    }

    /// The words that start with `first` (a letter of either case), none for any other byte.
    fn starting_with(&self, first: u8) -> &[Box<[u8]>] {
        let first = first.to_ascii_lowercase();
        if first.is_ascii_lowercase() {
            &self.by_first[usize::from(first - b'a')]
        } else {
            &[]
        }
    }
}

/// Whether one of `words` stands in `key` as a word of its own: at its start or after a
/// separator, and at its end or before one (ASCII letters compared without case).
fn has_word(key: &str, words: &Words) -> bool {
    let bytes = key.as_bytes();
    (0..bytes.len())
        .filter(|&at| at == 0 || separator(bytes[at - 1]))
        .any(|at| {
            words.starting_with(bytes[at]).iter().any(|word| {
                let end = at + word.len();
                end <= bytes.len()
                    && bytes[at..end].eq_ignore_ascii_case(word)
                    && (end == bytes.len() || separator(bytes[end]))
            })
        })
}

/// `a` then `b`, with each of `joins` between them.
fn joined(a: &[String], joins: &[&str], b: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for first in a {
        for join in joins {
            for second in b {
                out.push(format!("{first}{join}{second}"));
            }
        }
    }
    out
}

/// Whether an attribute name says it holds a credential: `authorization`, `cookie`,
/// `set_cookie`, `api key`, `password`, `passwd`, `secret`, `access token`, `refresh token` or
/// `private key` as a word of its own (the two-word names joined by `_`, `-` or nothing).
fn is_credential(key: &str) -> bool {
    static WORDS: std::sync::OnceLock<Words> = std::sync::OnceLock::new();
    let words = WORDS.get_or_init(|| {
        let mut words: Vec<String> = [
            "authorization",
            "cookie",
            "set_cookie",
            "password",
            "passwd",
            "secret",
        ]
        .iter()
        .map(|w| (*w).to_owned())
        .collect();
        for (a, b) in [
            ("api", "key"),
            ("access", "token"),
            ("refresh", "token"),
            ("private", "key"),
        ] {
            words.extend(joined(&[a.to_owned()], &["_", "-", ""], &[b]));
        }
        Words::new(words)
    });
    has_word(key, words)
}

/// Whether an attribute name says it holds reasoning: `reasoning`, `thinking`, `chain of
/// thought` or `signed reasoning`, then a separator, then `content`, `text` or `data`, as words
/// of their own. Reasoning is never kept, whatever the policy.
fn is_reasoning(key: &str) -> bool {
    static WORDS: std::sync::OnceLock<Words> = std::sync::OnceLock::new();
    let words = WORDS.get_or_init(|| {
        let optional = ["_", "-", ""];
        let mut heads = vec!["reasoning".to_owned(), "thinking".to_owned()];
        let chain_of = joined(&["chain".to_owned()], &optional, &["of"]);
        heads.extend(joined(&chain_of, &optional, &["thought"]));
        heads.extend(joined(&["signed".to_owned()], &optional, &["reasoning"]));
        Words::new(joined(
            &heads,
            &[".", "_", "-"],
            &["content", "text", "data"],
        ))
    });
    has_word(key, words)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// OMA's two name rules as regular expressions, the oracle for the scanners.
    fn oracle() -> (regex_lite::Regex, regex_lite::Regex) {
        let credential = regex_lite::Regex::new(
            r"(?i)(^|[._-])(authorization|cookie|set_cookie|api[_-]?key|password|passwd|secret|access[_-]?token|refresh[_-]?token|private[_-]?key)($|[._-])",
        )
        .expect("a pattern");
        let reasoning = regex_lite::Regex::new(
            r"(?i)(^|[._-])(reasoning|thinking|chain[_-]?of[_-]?thought|signed[_-]?reasoning)[._-](content|text|data)($|[._-])",
        )
        .expect("a pattern");
        (credential, reasoning)
    }

    #[test]
    fn names_are_read_as_omas_patterns_read_them() {
        let (credential, reasoning) = oracle();
        for key in [
            "http.authorization",
            "db.password",
            "apikey",
            "x-api-key",
            "api__key",
            "my_secret_value",
            "secretive",
            "oma.reasoning.content",
            "thinking-text",
            "chain_of-thought.data",
            "chainofthought_text",
            "signed-reasoning.content.x",
            "reasoning.contents",
            "oma.reasoning",
            "PASSWORD",
            "set-cookie",
            "set_cookie",
        ] {
            assert_eq!(is_credential(key), credential.is_match(key), "{key}");
            assert_eq!(is_reasoning(key), reasoning.is_match(key), "{key}");
        }
    }

    proptest! {
        #[test]
        fn the_scanners_agree_with_the_patterns(
            key in "([a-zA-Z]{0,3}[._-]?(api|key|access|token|secret|pass(wd|word)|cookie|set|reasoning|thinking|chain|of|thought|signed|content|text|data)?){0,5}"
        ) {
            let (credential, reasoning) = oracle();
            prop_assert_eq!(is_credential(&key), credential.is_match(&key), "{}", key);
            prop_assert_eq!(is_reasoning(&key), reasoning.is_match(&key), "{}", key);
        }

        /// The content rule's folded comparison finds what a folded copy of the name holds.
        #[test]
        fn content_names_are_read_as_folded_copies(
            key in "([a-zA-Z]{0,3}[._-]?(prompt|completion|tool|input|output|arguments|result)?){0,4}"
        ) {
            let normal = key.to_ascii_lowercase().replace('-', "_");
            for part in ["prompt", "completion", "tool.input", "tool_input", "tool.arguments", "tool.output", "tool_output", "tool.result"] {
                prop_assert_eq!(contains_folded(&key, part), normal.contains(part), "{} {}", key, part);
            }
        }
    }

    /// Any JSON value, small, with the names and texts the rule looks at among the others.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(Value::from),
            "(token=abc123456789|Bearer abcdefghijkl|x|\\\\|\"|\u{e9}|\u{1f600}| ){0,3}"
                .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        "(db.password|oma.prompt|a|b\"|\u{e9}|thinking.text|message)",
                        inner
                    ),
                    0..4
                )
                .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// A record with any members, written compactly or with spaces, is read as the full
        /// reading reads it; no text makes the reading panic, and what it takes the full
        /// reading takes too.
        #[test]
        fn the_text_reading_agrees_on_any_record(
            record_type in "(span_start|span_event|span_end|other)",
            name in "(stream_chunk|chat|\u{e9})",
            attributes in prop::collection::vec(("(oma.prompt|db.password|oma.note|a\"b|thinking.text|x)", any_json()), 0..5),
            status in any_json(),
            error in any_json(),
            extra in prop::collection::vec(("(x|\u{e9}|id)", any_json()), 0..3),
            pretty in any::<bool>(),
            streams in any::<bool>(),
        ) {
            let mut record = Map::new();
            for (key, value) in extra {
                record.insert(key, value);
            }
            record.insert("recordType".into(), Value::from(record_type));
            record.insert("name".into(), Value::from(name));
            record.insert("attributes".into(), Value::Object(attributes.into_iter().collect()));
            record.insert("status".into(), status);
            record.insert("error".into(), error);
            let record = Value::Object(record);
            let text = if pretty {
                serde_json::to_string_pretty(&record).expect("JSON")
            } else {
                record.to_string()
            };
            let options = if streams { "{}" } else { r#"{"capture":{"streamEvents":"none","maxContentChars":8}}"# };
            let processor = SensitiveData::from_value(serde_json::from_str(options).expect("JSON")).expect("options");
            let full = processor.process(record).map(|value| value.to_string());
            let read = process_record_json(options, Some(&text)).expect("a record");
            prop_assert_eq!(read.map(|text| serde_json::from_str::<Value>(&text).expect("JSON")), full.map(|text| serde_json::from_str::<Value>(&text).expect("JSON")));
        }

        #[test]
        fn no_text_makes_the_reading_panic(text in "[{}\\[\\]\",: a-z0-9.eE+\\\\-]{0,40}") {
            let processor = SensitiveData::default();
            if let Some(read) = processor.process_text(&text) {
                let full = crate::json::from_str(&text).expect("the full reading takes it");
                prop_assert_eq!(
                    read.map(|text| serde_json::from_str::<Value>(&text).expect("JSON")),
                    processor.process(full)
                );
            }
        }
    }

    #[test]
    fn policies_are_read_and_bad_ones_refused_by_name() {
        let read = |value: Value| SensitiveData::from_value(value).map_err(|e| e.to_string());
        let full = read(json!({"capture": {
            "prompt": "redacted", "toolOutput": "redacted", "errorMessage": "code-only",
            "stack": true, "streamEvents": "all", "maxContentChars": 12,
        }}))
        .expect("a policy");
        assert_eq!(full.capture.prompt, Content::Redacted);
        assert_eq!(full.capture.completion, Content::None);
        assert!(full.capture.error_code_only && full.capture.stack);
        assert_eq!(full.capture.stream_events, StreamEvents::All);
        assert_eq!(full.capture.max_content_chars, 12);
        assert_eq!(read(json!({})).expect("defaults"), SensitiveData::default());
        for (bad, named) in [
            (json!({"capture": {"prompt": "full"}}), "`capture.prompt`"),
            (
                json!({"capture": {"streamEvents": "some"}}),
                "`capture.streamEvents`",
            ),
            (
                json!({"capture": {"maxContentChars": -1}}),
                "`capture.maxContentChars`",
            ),
            (
                json!({"capture": {"maxContentChars": 1.5}}),
                "`capture.maxContentChars`",
            ),
            (
                json!({"capture": {"toolInputs": "redacted"}}),
                "`capture.toolInputs`",
            ),
            (json!({"attributeAllowlist": [1]}), "`attributeAllowlist`"),
            (json!({"allowlist": []}), "`allowlist`"),
        ] {
            let message = read(bad.clone()).expect_err("refused");
            assert!(message.contains(named), "{bad}: {message}");
        }
    }

    #[test]
    fn the_codec_function_checks_options_and_processes_one_record() {
        let refused = |options: &str| match process_record_json(options, None) {
            Err(Error::Thrown { name, message, .. }) => (name, message),
            other => panic!("{options}: {other:?}"),
        };
        assert_eq!(process_record_json("{}", None).expect("checked"), None);
        for (options, class, named) in [
            (
                r#"{"capture": {"prompt": "full"}}"#,
                "RangeError",
                "`capture.prompt`",
            ),
            (
                r#"{"capture": {"maxContentChars": -1}}"#,
                "RangeError",
                "`capture.maxContentChars`",
            ),
            (
                r#"{"capture": {"errorMessage": "all"}}"#,
                "RangeError",
                "`capture.errorMessage`",
            ),
            (
                r#"{"capture": {"prompt": 1}}"#,
                "TypeError",
                "`capture.prompt`",
            ),
            (
                r#"{"capture": {"toolInputs": "redacted"}}"#,
                "TypeError",
                "`capture.toolInputs`",
            ),
            (r#"{"capture": []}"#, "TypeError", "`capture`"),
            (
                r#"{"attributeAllowlist": "a"}"#,
                "TypeError",
                "`attributeAllowlist`",
            ),
            (
                r#"{"attributeAllowlist": [1]}"#,
                "TypeError",
                "`attributeAllowlist`",
            ),
            (r#"{"sink": 1}"#, "TypeError", "`sink`"),
            ("[]", "TypeError", ""),
            ("{", "TypeError", "not JSON"),
        ] {
            let (name, message) = refused(options);
            assert_eq!(name, class, "{options}: {message}");
            assert!(message.contains(named), "{options}: {message}");
        }
        let record = r#"{"recordType":"span_start","name":"x","attributes":{"db.password":"p","oma.note":"token=abc123456789"}}"#;
        assert_eq!(
            process_record_json("{}", Some(record))
                .expect("processed")
                .as_deref(),
            Some(
                r#"{"recordType":"span_start","name":"x","attributes":{"oma.note":"token=[redacted]"}}"#
            )
        );
        let chunk = r#"{"recordType":"span_event","name":"stream_chunk","attributes":{}}"#;
        let none = r#"{"capture":{"streamEvents":"none"}}"#;
        assert_eq!(
            process_record_json(none, Some(chunk)).expect("dropped"),
            None
        );
        for bad in [
            "1",
            "[]",
            r#"{"recordType":"span_start"}"#,
            r#"{"attributes":[]}"#,
            "{",
        ] {
            match process_record_json("{}", Some(bad)) {
                Err(Error::Thrown { name, .. }) => assert_eq!(name, "TypeError", "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // The options are checked before the record is read.
        assert!(matches!(
            process_record_json(r#"{"capture":{"stack":"yes"}}"#, Some("{")),
            Err(Error::Thrown { message, .. }) if message.contains("`capture.stack`")
        ));
    }

    /// The reading of a record's text gives what the full reading gives, for every row of the
    /// shared table and every record of a run under several policies, and a record the rule
    /// leaves as it is comes back as the text it came as.
    #[test]
    fn the_text_reading_agrees_with_the_full_reading() {
        let table: Value = serde_json::from_str(include_str!(
            "../../../../../fixtures/observability/processors.json"
        ))
        .expect("the table");
        let records: Value = serde_json::from_str(include_str!(
            "../../../../../fixtures/observability/records.json"
        ))
        .expect("the records");
        let mut rows: Vec<(Value, Value)> = table["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(|case| (case["processor"].clone(), case["record"].clone()))
            .collect();
        let policies = [
            json!({}),
            json!({"capture": {"prompt": "redacted", "completion": "redacted", "streamEvents": "none", "maxContentChars": 5}}),
            json!({"capture": {"errorMessage": "code-only"}, "attributeAllowlist": ["oma.agent.name"]}),
        ];
        for record in records["records"].as_object().expect("records").values() {
            for policy in &policies {
                rows.push((policy.clone(), record.clone()));
            }
        }
        let mut unchanged = 0;
        for (options, record) in rows {
            let processor = SensitiveData::from_value(options.clone()).expect("options");
            let text = record.to_string();
            let read = processor.process_text(&text).expect("read as text");
            let full = processor.process(record);
            match (&read, &full) {
                (None, None) => {}
                (Some(read), Some(full)) => {
                    let value: Value = serde_json::from_str(read).expect("JSON");
                    assert_eq!(&value, full, "{options} {text}");
                    assert_eq!(read, &full.to_string(), "key order: {options} {text}");
                    if *read == text {
                        unchanged += 1;
                    }
                }
                _ => panic!("{options} {text}: {read:?} against {full:?}"),
            }
        }
        assert!(unchanged >= 10, "{unchanged}");
    }

    /// Texts the reading of parts does not take are read whole, with the full reading's
    /// verdicts; members the rule does not read are copied as they came.
    #[test]
    fn other_texts_are_read_whole() {
        let processor = SensitiveData::default();
        for text in [
            r#"{"recordType":"span_start","attributes":{},"attributes":{"db.password":"p"}}"#,
            r#"{"recordType":"span_event","recordType":"span_end","attributes":{}}"#,
            r#"{"recordType":"span_end","attributes":{},"status":{"message":"a"},"status":{}}"#,
            r#"{"attributes":{"a":"\ud83d\ude00"}}"#,
            r#"{"attributes":[]}"#,
            "[]",
            "{",
        ] {
            assert_eq!(processor.process_text(text), None, "{text}");
        }
        let lone = r#"{"attributes":{},"x":"\ud800"}"#;
        assert!(process_record_json("{}", Some(lone)).is_err());
        let deep = format!(
            r#"{{"attributes":{{}},"x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for text in [r#"{"attributes":{},"n":1e400}"#, &deep] {
            assert_eq!(processor.process_text(text), None, "{text}");
            assert!(process_record_json("{}", Some(text)).is_err(), "{text}");
        }
        let exponent = r#"{"attributes":{"n":[1E2]}}"#;
        assert_eq!(processor.process_text(exponent), None);
        assert_eq!(
            process_record_json("{}", Some(exponent))
                .expect("read whole")
                .as_deref(),
            Some(r#"{"attributes":{"n":[100.0]}}"#)
        );
        let spaced = r#" { "attributes" : { "a" : 1.50 , "b":[1, "x"] }, "n": 100.0, "o": {"k": [true, null, -2]}, "s": "\u00e9" } "#;
        assert_eq!(
            process_record_json("{}", Some(spaced))
                .expect("read")
                .as_deref(),
            Some(
                r#"{"attributes":{"a":1.50,"b":[1,"x"]},"n":100.0,"o":{"k": [true, null, -2]},"s":"\u00e9"}"#
            )
        );
    }

    /// The shared table the Python package runs too (`fixtures/observability/processors.json`).
    #[test]
    fn the_shared_processor_table() {
        let table: Value = serde_json::from_str(include_str!(
            "../../../../../fixtures/observability/processors.json"
        ))
        .expect("the table");
        let cases = table["cases"].as_array().expect("cases");
        assert!(cases.len() >= 10);
        for case in cases {
            let name = case["name"].as_str().expect("a name");
            let processor = SensitiveData::from_value(case["processor"].clone()).expect(name);
            let out = processor.process(case["record"].clone());
            let expect = &case["expect"];
            match out {
                None => assert!(expect.is_null(), "{name}: dropped"),
                Some(record) => {
                    assert_eq!(&record, expect, "{name}");
                    // Key order too, as a sink that writes the JSON sees it.
                    assert_eq!(record.to_string(), expect.to_string(), "{name}");
                }
            }
        }
        for refused in table["refused"].as_array().expect("refused") {
            let option = refused["option"].as_str().expect("an option");
            let message = SensitiveData::from_value(refused["processor"].clone())
                .expect_err(option)
                .to_string();
            assert!(
                message.contains(&format!("`{option}`")),
                "{option}: {message}"
            );
        }
    }
}
