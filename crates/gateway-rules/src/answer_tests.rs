//! The chat routes' answers across dialects, natively: the stop sequence that ended an answer
//! (Anthropic names it; the others do not, and the answer says `null`), and the prompt cache's
//! counts whoever reported them (OpenAI's `cached_tokens`, Gemini's `cachedContentTokenCount`,
//! Anthropic's cache reads) in both routes' usage, whole and streamed.

use serde_json::{json, Value};

use crate::openai_tests::{
    serve, Answered, Canned, Client, Scripted, ANTHROPIC, KEY, OPENAI, OPENAI_KEY, TOKEN,
};
use crate::{Route, Settings};

const GEMINI: &str = "http://127.0.0.1:7";

fn settings() -> Result<Settings, crate::env::BadVariable> {
    let vars = [
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", ANTHROPIC),
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", OPENAI),
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", GEMINI),
        ("OMA_GATEWAY_TOKEN", TOKEN),
        ("OMA_GATEWAY_MAX_RETRIES", "0"),
    ];
    Settings::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

/// Sends a request for `model` on `route` (streamed when `stream`), the provider answering
/// `answer`.
fn exchange(route: Route, model: &str, stream: bool, answer: Canned) -> Answered {
    let mut body = json!({
        "model": model, "max_tokens": 64, "stream": stream,
        "messages": [{"role": "user", "content": "Hello?"}],
    });
    if stream && route == Route::ChatCompletions {
        body["stream_options"] = json!({"include_usage": true});
    }
    let transport = Scripted::default();
    transport.0.borrow_mut().answers = vec![answer].into();
    let mut client = Client {
        headers: vec![("authorization", format!("Bearer {TOKEN}"))],
        body: body.to_string().into_bytes(),
        transport: transport.clone(),
        reply: None,
        events: None,
    };
    let path = match route {
        Route::Messages => "/v1/messages",
        _ => "/v1/chat/completions",
    };
    let status = serve(settings(), "POST", path, &mut client);
    let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
    Answered {
        status,
        reply: client.reply,
        events: client.events,
        sent,
        log: Vec::new(),
    }
}

/// The data of each event of a stream (`[DONE]` as a string).
fn events(answered: &Answered) -> Vec<Value> {
    let text = answered.events.as_ref().expect("a stream");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .expect("a data line");
            serde_json::from_str(data).unwrap_or_else(|_| json!(data))
        })
        .collect()
}

fn json_answer(body: Value) -> Canned {
    (200, "application/json", body.to_string())
}

fn anthropic_answer() -> Canned {
    json_answer(json!({
        "id": "m", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "one two"}], "stop_reason": "stop_sequence",
        "stop_sequence": "THREE",
        "usage": {"input_tokens": 5, "output_tokens": 3, "cache_creation_input_tokens": 7,
                  "cache_read_input_tokens": 900},
    }))
}

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",",
    "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],",
    "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,",
    "\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,",
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,",
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"one two\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":",
    "\"stop_sequence\",\"stop_sequence\":\"THREE\"},\"usage\":{\"output_tokens\":3}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn openai_answer() -> Canned {
    json_answer(json!({
        "id": "c", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "one two"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 3, "total_tokens": 1003,
                  "prompt_tokens_details": {"cached_tokens": 896}},
    }))
}

const OPENAI_STREAM: &str = concat!(
    "data: {\"id\":\"c\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":",
    "{\"role\":\"assistant\",\"content\":\"one two\"}}]}\n\n",
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,",
    "\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":896}}}\n\n",
    "data: [DONE]\n\n",
);

fn gemini_answer() -> Canned {
    json_answer(json!({
        "candidates": [{"index": 0, "finishReason": "STOP",
                        "content": {"role": "model", "parts": [{"text": "one two"}]}}],
        "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 3,
                          "cachedContentTokenCount": 512},
    }))
}

#[test]
fn an_anthropic_answer_names_its_stop_sequence_whole_and_streamed() {
    let whole = exchange(
        Route::Messages,
        "anthropic/claude-x",
        false,
        anthropic_answer(),
    );
    assert_eq!(whole.status, 200, "{:?}", whole.reply);
    let message = whole.json();
    assert_eq!(message["stop_reason"], json!("stop_sequence"));
    assert_eq!(message["stop_sequence"], json!("THREE"));
    let sse = (200, "text/event-stream", ANTHROPIC_STREAM.to_owned());
    let streamed = exchange(Route::Messages, "anthropic/claude-x", true, sse);
    let delta = events(&streamed)
        .into_iter()
        .find(|e| e["type"] == json!("message_delta"))
        .expect("a message_delta");
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "THREE"})
    );
    // A target that names no sequence: `null`.
    let openai = exchange(Route::Messages, "openai/gpt-4o", false, openai_answer());
    assert_eq!(openai.json()["stop_sequence"], Value::Null);
}

#[test]
fn cache_reads_of_every_dialect_are_in_the_messages_usage() {
    // OpenAI and Gemini count cache reads in their input: out of `input_tokens` here.
    for (model, answer, cached) in [
        ("openai/gpt-4o", openai_answer(), 896),
        ("gemini/gemini-2.5-pro", gemini_answer(), 512),
    ] {
        let answered = exchange(Route::Messages, model, false, answer);
        assert_eq!(answered.status, 200, "{model}: {:?}", answered.reply);
        assert_eq!(
            answered.json()["usage"],
            json!({"input_tokens": 1000 - cached, "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": cached, "output_tokens": 3}),
            "{model}"
        );
    }
    let sse = (200, "text/event-stream", OPENAI_STREAM.to_owned());
    let streamed = exchange(Route::Messages, "openai/gpt-4o", true, sse);
    let delta = events(&streamed)
        .into_iter()
        .find(|e| e["type"] == json!("message_delta"))
        .expect("a message_delta");
    assert_eq!(
        delta["usage"],
        json!({"input_tokens": 104, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 896, "output_tokens": 3})
    );
}

#[test]
fn cache_reads_of_every_dialect_are_in_the_chat_usage() {
    for (model, answer, prompt, cached) in [
        ("openai/gpt-4o", openai_answer(), 1000, 896),
        ("gemini/gemini-2.5-pro", gemini_answer(), 1000, 512),
        ("anthropic/claude-x", anthropic_answer(), 912, 900),
    ] {
        let answered = exchange(Route::ChatCompletions, model, false, answer);
        assert_eq!(answered.status, 200, "{model}: {:?}", answered.reply);
        let usage = &answered.json()["usage"];
        assert_eq!(usage["prompt_tokens"], json!(prompt), "{model}: {usage}");
        assert_eq!(
            usage["prompt_tokens_details"],
            json!({"cached_tokens": cached}),
            "{model}: {usage}"
        );
    }
    for (model, stream, prompt, cached) in [
        ("openai/gpt-4o", OPENAI_STREAM, 1000, 896),
        ("anthropic/claude-x", ANTHROPIC_STREAM, 912, 900),
    ] {
        let sse = (200, "text/event-stream", stream.to_owned());
        let streamed = exchange(Route::ChatCompletions, model, true, sse);
        let usage = events(&streamed)
            .into_iter()
            .find_map(|e| e.get("usage").cloned())
            .expect("a usage chunk");
        assert_eq!(usage["prompt_tokens"], json!(prompt), "{model}: {usage}");
        assert_eq!(
            usage["prompt_tokens_details"],
            json!({"cached_tokens": cached}),
            "{model}: {usage}"
        );
    }
}
