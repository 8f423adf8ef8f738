//! The gateway's request machine under arbitrary requests and arbitrary provider answers: the
//! fuzzer's bytes pick the route (the chat routes, `count_tokens`, `/v1/run`), streaming, the
//! settings (fallbacks across dialects, `OMA_GATEWAY_DROP_PARAMS`, retries, a trace collector),
//! a request built from the routes' own fields with arbitrary values and nested members (or raw
//! bytes), and the answers to every provider request: whole responses and heads with any status
//! and headers, bodies canned for each dialect (whole and streamed), cut or arbitrary, chunks,
//! ends, transport failures. Nothing panics; the machine asks only for what it can take, ends
//! within a bounded number of steps having answered once, and every answer is a valid HTTP
//! answer: a whole reply has a listed status, header names that are tokens, header values
//! without control characters and a JSON body in one of the three error shapes when it is an
//! error; a stream is server-sent events (`event:` and `data:` lines, each event ended by a
//! blank line, every `data` JSON or `[DONE]`); no reply, write, URL or log line shows the key.
#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use oma_core::http::call::CallAnswer;
use oma_core::http::{HttpResponse, TransportFailure, TransportFailureKind};
use oma_gateway_rules::request::{Input, Poll, RequestHead, RequestMachine, Step};
use oma_gateway_rules::{Reply, Settings};
use serde_json::{json, Map, Value};

const SECRET: &str = "sk-fuzz-SECRET-1234";
const NOW: u64 = 1_796_036_400_000;

const ROUTES: [&str; 5] = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/messages?beta=true",
    "/v1/messages/count_tokens",
    "/v1/run",
];

const MODELS: [&str; 7] = [
    "anthropic/claude-x",
    "openai/gpt-4o",
    "gemini/gemini-2.5-pro",
    "bedrock/anthropic.claude-x",
    "claude-x",
    "deepseek/deepseek-chat",
    "ai-sdk/x",
];

/// Top-level fields of either route (the field table's and some it does not name).
const FIELDS: [&str; 26] = [
    "stop",
    "seed",
    "response_format",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "user",
    "metadata",
    "logprobs",
    "n",
    "stream_options",
    "max_completion_tokens",
    "top_p",
    "temperature",
    "thinking",
    "stop_sequences",
    "top_k",
    "output_config",
    "system",
    "service_tier",
    "frequency_penalty",
    "maxTurns",
    "trace",
    "unknown_field",
    "bad\r\nname",
    "caf\u{e9}",
];

/// Nested members the routes read, map or refuse.
const MEMBERS: [&str; 14] = [
    "name",
    "refusal",
    "detail",
    "strict",
    "type",
    "citations",
    "cache_control",
    "signature",
    "is_error",
    "function",
    "url",
    "audio",
    "input",
    "extra",
];

const OPENAI_ANSWER: &str = r#"{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#;
const ANTHROPIC_ANSWER: &str = r#"{"id":"m","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"ok"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":5,"output_tokens":3,"cache_read_input_tokens":4}}"#;
const GEMINI_ANSWER: &str = r#"{"candidates":[{"index":0,"finishReason":"STOP","content":{"role":"model","parts":[{"text":"ok"},{"functionCall":{"name":"f","args":{}},"thoughtSignature":"c2ln"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3,"cachedContentTokenCount":2}}"#;
const BEDROCK_ANSWER: &str = r#"{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":5,"outputTokens":3,"cacheReadInputTokens":1}}"#;
const OPENAI_STREAM: &str = "data: {\"id\":\"c\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"o\"}}]}\n\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"k\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\ndata: [DONE]\n\n";
const ANTHROPIC_STREAM: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"END\"},\"usage\":{\"output_tokens\":2}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
const GEMINI_STREAM: &str = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"ok\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":1}}\n\n";
const COUNT: &str = r#"{"input_tokens":12}"#;
const BODIES: [&str; 8] = [
    OPENAI_ANSWER,
    ANTHROPIC_ANSWER,
    GEMINI_ANSWER,
    BEDROCK_ANSWER,
    OPENAI_STREAM,
    ANTHROPIC_STREAM,
    GEMINI_STREAM,
    COUNT,
];
const STATUSES: [u16; 10] = [200, 200, 200, 201, 400, 401, 429, 500, 503, 529];
const CONTENT_TYPES: [&str; 4] = [
    "application/json",
    "text/event-stream",
    "application/vnd.amazon.eventstream",
    "text/plain",
];

/// Any JSON value of small depth, now a plausible scalar, now a list or an object.
fn value(u: &mut Unstructured<'_>, depth: u8) -> Result<Value> {
    Ok(match u.int_in_range(0..=9)? {
        0 => Value::Null,
        1 => json!(bool::arbitrary(u)?),
        2 => json!(u.int_in_range(-3i64..=70_000)?),
        3 => json!(f64::from(u.int_in_range(0u8..=20)?) / 10.0),
        4 => json!(*u.choose(&[
            "auto", "none", "required", "any", "tool", "low", "high", "text", "json_schema",
            "json_object", "enabled", "ephemeral", "custom", "function", "END"
        ])?),
        5 => json!(String::arbitrary(u)?),
        6 | 7 if depth > 0 => {
            let n = u.int_in_range(0..=3)?;
            Value::Array((0..n).map(|_| value(u, depth - 1)).collect::<Result<_>>()?)
        }
        _ if depth > 0 => Value::Object(object(u, depth - 1)?),
        _ => json!("x"),
    })
}

/// An object of nested members the routes know, with arbitrary values.
fn object(u: &mut Unstructured<'_>, depth: u8) -> Result<Map<String, Value>> {
    let mut o = Map::new();
    for _ in 0..u.int_in_range(0..=3)? {
        o.insert((*u.choose(&MEMBERS)?).to_owned(), value(u, depth)?);
    }
    Ok(o)
}

/// A content part or block of either route, with arbitrary extra members now and then.
fn part(u: &mut Unstructured<'_>) -> Result<Value> {
    let mut part = match u.int_in_range(0..=8)? {
        0 => json!({"type": "text", "text": "hi"}),
        1 => json!({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}),
        2 => json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
        3 => json!({"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}),
        4 => json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        5 => json!({"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r"}]}),
        6 => json!({"type": "thinking", "thinking": "t", "signature": "s"}),
        7 => json!({"type": "redacted_thinking", "data": "d"}),
        _ => Value::Object(object(u, 1)?),
    };
    if u.ratio(1, 3)? {
        if let Value::Object(members) = &mut part {
            members.extend(object(u, 1)?);
        }
    }
    Ok(part)
}

/// A message of either route.
fn message(u: &mut Unstructured<'_>) -> Result<Value> {
    let role = *u.choose(&["user", "assistant", "system", "tool", "developer"])?;
    let mut message = json!({"role": role});
    message["content"] = if u.ratio(1, 3)? {
        json!("Hello?")
    } else {
        let n = u.int_in_range(0..=3)?;
        Value::Array((0..n).map(|_| part(u)).collect::<Result<_>>()?)
    };
    if role == "assistant" && u.ratio(1, 4)? {
        message["tool_calls"] =
            json!([{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
    }
    if role == "tool" {
        message["tool_call_id"] = json!("t");
    }
    if u.ratio(1, 4)? {
        if let Value::Object(members) = &mut message {
            members.extend(object(u, 1)?);
        }
    }
    Ok(message)
}

/// A tool of either route.
fn tool(u: &mut Unstructured<'_>) -> Result<Value> {
    let openai = bool::arbitrary(u)?;
    let mut tool = if openai {
        json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})
    } else {
        json!({"name": "f", "input_schema": {"type": "object"}})
    };
    if u.ratio(1, 3)? {
        let target = if openai { &mut tool["function"] } else { &mut tool };
        if let Value::Object(members) = target {
            members.extend(object(u, 1)?);
        }
    }
    Ok(tool)
}

/// A request body: the routes' fields with arbitrary values, or (one time in eight) raw bytes.
fn body(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    if u.ratio(1, 8)? {
        return u.arbitrary();
    }
    let mut o = Map::new();
    o.insert("model".into(), json!(*u.choose(&MODELS)?));
    if bool::arbitrary(u)? {
        o.insert("provider".into(), json!("anthropic"));
    }
    let n = u.int_in_range(1..=4)?;
    let messages: Vec<Value> = (0..n).map(|_| message(u)).collect::<Result<_>>()?;
    o.insert("messages".into(), Value::Array(messages));
    if bool::arbitrary(u)? {
        o.insert("max_tokens".into(), json!(u.int_in_range(0u32..=9000)?));
    }
    if u.ratio(1, 2)? {
        let n = u.int_in_range(0..=2)?;
        let tools: Vec<Value> = (0..n).map(|_| tool(u)).collect::<Result<_>>()?;
        o.insert("tools".into(), Value::Array(tools));
    }
    if u.ratio(1, 3)? {
        o.insert("stream".into(), json!(true));
    }
    for _ in 0..u.int_in_range(0..=3)? {
        let name = *u.choose(&FIELDS)?;
        o.insert(name.to_owned(), value(u, 2)?);
    }
    Ok(Value::Object(o).to_string().into_bytes())
}

/// One body: a canned one, cut short, or arbitrary bytes.
fn answer_body(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let canned = u.choose(&BODIES)?.as_bytes();
    Ok(match u.int_in_range(0..=5)? {
        0..=2 => canned.to_vec(),
        3 => {
            let cut = u.int_in_range(0..=canned.len())?;
            canned[..cut].to_vec()
        }
        4 => {
            let mut bytes = canned.to_vec();
            let at = u.int_in_range(0..=bytes.len().saturating_sub(1))?;
            if let Some(byte) = bytes.get_mut(at) {
                *byte = u8::arbitrary(u)?;
            }
            bytes
        }
        _ => u.arbitrary()?,
    })
}

fn failure(u: &mut Unstructured<'_>) -> Result<CallAnswer> {
    let kind = *u.choose(&[
        TransportFailureKind::Refused,
        TransportFailureKind::Reset,
        TransportFailureKind::TimedOut,
        TransportFailureKind::Denied,
        TransportFailureKind::Other,
    ])?;
    Ok(CallAnswer::Failure(TransportFailure {
        kind,
        message: "fuzz".into(),
    }))
}

fn headers(u: &mut Unstructured<'_>) -> Result<Vec<(String, String)>> {
    let mut headers = vec![("content-type".into(), (*u.choose(&CONTENT_TYPES)?).to_owned())];
    if u.ratio(1, 4)? {
        headers.push(("retry-after".into(), u.int_in_range(0u8..=3)?.to_string()));
    }
    Ok(headers)
}

/// The answer to a `Send`: a whole response, a head, or a transport failure (always, once the
/// fuzzer's bytes ran out, so that every request ends).
fn send_answer(u: &mut Unstructured<'_>) -> Result<CallAnswer> {
    if u.is_empty() {
        return failure(u);
    }
    Ok(match u.int_in_range(0..=5)? {
        0..=2 => CallAnswer::Response(HttpResponse {
            status: *u.choose(&STATUSES)?,
            headers: headers(u)?,
            body: answer_body(u)?,
        }),
        3 | 4 => CallAnswer::Head {
            status: *u.choose(&STATUSES)?,
            headers: headers(u)?,
        },
        _ => failure(u)?,
    })
}

/// The answer to a `Receive`: the next chunk, the end (always, once the fuzzer's bytes ran
/// out), or a failure.
fn receive_answer(u: &mut Unstructured<'_>) -> Result<CallAnswer> {
    if u.is_empty() {
        return Ok(CallAnswer::End);
    }
    Ok(match u.int_in_range(0..=7)? {
        0..=4 => {
            let bytes = answer_body(u)?;
            let cut = u.int_in_range(0..=bytes.len())?;
            CallAnswer::Chunk(bytes[..cut.max(1).min(bytes.len())].to_vec())
        }
        5 | 6 => CallAnswer::End,
        _ => failure(u)?,
    })
}

fn token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn check(reply: &Reply) {
    assert!((200..=599).contains(&reply.status), "status {}", reply.status);
    for (name, value) in &reply.headers {
        assert!(token(name), "header name {name:?}");
        assert!(
            value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)),
            "header {name}: {value:?}"
        );
    }
    let body: Value = serde_json::from_str(&reply.body).expect("a JSON body");
    if reply.status >= 400 {
        let error = &body["error"];
        assert!(error["message"].is_string(), "{body}");
        assert!(
            (error["name"].is_string() && error["retryable"].is_boolean())
                || (error["type"].is_string() && error.get("param").is_some())
                || (body["type"] == "error" && error["type"].is_string()),
            "{body}"
        );
    }
    assert!(!reply.body.contains(SECRET), "{}", reply.body);
}

/// Checks that one write of a stream is whole server-sent events.
fn check_stream(text: &str) {
    for event in text.split_terminator("\n\n") {
        for line in event.lines() {
            if let Some(data) = line.strip_prefix("data: ") {
                assert!(
                    data == "[DONE]" || serde_json::from_str::<Value>(data).is_ok(),
                    "data {data:?}"
                );
            } else {
                assert!(line.starts_with("event: "), "line {line:?} in {text:?}");
            }
        }
    }
    assert!(text.is_empty() || text.ends_with("\n\n"), "{text:?}");
}

fn exchange(u: &mut Unstructured<'_>) -> Result<()> {
    let selector = u8::arbitrary(u)?;
    let path = *u.choose(&ROUTES)?;
    let mut vars = vec![
        ("ANTHROPIC_API_KEY".to_string(), SECRET.to_string()),
        ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
        ("OPENAI_API_KEY".into(), SECRET.into()),
        ("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into()),
        ("GEMINI_API_KEY".into(), SECRET.into()),
        ("GEMINI_BASE_URL".into(), "http://127.0.0.1:8".into()),
        ("AWS_BEARER_TOKEN_BEDROCK".into(), SECRET.into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        (
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME".into(),
            "http://127.0.0.1:7".into(),
        ),
        ("DEEPSEEK_API_KEY".into(), SECRET.into()),
        ("DEEPSEEK_BASE_URL".into(), "http://127.0.0.1:6".into()),
    ];
    if selector & 1 != 0 {
        vars.push((
            "OMA_GATEWAY_FALLBACKS".into(),
            r#"{"openai/gpt-4o": ["anthropic/claude-x", "gemini/gemini-2.5-pro"], "anthropic/claude-x": ["bedrock/anthropic.claude-x", "openai/gpt-4o"]}"#.into(),
        ));
    }
    if selector & 2 != 0 {
        let drop = if selector & 4 != 0 { "true" } else { "seed,messages[].name,cache_control" };
        vars.push(("OMA_GATEWAY_DROP_PARAMS".into(), drop.into()));
    }
    vars.push((
        "OMA_GATEWAY_MAX_RETRIES".into(),
        if selector & 8 != 0 { "1" } else { "0" }.into(),
    ));
    if selector & 16 != 0 {
        vars.push((
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".into(),
            "http://127.0.0.1:5/v1/traces".into(),
        ));
    }
    let settings = Settings::from_vars(vars).expect("valid settings");
    let body = body(u)?;
    let mut headers = vec![("content-length".to_owned(), body.len().to_string())];
    if selector & 32 != 0 {
        headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
    }
    if selector & 64 != 0 {
        headers.push(("anthropic-version".to_owned(), "2023-06-01".to_owned()));
        headers.push(("anthropic-beta".to_owned(), "prompt-caching-2024-07-31".to_owned()));
    }
    let head = RequestHead {
        method: "POST".into(),
        path: path.into(),
        headers,
    };
    let mut machine = RequestMachine::new(Ok(settings), head, NOW, 7);
    let mut answered = false;
    for tick in 0..512u64 {
        let step = match machine.poll(NOW + tick) {
            Poll::Step(step) => step,
            Poll::Finished(_) => {
                assert!(answered, "finished without an answer");
                return Ok(());
            }
            Poll::Waiting(at) => panic!("waiting ({at:?}) with every answer given"),
        };
        let input = match step {
            Step::ReadBody(_) => Input::Body(body.clone()),
            Step::Count(ops) => Input::Counted(Ok(ops.add.iter().map(|_| 1).collect())),
            Step::Forget(_) | Step::Close => continue,
            Step::Respond(reply) => {
                assert!(!answered, "answered twice");
                answered = true;
                check(&reply);
                continue;
            }
            Step::Open => {
                assert!(!answered, "a stream after an answer");
                answered = true;
                Input::Written(true)
            }
            Step::Write(text) => {
                assert!(answered, "a write before the head");
                assert!(!text.contains(SECRET), "{text}");
                check_stream(&text);
                // Now and then the caller goes away.
                Input::Written(!u.ratio(1, 16).unwrap_or(false))
            }
            Step::Send(outgoing) => {
                assert!(!outgoing.url.contains(SECRET), "{}", outgoing.url);
                Input::Http(send_answer(u).unwrap_or(CallAnswer::Failure(TransportFailure {
                    kind: TransportFailureKind::Reset,
                    message: String::new(),
                })))
            }
            Step::Receive => Input::Http(receive_answer(u).unwrap_or(CallAnswer::End)),
            Step::Wait(_) => Input::Http(CallAnswer::Waited),
            Step::Log(line) => {
                assert!(line.ends_with('\n') && !line.contains(SECRET), "{line}");
                continue;
            }
        };
        machine.handle(input).expect("the input it asked for");
    }
    panic!("the request did not end");
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = exchange(&mut u);
});
