//! Property tests, run by the native `cargo test` with a bounded number of cases each: the JSON
//! reader and typed validation never panic, valid messages round-trip through OMA JSON, and
//! every adapter's `parse` and stream decoder never panic, the decoders giving the same events
//! whatever the chunking.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::adapter::{for_provider, Adapter, ChatRequest, IdSource, ResponseContext, StreamEvent};
use crate::error::{Error, ErrorKind};
use crate::json::{messages_from_json, messages_from_value, messages_to_json, messages_to_value};
use crate::message::{
    ContentBlock, ImageBlock, LlmMessage, MediaSource, ReasoningBlock, Role, TextBlock,
    ToolResultBlock, ToolResultContent, ToolResultPart, ToolUseBlock, VideoBlock,
};
use crate::validate::validate_messages;

/// Cases per property: enough to find shallow faults, few enough for the whole file to take
/// seconds.
const CASES: u32 = 256;

/// Every adapter `for_provider` knows, plus an OpenAI-compatible server by base URL.
const PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "minimax",
    "deepseek",
    "grok",
    "gemini",
    "bedrock",
    "ai-sdk",
    "my-server",
];

fn adapter(name: &str) -> Box<dyn Adapter> {
    for_provider(name, Some("http://127.0.0.1:9"), IdSource::default())
        .expect("every listed provider has an adapter")
}

// ----- strategies ------------------------------------------------------------------------------

/// Short strings, mostly printable, with some of everything else.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 _./:=;+-]{0,12}",
        any::<String>(),
        Just(String::new()),
        Just(" \t\n".to_string()),
    ]
}

/// A media type: plausible ones, ones that break a rule, and random text.
fn media_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("image/png".to_string()),
        Just("video/mp4".to_string()),
        Just("application/pdf".to_string()),
        Just("video/mp4; codecs=avc1".to_string()),
        Just("image/".to_string()),
        Just(String::new()),
        any_text(),
    ]
}

/// Base64 data: canonical, non-canonical, a data URL, and random text.
fn data() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("AAAA".to_string()),
        Just("AAAAGGZ0eXA=".to_string()),
        Just("AA==".to_string()),
        Just("AB==".to_string()),
        Just("A===".to_string()),
        Just("data:video/mp4;base64,AAAA".to_string()),
        "[A-Za-z0-9+/]{0,16}={0,3}",
        any_text(),
    ]
}

/// A URL: absolute http(s), other schemes, relative, and random text.
fn url() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("https://x.example/v.mp4?a=1&b=2".to_string()),
        Just("HTTP://X.EXAMPLE".to_string()),
        Just("https://ü.example/ä".to_string()),
        Just("ftp://x.example/a".to_string()),
        Just("mm_file://abc".to_string()),
        Just("/relative".to_string()),
        "https?://[a-z.]{0,10}(/[a-z%]{0,6})?",
        any_text(),
    ]
}

/// Any media source, with random strings in every field.
fn media_source() -> impl Strategy<Value = MediaSource> {
    prop_oneof![
        (media_type(), data())
            .prop_map(|(media_type, data)| MediaSource::Base64 { media_type, data }),
        (media_type(), url()).prop_map(|(media_type, url)| MediaSource::Url { media_type, url }),
    ]
}

/// A JSON value of bounded depth and size, with keys that OMA's shapes use.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("text"),
            Just("image"),
            Just("video"),
            Just("tool_use"),
            Just("tool_result"),
            Just("reasoning"),
            Just("base64"),
            Just("url"),
            Just("video/mp4"),
            Just("AAAA"),
            Just("https://x.example/v.mp4"),
        ]
        .prop_map(Value::from),
        any_text().prop_map(Value::String),
    ];
    let key = prop_oneof![
        Just("role"),
        Just("content"),
        Just("type"),
        Just("text"),
        Just("source"),
        Just("media_type"),
        Just("data"),
        Just("url"),
        Just("id"),
        Just("name"),
        Just("input"),
        Just("tool_use_id"),
        Just("is_error"),
        Just("filename"),
        Just("signature"),
        Just("redactedData"),
    ]
    .prop_map(str::to_string)
    .boxed();
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON object, for tool inputs.
fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::vec(("[a-z]{1,4}", json_value()), 0..4)
        .prop_map(|entries| Value::Object(entries.into_iter().collect()))
}

fn tool_result_part() -> impl Strategy<Value = ToolResultPart> {
    prop_oneof![
        any_text().prop_map(|text| ToolResultPart::Text { text }),
        media_source().prop_map(|source| ToolResultPart::Image { source }),
        (any_text(), media_source())
            .prop_map(|(filename, source)| ToolResultPart::File { filename, source }),
    ]
}

/// Any content block: every kind, with random strings in every field.
fn block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        any_text().prop_map(|text| ContentBlock::Text(TextBlock { text })),
        (media_type(), data()).prop_map(|(media_type, data)| ContentBlock::Image(ImageBlock {
            source: MediaSource::Base64 { media_type, data }
        })),
        media_source().prop_map(|source| ContentBlock::Video(VideoBlock { source })),
        (
            any_text(),
            any_text(),
            json_value(),
            proptest::option::of(any_text())
        )
            .prop_map(
                |(id, name, input, signature)| ContentBlock::ToolUse(ToolUseBlock {
                    id,
                    name,
                    input,
                    signature
                })
            ),
        (
            any_text(),
            prop_oneof![
                any_text().prop_map(ToolResultContent::Text),
                prop::collection::vec(tool_result_part(), 0..4).prop_map(ToolResultContent::Parts),
            ],
            proptest::option::of(any::<bool>())
        )
            .prop_map(|(tool_use_id, content, is_error)| {
                ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id,
                    content,
                    is_error,
                })
            }),
        (
            any_text(),
            proptest::option::of(any_text()),
            proptest::option::of(any_text()),
            proptest::option::of(any_text())
        )
            .prop_map(|(text, signature, redacted_data, provenance)| {
                ContentBlock::Reasoning(ReasoningBlock {
                    text,
                    signature,
                    redacted_data,
                    provenance,
                })
            }),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::User), Just(Role::Assistant)]
}

/// Any message list.
fn messages() -> impl Strategy<Value = Vec<LlmMessage>> {
    prop::collection::vec(
        (role(), prop::collection::vec(block(), 0..5))
            .prop_map(|(role, content)| LlmMessage { role, content }),
        0..5,
    )
}

/// A media source that follows every media rule.
fn valid_source() -> impl Strategy<Value = MediaSource> {
    let media_type = prop_oneof![
        Just("video/mp4".to_string()),
        Just("image/png".to_string()),
        Just("application/pdf".to_string()),
    ];
    prop_oneof![
        (media_type.clone(), "([A-Za-z0-9+/]{4}){1,4}")
            .prop_map(|(media_type, data)| { MediaSource::Base64 { media_type, data } }),
        (media_type, "https://[a-z]{1,8}\\.example/[a-z0-9]{0,8}")
            .prop_map(|(media_type, url)| MediaSource::Url { media_type, url }),
    ]
}

/// A content block that passes validation, by construction.
fn valid_block() -> impl Strategy<Value = ContentBlock> {
    let part = prop_oneof![
        any::<String>().prop_map(|text| ToolResultPart::Text { text }),
        valid_source().prop_map(|source| ToolResultPart::Image { source }),
        ("[a-z]{1,8}\\.pdf", valid_source())
            .prop_map(|(filename, source)| ToolResultPart::File { filename, source }),
    ];
    prop_oneof![
        any::<String>().prop_map(|text| ContentBlock::Text(TextBlock { text })),
        (media_type(), data()).prop_map(|(media_type, data)| ContentBlock::Image(ImageBlock {
            source: MediaSource::Base64 { media_type, data }
        })),
        valid_source().prop_map(|source| ContentBlock::Video(VideoBlock { source })),
        (
            any::<String>(),
            any::<String>(),
            json_object(),
            proptest::option::of(any::<String>())
        )
            .prop_map(
                |(id, name, input, signature)| ContentBlock::ToolUse(ToolUseBlock {
                    id,
                    name,
                    input,
                    signature
                })
            ),
        (
            any::<String>(),
            any::<String>(),
            proptest::option::of(any::<bool>())
        )
            .prop_map(|(tool_use_id, text, is_error)| ContentBlock::ToolResult(
                ToolResultBlock {
                    tool_use_id,
                    content: ToolResultContent::Text(text),
                    is_error,
                }
            )),
        (
            any::<String>(),
            prop::collection::vec(part, 1..4),
            proptest::option::of(Just(false))
        )
            .prop_map(|(tool_use_id, parts, is_error)| {
                ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id,
                    content: ToolResultContent::Parts(parts),
                    is_error,
                })
            }),
        (
            any::<String>(),
            proptest::option::of(any::<String>()),
            proptest::option::of(any::<String>()),
            proptest::option::of(any::<String>())
        )
            .prop_map(|(text, signature, redacted_data, provenance)| {
                ContentBlock::Reasoning(ReasoningBlock {
                    text,
                    signature,
                    redacted_data,
                    provenance,
                })
            }),
    ]
}

fn valid_messages() -> impl Strategy<Value = Vec<LlmMessage>> {
    prop::collection::vec(
        (role(), prop::collection::vec(valid_block(), 0..5))
            .prop_map(|(role, content)| LlmMessage { role, content }),
        0..5,
    )
}

/// Text made of the tokens of OMA JSON, so that parsing gets past the first few bytes.
fn json_like_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("["),
            Just("]"),
            Just("{"),
            Just("}"),
            Just(","),
            Just(":"),
            Just("\"role\""),
            Just("\"user\""),
            Just("\"content\""),
            Just("\"type\""),
            Just("\"text\""),
            Just("\"video\""),
            Just("\"source\""),
            Just("\"url\""),
            Just("\"https://x.example\""),
            Just("null"),
            Just("1.5e3"),
            Just("\"\\ud800\""),
            Just(" "),
        ],
        0..40,
    )
    .prop_map(|tokens| tokens.concat())
}

// ----- helpers -----------------------------------------------------------------------------------

/// The full path's reading of `text`: a `Value`, OMA's guard and the typing.
fn full_path(text: &str) -> Result<Vec<LlmMessage>, Error> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("messages must be valid JSON: {e}")))?;
    messages_from_value(value)
}

/// A message list's JSON with the keys of each message and block in reverse order where
/// `flips` says so, and an unknown key added where `extras` says so (neither changes what the
/// full path reads; the values inside blocks are left as they are).
fn reshaped(
    messages: Value,
    flips: &mut impl Iterator<Item = bool>,
    extras: &mut impl Iterator<Item = bool>,
) -> Value {
    let mut reshape = |entries: Vec<(String, Value)>| {
        let mut entries = entries;
        if flips.next().unwrap_or(false) {
            entries.reverse();
        }
        if extras.next().unwrap_or(false) {
            entries.push((
                "extra".into(),
                serde_json::json!({"type": 1, "text": [null]}),
            ));
        }
        Value::Object(entries.into_iter().collect())
    };
    let Value::Array(list) = messages else {
        return messages;
    };
    let mut out = Vec::new();
    for message in list {
        let Value::Object(fields) = message else {
            out.push(message);
            continue;
        };
        let mut entries = Vec::new();
        for (key, value) in fields {
            let value = match (key.as_str(), value) {
                ("content", Value::Array(blocks)) => Value::Array(
                    blocks
                        .into_iter()
                        .map(|block| match block {
                            Value::Object(b) => reshape(b.into_iter().collect()),
                            other => other,
                        })
                        .collect(),
                ),
                (_, value) => value,
            };
            entries.push((key, value));
        }
        out.push(reshape(entries));
    }
    Value::Array(out)
}

/// Everything a decoder gives for `pieces`: the events up to the first error, and that error.
fn decode(provider: &str, pieces: &[&[u8]]) -> (Vec<StreamEvent>, Option<Error>) {
    let request = ChatRequest {
        model: "m".into(),
        stream: true,
        ..ChatRequest::default()
    };
    let mut decoder = adapter(provider).stream_decoder(&ResponseContext::of(&request));
    let mut events = Vec::new();
    for piece in pieces {
        match decoder.feed(piece) {
            Ok(more) => events.extend(more),
            Err(error) => return (events, Some(error)),
        }
    }
    match decoder.finish() {
        Ok(more) => {
            events.extend(more);
            (events, None)
        }
        Err(error) => (events, Some(error)),
    }
}

/// `bytes` cut at the given (sorted, deduplicated) offsets.
fn cut<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut offsets: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for offset in offsets {
        pieces.push(&bytes[start..offset]);
        start = offset;
    }
    pieces.push(&bytes[start..]);
    pieces
}

/// The recorded streams of the adapters' own tests, each decoding without an error.
fn recorded_streams() -> Vec<(&'static str, Vec<u8>)> {
    use crate::adapter::{ai_sdk, anthropic, bedrock, gemini, openai};
    vec![
        ("anthropic", anthropic::tests::STREAM.as_bytes().to_vec()),
        (
            "deepseek",
            openai::stream_tests::RECORDED.as_bytes().to_vec(),
        ),
        ("gemini", gemini::tests::STREAM.as_bytes().to_vec()),
        ("bedrock", bedrock::tests::recorded_stream()),
        ("ai-sdk", ai_sdk::tests::STREAM.as_bytes().to_vec()),
    ]
}

// ----- properties --------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn messages_from_json_never_panics_on_strings(
        text in prop_oneof![any::<String>(), json_like_text()]
    ) {
        if let Err(error) = messages_from_json(&text) {
            prop_assert_eq!(error.kind(), ErrorKind::InvalidMessage);
        }
    }

    #[test]
    fn body_text_is_written_as_serde_json_writes_it(
        text in prop_oneof![
            any::<String>(),
            "[a-z\"\\\\\n\t\u{0}-\u{1f}\u{7f}é]{0,80}",
            json_like_text(),
        ]
    ) {
        let mut writer = crate::json::writer::Writer::with_capacity(0);
        writer.string(&text);
        prop_assert_eq!(writer.finish(), serde_json::to_string(&text).unwrap());
    }

    #[test]
    fn body_json_values_are_written_as_serde_json_writes_them(value in json_value()) {
        let mut writer = crate::json::writer::Writer::with_capacity(0);
        writer.json(&value);
        prop_assert_eq!(writer.finish(), serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn messages_from_json_never_panics_on_json_values(value in json_value()) {
        let from_text = messages_from_json(&value.to_string());
        let from_value = messages_from_value(value);
        prop_assert_eq!(from_text, from_value);
    }

    /// The direct reading reads what the full path accepts of any messages' JSON, as the full
    /// path reads it, and nothing it refuses, whatever the order of the keys and the unknown
    /// keys beside them.
    #[test]
    fn direct_messages_are_the_full_paths(
        messages in messages(),
        flips in prop::collection::vec(any::<bool>(), 0..64),
        extras in prop::collection::vec(any::<bool>(), 0..64),
    ) {
        let value = reshaped(messages_to_value(&messages), &mut flips.into_iter(), &mut extras.into_iter());
        let text = value.to_string();
        prop_assert_eq!(crate::json::direct_messages(&text), full_path(&text).ok());
    }

    /// On any other text too, what the direct reading reads is the full path's.
    #[test]
    fn direct_messages_never_differ_from_the_full_path(
        text in prop_oneof![
            any::<String>(),
            json_like_text(),
            json_value().prop_map(|v| v.to_string()),
        ]
    ) {
        if let Some(read) = crate::json::direct_messages(&text) {
            prop_assert_eq!(Ok(read), full_path(&text));
        }
    }

    #[test]
    fn validation_never_panics(messages in messages()) {
        if let Err(error) = validate_messages(&messages) {
            prop_assert_eq!(error.kind(), ErrorKind::InvalidMessage);
            prop_assert!(error.to_string().starts_with("messages["), "{}", error);
        }
    }

    /// Valid messages come back equal from their OMA JSON.
    #[test]
    fn valid_messages_round_trip_through_json(messages in valid_messages()) {
        prop_assert_eq!(validate_messages(&messages), Ok(()));
        let written = messages_to_json(&messages);
        let read = messages_from_json(&written);
        prop_assert_eq!(read, Ok(messages));
    }

    /// The hand-written `Value` form is the JSON text's, key order included, for any messages.
    #[test]
    fn messages_to_value_is_the_json_text(messages in messages()) {
        let value = messages_to_value(&messages);
        prop_assert_eq!(&value, &serde_json::to_value(&messages).expect("plain data"));
        prop_assert_eq!(value.to_string(), messages_to_json(&messages));
    }

    /// The same holds for any messages that validation accepts.
    #[test]
    fn accepted_messages_round_trip_through_json(messages in messages()) {
        if validate_messages(&messages).is_ok() {
            let written = messages_to_json(&messages);
            prop_assert_eq!(messages_from_json(&written), Ok(messages));
        }
    }

    #[test]
    fn parse_never_panics(
        body in prop_oneof![
            any::<Vec<u8>>(),
            json_value().prop_map(|v| v.to_string().into_bytes()),
        ]
    ) {
        let request = ChatRequest { model: "m".into(), ..ChatRequest::default() };
        for provider in PROVIDERS {
            let adapter = adapter(provider);
            let _ = adapter.error_detail(&[("x-amzn-errortype".into(), "T:u".into())], &body);
            if let Err(error) = adapter.parse(&ResponseContext::of(&request), &body) {
                prop_assert!(
                    matches!(error.kind(), ErrorKind::Provider | ErrorKind::UnsupportedToolCall),
                    "{}: {:?}", provider, error
                );
            }
        }
    }

    #[test]
    fn stream_decoders_never_panic(
        body in any::<Vec<u8>>(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let pieces = cut(&body, &cuts);
        for provider in PROVIDERS {
            let (events, error) = decode(provider, &pieces);
            match error {
                None => prop_assert!(matches!(events.last(), Some(StreamEvent::Done(_)))),
                Some(error) => prop_assert_eq!(error.kind(), ErrorKind::Provider),
            }
        }
    }

    /// A valid stream gives the same events, ending in `Done`, wherever it is cut.
    #[test]
    fn stream_decoders_ignore_chunking(cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        for (provider, stream) in recorded_streams() {
            let whole = decode(provider, &[&stream]);
            prop_assert_eq!(&whole.1, &None, "{}", provider);
            prop_assert!(matches!(whole.0.last(), Some(StreamEvent::Done(_))));
            prop_assert_eq!(decode(provider, &cut(&stream, &cuts)), whole, "{}", provider);
        }
    }

    /// Truncated and corrupted valid streams fail or finish the same way for any chunking.
    #[test]
    fn damaged_streams_fail_alike_for_any_chunking(
        which in 0usize..5,
        keep in any::<usize>(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let (provider, mut stream) = recorded_streams().swap_remove(which);
        stream.truncate(keep % (stream.len() + 1));
        for (at, byte) in flips {
            if !stream.is_empty() {
                let at = at % stream.len();
                stream[at] = byte;
            }
        }
        let whole = decode(provider, &[&stream]);
        let chunked = decode(provider, &cut(&stream, &cuts));
        prop_assert_eq!(&whole.1, &chunked.1, "{}", provider);
        if whole.1.is_none() {
            prop_assert_eq!(whole.0, chunked.0, "{}", provider);
        }
    }
}

// ----- the run machine under arbitrary answers ---------------------------------------------------

mod machine_answers {
    use proptest::prelude::*;

    use crate::agent::before_run::BeforeRunResult;
    use crate::agent::config::AgentSettings;
    use crate::agent::exchange::{HookAnswer, ToolOutcome};
    use crate::agent::machine::{Answer, Poll, RunMachine, Step};
    use crate::http::call::CallAnswer;
    use crate::http::{HttpResponse, TransportFailure, TransportFailureKind};
    use crate::message::{LlmMessage, ToolResultContent};
    use crate::retry::RetryPolicy;

    fn machine(provider: &str, streaming: bool, hook: bool) -> RunMachine {
        let mut settings = AgentSettings {
            name: "p".into(),
            model: "m".into(),
            provider: provider.into(),
            before_run: hook,
            max_turns: Some(3),
            token_budget: Some(1_000),
            ..AgentSettings::default()
        };
        settings.endpoint.base_url = Some("http://127.0.0.1:9".into());
        settings.call.retry = Some(RetryPolicy {
            max_attempts: 3,
            base_delay_ms: 1,
            backoff: 2.0,
            ..RetryPolicy::default()
        });
        let (spec, _) = settings.into_spec().expect("a valid configuration");
        RunMachine::run(spec, vec![LlmMessage::user_text("q")], streaming, 7)
    }

    /// Bodies that are sometimes a real answer (text or a tool call), sometimes not.
    fn body() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#.to_vec()),
            Just(br#"{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#.to_vec()),
            Just(b"data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..64),
        ]
    }

    fn answer() -> impl Strategy<Value = Answer> {
        let http = prop_oneof![
            (any::<u16>(), body()).prop_map(|(status, body)| CallAnswer::Response(HttpResponse {
                status: if status % 3 == 0 { 200 } else { status },
                headers: vec![],
                body,
            })),
            any::<u16>().prop_map(|status| CallAnswer::Head {
                status: if status % 2 == 0 { 200 } else { status },
                headers: vec![("retry-after".into(), "0".into())],
            }),
            body().prop_map(CallAnswer::Chunk),
            Just(CallAnswer::End),
            Just(CallAnswer::Waited),
            (0u8..5, ".{0,8}").prop_map(|(kind, message)| {
                let kind = [
                    TransportFailureKind::Refused,
                    TransportFailureKind::Reset,
                    TransportFailureKind::TimedOut,
                    TransportFailureKind::Denied,
                    TransportFailureKind::Other,
                ][usize::from(kind)];
                CallAnswer::Failure(TransportFailure::new(kind, &message))
            }),
        ];
        prop_oneof![
            4 => http.prop_map(Answer::Http),
            1 => prop_oneof![
                Just(HookAnswer::Failed("no".into())),
                ".{0,6}".prop_map(|p| HookAnswer::Result(BeforeRunResult {
                    prompt: serde_json::Value::String(p),
                    messages: None,
                })),
                Just(HookAnswer::Result(BeforeRunResult {
                    prompt: serde_json::Value::Null,
                    messages: Some(serde_json::Value::Null),
                })),
            ]
            .prop_map(Answer::Hook),
            1 => (prop_oneof![Just("t1".to_owned()), ".{0,3}"], proptest::option::of(any::<bool>())).prop_map(|(id, is_error)| {
                Answer::Tool {
                    id,
                    outcome: ToolOutcome {
                        content: ToolResultContent::Text("r".into()),
                        is_error,
                        gate: None,
                    },
                }
            }),
            1 => prop_oneof![Just(Ok("out".to_owned())), Just(Err("bad".to_owned()))]
                .prop_map(Answer::External),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(super::CASES))]

        /// Whatever a host answers, in whatever order, the machine never panics, ends at most
        /// once, and refuses everything after its result.
        #[test]
        fn arbitrary_answers_never_panic(
            provider in prop_oneof![Just("anthropic"), Just("openai"), Just("gemini")],
            streaming in any::<bool>(),
            hook in any::<bool>(),
            answers in proptest::collection::vec(answer(), 0..40),
            ticks in proptest::collection::vec(0u64..5_000, 40),
        ) {
            let mut machine = machine(provider, streaming, hook);
            let mut now = 1_796_036_400_000u64;
            let mut done = 0;
            for (answer, tick) in answers.into_iter().zip(ticks) {
                now += tick;
                // Deliver what needs no answer; stop at a step that needs one (`Receive` is
                // asked again until it is answered).
                for _ in 0..64 {
                    match machine.poll(now) {
                        Poll::Finished(_) => done += 1,
                        Poll::Step(
                            Step::Event(_) | Step::Progress(_) | Step::Evaluation(_) | Step::Trace(_),
                        ) => {}
                        Poll::Step(_) | Poll::Waiting(_) | Poll::Over => break,
                    }
                }
                let refused = machine.handle(answer).is_err();
                if done > 0 {
                    prop_assert!(refused, "an answer after the result was taken");
                }
            }
            prop_assert!(done <= 1);
        }
    }
}
