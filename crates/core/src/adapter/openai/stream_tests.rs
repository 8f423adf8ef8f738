//! Stream decoding: a recorded stream fed in chunks of every size gives the same events;
//! accumulation into `done`; truncation and error chunks.

use serde_json::json;

use super::*;
use crate::adapter::{ResponseContext, StreamEvent};
use crate::error::ErrorKind;
use crate::message::{ContentBlock, ReasoningBlock, TextBlock, TokenUsage, ToolUseBlock};

/// A recorded stream: reasoning, text with multi-byte characters, two interleaved tool calls
/// split over chunks, a usage-only final chunk, CRLF lines and a comment.
pub(crate) const RECORDED: &str = concat!(
    ": keep-alive\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"Think \"}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"héré\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo \"}}]}\r\n\r\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"wörld 🌍\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"second\",\"arguments\":\"\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\",\"function\":{\"name\":null,\"arguments\":\"\\\"ünï\\\"}\"}},{\"index\":1,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":9}}\n\n",
    "data: [DONE]\n\n",
);

fn decode_in_chunks(
    adapter: &OpenAi,
    stream: &[u8],
    size: usize,
) -> Result<Vec<StreamEvent>, Error> {
    let mut decoder = adapter.stream_decoder(&ResponseContext::default());
    let mut events = Vec::new();
    for chunk in stream.chunks(size) {
        events.extend(decoder.feed(chunk)?);
    }
    events.extend(decoder.finish()?);
    Ok(events)
}

fn decode(stream: &str) -> Result<Vec<StreamEvent>, Error> {
    decode_in_chunks(&OpenAi::default(), stream.as_bytes(), stream.len().max(1))
}

fn call(id: &str, name: &str, input: serde_json::Value) -> ToolUseBlock {
    ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        signature: None,
    }
}

fn expected() -> Vec<StreamEvent> {
    let a = call("call_a", "search", json!({"q": "ünï"}));
    let b = call("call_b", "second", json!({}));
    vec![
        StreamEvent::Reasoning("Think ".into()),
        StreamEvent::Reasoning("héré".into()),
        StreamEvent::Text("Héllo ".into()),
        StreamEvent::Text("wörld 🌍".into()),
        // Buffers come out in the order they were opened.
        StreamEvent::ToolUse(b.clone()),
        StreamEvent::ToolUse(a.clone()),
        StreamEvent::Done(LlmResponse {
            id: "c1".into(),
            content: vec![
                ContentBlock::Reasoning(ReasoningBlock {
                    text: "Think héré".into(),
                    signature: None,
                    redacted_data: None,
                    provenance: Some("deepseek".into()),
                }),
                ContentBlock::Text(TextBlock {
                    text: "Héllo wörld 🌍".into(),
                }),
                ContentBlock::ToolUse(b),
                ContentBlock::ToolUse(a),
            ],
            model: "deepseek-v4".into(),
            stop_reason: "tool_use".into(),
            usage: TokenUsage::new(20, 9),
            stop_sequence: None,
        }),
    ]
}

#[test]
fn every_chunking_gives_the_same_events() {
    let adapter = preset("deepseek").unwrap();
    let bytes = RECORDED.as_bytes();
    for size in 1..=bytes.len() {
        let events = decode_in_chunks(&adapter, bytes, size).unwrap();
        assert_eq!(events, expected(), "chunk size {size}");
    }
}

#[test]
fn text_arrives_as_soon_as_its_chunk_does() {
    let mut decoder = OpenAi::default().stream_decoder(&ResponseContext::default());
    let first = "data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    assert_eq!(
        decoder.feed(first.as_bytes()).unwrap(),
        vec![StreamEvent::Text("Hi".into())]
    );
    assert_eq!(decoder.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}\n").unwrap(), vec![]);
    assert_eq!(
        decoder.feed(b"\n").unwrap(),
        vec![StreamEvent::Text("!".into())]
    );
    let done = decoder.finish().unwrap();
    assert_eq!(
        done,
        vec![StreamEvent::Done(LlmResponse {
            id: "x".into(),
            content: vec![ContentBlock::Text(TextBlock { text: "Hi!".into() })],
            model: String::new(),
            stop_reason: "end_turn".into(),
            usage: TokenUsage::default(),
            stop_sequence: None,
        })]
    );
}

#[test]
fn done_content_and_stop_reason_rules() {
    // Empty text is an event but not a block; a tool call with `stop` means tool_use; a
    // stream with a finish_reason but no [DONE] is complete; a missing final blank line is fine.
    let stream = concat!(
        "data: {\"id\":\"a\",\"model\":\"m\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"id\":\"a\",\"model\":\"m\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"t\",\"arguments\":\"{\\\"code\\\": \\\"say(\\\"hi\\\")\\\"}\"}}]},\"finish_reason\":\"stop\"}]}",
    );
    let events = decode(stream).unwrap();
    let tool = call("c", "t", json!({"code": "say(\"hi\")"}));
    assert_eq!(
        events,
        vec![
            StreamEvent::Text(String::new()),
            StreamEvent::ToolUse(tool.clone()),
            StreamEvent::Done(LlmResponse {
                id: "a".into(),
                content: vec![ContentBlock::ToolUse(tool)],
                model: "m".into(),
                stop_reason: "tool_use".into(),
                usage: TokenUsage::default(),
                stop_sequence: None,
            }),
        ]
    );

    for (finish, expected) in [
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("other", "other"),
    ] {
        let stream = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"x\"}},\"finish_reason\":\"{finish}\"}}]}}\n\ndata: [DONE]\n\n"
        );
        let Some(StreamEvent::Done(done)) = decode(&stream).unwrap().pop() else {
            panic!("no done event");
        };
        assert_eq!(done.stop_reason, expected);
    }

    // [DONE] without any finish_reason: complete, and counted as stop.
    let Some(StreamEvent::Done(done)) = decode("data: [DONE]\n\n").unwrap().pop() else {
        panic!("no done event");
    };
    assert_eq!(done.stop_reason, "end_turn");
    assert!(done.content.is_empty());

    // Chunks after [DONE] are ignored.
    let events =
        decode("data: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\n")
            .unwrap();
    assert_eq!(events.len(), 1);
}

#[test]
fn truncated_stream_is_an_error() {
    let cut = &RECORDED[..RECORDED.find("{\"id\":\"c1\",\"model\":\"deepseek-v4\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\"").unwrap()];
    for stream in ["", cut, "data: {\"choices\":[{\"delta\":{\"content\":\"par"] {
        let mut decoder = OpenAi::default().stream_decoder(&ResponseContext::default());
        let _ = decoder.feed(stream.as_bytes());
        let err = decoder.finish().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Provider, "{stream:?}");
        assert!(
            err.to_string().starts_with("malformed openai response"),
            "{err}"
        );
        assert!(err.retryable());
    }
}

#[test]
fn error_and_malformed_chunks() {
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit\"}}\n\n",
    );
    let mut decoder = preset("grok")
        .unwrap()
        .stream_decoder(&ResponseContext::default());
    let err = decoder.feed(stream.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        Error::Provider {
            provider: "grok".into(),
            status: None,
            message: "Rate limit reached".into(),
            code: None,
            error_type: Some("rate_limit".into()),
        }
    );
    // The decoder stays failed.
    assert_eq!(decoder.finish().unwrap_err(), err);

    let err = decode("data: {not json}\n\n").unwrap_err();
    assert!(err
        .to_string()
        .starts_with("malformed openai response: a stream chunk is not JSON"));
}

fn tool_delta(index: usize, id: &str, arguments: &str) -> String {
    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": id, "function": {"name": if id.is_empty() { "" } else { "f" },
            "arguments": arguments}}
    ]}}]});
    format!("data: {chunk}\n\n")
}

/// 256 tool calls, then 20,000 argument deltas to the last one: each delta finds its buffer at
/// once (a search from the first buffer would walk all 256 for each of them).
#[test]
fn many_deltas_to_the_last_tool_call_decode_in_linear_time() {
    let mut stream = String::new();
    for index in 0..256 {
        stream.push_str(&tool_delta(index, &format!("call_{index}"), ""));
    }
    stream.push_str(&tool_delta(255, "", "{\"a\":\""));
    for _ in 0..20_000 {
        stream.push_str(&tool_delta(255, "", "x"));
    }
    stream.push_str(&tool_delta(255, "", "\"}"));
    stream.push_str("data: [DONE]\n\n");
    let events = decode(&stream).expect("a stream within the caps decodes");
    assert_eq!(events.len(), 257);
    assert_eq!(
        events[255],
        StreamEvent::ToolUse(call("call_255", "f", json!({"a": "x".repeat(20_000)})))
    );
    assert_eq!(
        events[0],
        StreamEvent::ToolUse(call("call_0", "f", json!({})))
    );
}

#[test]
fn more_than_256_tool_calls_is_a_malformed_response() {
    let mut stream = String::new();
    for index in 0..257 {
        stream.push_str(&tool_delta(index, &format!("call_{index}"), "{}"));
    }
    stream.push_str("data: [DONE]\n\n");
    let error = decode(&stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Provider);
    assert_eq!(
        error.to_string(),
        "malformed openai response: the stream has more than 256 tool calls"
    );
    // Deltas without an index share one buffer, so they never reach the cap.
    let mut stream = String::new();
    for _ in 0..1000 {
        let chunk =
            json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "1"}}]}}]});
        stream.push_str(&format!("data: {chunk}\n\n"));
    }
    stream.push_str("data: [DONE]\n\n");
    let events = decode(&stream).unwrap();
    assert_eq!(events.len(), 2);
}
