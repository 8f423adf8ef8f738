//! Canned provider answers: which wire format a request path belongs to, and the realistic
//! bodies (whole JSON, SSE events, AWS event-stream frames) and error bodies each format sends.
//!
//! The loopback [`Simulator`](crate::Simulator) answers from here, and so does anything that
//! must answer as it does (the test kit's in-process capture hook, the load tests' provider), so
//! a test sees the same provider either way. Every success carries the text [`CANNED_TEXT`],
//! streamed as [`CANNED_PIECES`].

use serde_json::{json, Value};

/// The text of every canned success.
pub const CANNED_TEXT: &str = "Hello from the simulator.";

/// [`CANNED_TEXT`] as the pieces a canned stream delivers, one event each.
pub const CANNED_PIECES: [&str; 3] = ["Hello", " from the", " simulator."];

/// Input and output tokens of every canned success.
pub const CANNED_USAGE: (u64, u64) = (12, 6);

/// The wire format a request is for, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `POST …/v1/messages`.
    Anthropic,
    /// `POST …/v1/messages/count_tokens` (Anthropic's token counter: `{"input_tokens"}`).
    AnthropicCount,
    /// `POST …/chat/completions` (OpenAI and every compatible preset).
    OpenAi,
    /// `POST …/models/{model}:generateContent` or `:streamGenerateContent`.
    Gemini,
    /// `POST …/model/{id}/converse` or `/converse-stream`.
    Bedrock,
    /// Anything else: answered with 404.
    Unknown,
}

/// What a request asks for: its format, whether it wants a stream, and the model it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The wire format.
    pub route: Route,
    /// Whether the answer is a stream (SSE or AWS event stream).
    pub stream: bool,
    /// The model named by the body or the path (empty when none).
    pub model: String,
}

impl Ask {
    /// Reads a request's path (with query) and body.
    pub fn of(path_and_query: &str, body: &[u8]) -> Ask {
        let path = path_and_query
            .split_once('?')
            .map_or(path_and_query, |(path, _)| path);
        /// The two fields of a JSON body the simulator answers by; the body is parsed once
        /// (and checked to be JSON), the rest skipped.
        #[derive(Default, serde::Deserialize)]
        struct Head {
            #[serde(default)]
            model: Option<Value>,
            #[serde(default)]
            stream: Option<Value>,
        }
        let json_head = || {
            let head: Head = serde_json::from_slice(body).unwrap_or_default();
            (
                head.stream.and_then(|v| v.as_bool()).unwrap_or(false),
                head.model
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            )
        };
        if path.ends_with("/v1/messages/count_tokens") {
            let (_, model) = json_head();
            Ask {
                route: Route::AnthropicCount,
                stream: false,
                model,
            }
        } else if path.ends_with("/v1/messages") {
            let (stream, model) = json_head();
            Ask {
                route: Route::Anthropic,
                stream,
                model,
            }
        } else if path.ends_with("/chat/completions") {
            let (stream, model) = json_head();
            Ask {
                route: Route::OpenAi,
                stream,
                model,
            }
        } else if let Some(rest) = path.strip_prefix("/model/") {
            match rest.rsplit_once('/') {
                Some((model, "converse")) => Ask {
                    route: Route::Bedrock,
                    stream: false,
                    model: model.to_owned(),
                },
                Some((model, "converse-stream")) => Ask {
                    route: Route::Bedrock,
                    stream: true,
                    model: model.to_owned(),
                },
                _ => Ask::unknown(),
            }
        } else if let Some((head, method)) = path.rsplit_once(':') {
            let model = head.rsplit('/').next().unwrap_or_default().to_owned();
            match method {
                "generateContent" => Ask {
                    route: Route::Gemini,
                    stream: false,
                    model,
                },
                "streamGenerateContent" => Ask {
                    route: Route::Gemini,
                    stream: true,
                    model,
                },
                _ => Ask::unknown(),
            }
        } else {
            Ask::unknown()
        }
    }

    fn unknown() -> Ask {
        Ask {
            route: Route::Unknown,
            stream: false,
            model: String::new(),
        }
    }

    /// The content type of a successful answer.
    pub fn content_type(&self) -> &'static str {
        match (self.route, self.stream) {
            (Route::Bedrock, true) => "application/vnd.amazon.eventstream",
            (_, true) => "text/event-stream",
            _ => "application/json",
        }
    }

    /// The successful answer as the chunks a provider sends: one for a whole JSON body, one per
    /// event for a stream. `padding` extra characters are added to the text of a JSON body.
    pub fn success_chunks(&self, padding: usize) -> Vec<Vec<u8>> {
        if self.stream {
            self.stream_events()
        } else {
            vec![self.json_body(padding)]
        }
    }

    /// The successful answer as one body.
    pub fn success_body(&self) -> Vec<u8> {
        self.success_chunks(0).concat()
    }

    fn json_body(&self, padding: usize) -> Vec<u8> {
        let text = format!("{CANNED_TEXT}{}", " ".repeat(padding));
        let (input, output) = CANNED_USAGE;
        let model = &self.model;
        let value = match self.route {
            Route::Anthropic => json!({
                "id": "msg_sim_01", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": output}
            }),
            Route::OpenAi => json!({
                "id": "chatcmpl-sim01", "object": "chat.completion", "created": 1_764_460_800,
                "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": input, "completion_tokens": output,
                          "total_tokens": input + output}
            }),
            Route::Gemini => json!({
                "candidates": [{"index": 0, "finishReason": "STOP",
                                "content": {"role": "model", "parts": [{"text": text}]}}],
                "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                                  "totalTokenCount": input + output},
                "modelVersion": model
            }),
            Route::Bedrock => json!({
                "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": input, "outputTokens": output,
                          "totalTokens": input + output},
                "metrics": {"latencyMs": 120}
            }),
            Route::AnthropicCount => json!({"input_tokens": input}),
            Route::Unknown => json!({"error": {"message": "no such route"}}),
        };
        value.to_string().into_bytes()
    }

    fn stream_events(&self) -> Vec<Vec<u8>> {
        let (input, output) = CANNED_USAGE;
        let model = &self.model;
        match self.route {
            Route::Anthropic => {
                let mut events = vec![
                    sse_named(
                        "message_start",
                        json!({"type": "message_start", "message": {
                        "id": "msg_sim_01", "type": "message", "role": "assistant",
                        "content": [], "model": model, "stop_reason": null,
                        "stop_sequence": null,
                        "usage": {"input_tokens": input, "output_tokens": 1}}}),
                    ),
                    sse_named(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}),
                    ),
                    sse_named("ping", json!({"type": "ping"})),
                ];
                events.extend(CANNED_PIECES.iter().map(|piece| {
                    sse_named(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": piece}}),
                    )
                }));
                events.extend([
                    sse_named(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ),
                    sse_named(
                        "message_delta",
                        json!({"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                               "usage": {"output_tokens": output}}),
                    ),
                    sse_named("message_stop", json!({"type": "message_stop"})),
                ]);
                events
            }
            Route::OpenAi => {
                let chunk = |delta: Value, finish: Value| {
                    sse_data(&json!({
                        "id": "chatcmpl-sim01", "object": "chat.completion.chunk",
                        "created": 1_764_460_800, "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                    }))
                };
                let mut events = vec![chunk(
                    json!({"role": "assistant", "content": ""}),
                    json!(null),
                )];
                events.extend(
                    CANNED_PIECES
                        .iter()
                        .map(|piece| chunk(json!({"content": piece}), json!(null))),
                );
                events.push(chunk(json!({}), json!("stop")));
                events.push(sse_data(&json!({
                    "id": "chatcmpl-sim01", "object": "chat.completion.chunk",
                    "created": 1_764_460_800, "model": model, "choices": [],
                    "usage": {"prompt_tokens": input, "completion_tokens": output,
                              "total_tokens": input + output}
                })));
                events.push(b"data: [DONE]\n\n".to_vec());
                events
            }
            Route::Gemini => {
                let last = CANNED_PIECES.len() - 1;
                CANNED_PIECES
                    .iter()
                    .enumerate()
                    .map(|(i, piece)| {
                        let mut value = json!({
                            "candidates": [{"index": 0, "content": {"role": "model",
                                                                    "parts": [{"text": piece}]}}],
                            "modelVersion": model
                        });
                        if i == last {
                            value["candidates"][0]["finishReason"] = json!("STOP");
                            value["usageMetadata"] = json!({
                                "promptTokenCount": input, "candidatesTokenCount": output,
                                "totalTokenCount": input + output});
                        }
                        format!("data: {value}\r\n\r\n").into_bytes()
                    })
                    .collect()
            }
            Route::Bedrock => {
                let mut events = vec![event_frame("messageStart", &json!({"role": "assistant"}))];
                events.extend(CANNED_PIECES.iter().map(|piece| {
                    event_frame(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": 0, "delta": {"text": piece}}),
                    )
                }));
                events.extend([
                    event_frame("contentBlockStop", &json!({"contentBlockIndex": 0})),
                    event_frame("messageStop", &json!({"stopReason": "end_turn"})),
                    event_frame(
                        "metadata",
                        &json!({"usage": {"inputTokens": input, "outputTokens": output,
                                          "totalTokens": input + output},
                                "metrics": {"latencyMs": 120}}),
                    ),
                ]);
                events
            }
            Route::AnthropicCount | Route::Unknown => vec![self.json_body(0)],
        }
    }

    /// The error body this format sends with `status`, and its content type.
    pub fn error_body(&self, status: u16) -> (Vec<u8>, &'static str) {
        let (kind, message) = match status {
            400 => ("invalid_request_error", "invalid request (simulated)"),
            401 => ("authentication_error", "invalid api key (simulated)"),
            404 => ("not_found_error", "no such route (simulated)"),
            429 => ("rate_limit_error", "rate limited (simulated)"),
            500..=599 => ("overloaded_error", "overloaded (simulated)"),
            _ => ("api_error", "error (simulated)"),
        };
        let value = match self.route {
            Route::Anthropic | Route::AnthropicCount => json!({"type": "error",
                                       "error": {"type": kind, "message": message}}),
            Route::Gemini => json!({"error": {"code": status, "message": message,
                                              "status": kind.to_ascii_uppercase()}}),
            Route::Bedrock => json!({"message": message}),
            Route::OpenAi | Route::Unknown => json!({"error": {"message": message, "type": kind,
                                                               "code": null}}),
        };
        (value.to_string().into_bytes(), "application/json")
    }
}

fn sse_named(event: &str, data: Value) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

fn sse_data(data: &Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// One AWS event-stream message: prelude (lengths and their CRC32), the `:event-type`,
/// `:content-type` and `:message-type` string headers, the JSON payload, and the message CRC32.
fn event_frame(kind: &str, payload: &Value) -> Vec<u8> {
    aws_event_message(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        &payload.to_string().into_bytes(),
    )
}

/// One AWS event-stream message with these string headers and this payload, exactly as
/// Bedrock's ConverseStream frames its events: the prelude (total and header lengths and their
/// CRC32), the headers (name length, name, type 7, value length, value), the payload and the
/// CRC32 of all of it. Names longer than 255 bytes or values longer than 65535 bytes are cut
/// to those lengths (the format cannot carry more); recorded event names are far shorter.
pub fn aws_event_message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        let name = &name.as_bytes()[..name.len().min(usize::from(u8::MAX))];
        let value = &value.as_bytes()[..value.len().min(usize::from(u16::MAX))];
        block.push(name.len() as u8);
        block.extend_from_slice(name);
        block.push(7);
        block.extend_from_slice(&(value.len() as u16).to_be_bytes());
        block.extend_from_slice(value);
    }
    let total = 12 + block.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(block.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&out);
    out.extend_from_slice(&message_crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_recognised() {
        let ask = Ask::of("/v1/messages", br#"{"model":"claude-x","stream":true}"#);
        assert_eq!(
            (ask.route, ask.stream, ask.model.as_str()),
            (Route::Anthropic, true, "claude-x")
        );
        let ask = Ask::of("/v1/chat/completions", br#"{"model":"gpt"}"#);
        assert_eq!((ask.route, ask.stream), (Route::OpenAi, false));
        let ask = Ask::of(
            "/v1beta/models/gemini-2.5:streamGenerateContent?alt=sse",
            b"{}",
        );
        assert_eq!(
            (ask.route, ask.stream, ask.model.as_str()),
            (Route::Gemini, true, "gemini-2.5")
        );
        let ask = Ask::of("/model/anthropic.claude-v2%3A1/converse", b"{}");
        assert_eq!((ask.route, ask.stream), (Route::Bedrock, false));
        let ask = Ask::of(
            "/v1/messages/count_tokens?beta=true",
            br#"{"model":"claude-x","stream":true}"#,
        );
        assert_eq!((ask.route, ask.stream), (Route::AnthropicCount, false));
        assert_eq!(ask.success_body(), br#"{"input_tokens":12}"#);
        assert_eq!(Ask::of("/v1/other", b"not json").route, Route::Unknown);
        assert_eq!(Ask::of("/x:y", b"").route, Route::Unknown);
    }

    #[test]
    fn event_frames_carry_valid_checksums() {
        let frame = event_frame("messageStop", &json!({"stopReason": "end_turn"}));
        let total = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(total, frame.len());
        let (body, crc) = frame.split_at(total - 4);
        assert_eq!(crc32fast::hash(body).to_be_bytes(), crc);
    }
}
