//! The field table ([`crate::fields`]) through both chat routes, natively: for each field and a
//! target of each dialect, what reaches the (scripted) provider, or the `400` naming the field
//! and the target with nothing sent; `OMA_GATEWAY_DROP_PARAMS`; and the table in
//! `docs/gateway.md`.

use serde_json::{json, Value};

use crate::fields::{Dialect, FIELDS};
use crate::openai_tests::{
    serve, Answered, Canned, Client, Scripted, ANTHROPIC, KEY, OPENAI, OPENAI_KEY, TOKEN,
};
use crate::{Route, Settings};

const GEMINI: &str = "http://127.0.0.1:7";
const BEDROCK: &str = "http://127.0.0.1:6";

/// A target of each dialect, in [`Dialect::ALL`]'s order.
const TARGETS: [&str; 4] = [
    "openai/gpt-4o",
    "anthropic/claude-x",
    "gemini/gemini-2.5-pro",
    "bedrock/anthropic.claude-x",
];

fn settings(extra: &[(&str, &str)]) -> Result<Settings, crate::env::BadVariable> {
    let mut vars = vec![
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", ANTHROPIC),
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", OPENAI),
        ("GEMINI_API_KEY", KEY),
        ("GEMINI_BASE_URL", GEMINI),
        ("AWS_BEARER_TOKEN_BEDROCK", KEY),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", BEDROCK),
        ("OMA_GATEWAY_TOKEN", TOKEN),
        ("OMA_GATEWAY_MAX_RETRIES", "0"),
    ];
    vars.extend_from_slice(extra);
    Settings::from_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

/// A successful answer in the dialect of `target`.
fn answer(target: &str) -> Canned {
    let body = match Dialect::of(target.split('/').next().unwrap_or("")).expect("a dialect") {
        Dialect::OpenAi => json!({
            "id": "c", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }),
        Dialect::Anthropic => json!({
            "id": "m", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 3},
        }),
        Dialect::Gemini => json!({
            "candidates": [{"index": 0, "finishReason": "STOP",
                            "content": {"role": "model", "parts": [{"text": "ok"}]}}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
        }),
        Dialect::Bedrock => json!({
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn", "usage": {"inputTokens": 5, "outputTokens": 3},
        }),
    };
    (200, "application/json", body.to_string())
}

/// Sends `body` on `route` with `settings`, every provider answering with success.
fn exchange(
    settings: Result<Settings, crate::env::BadVariable>,
    route: Route,
    body: &Value,
) -> Answered {
    let transport = Scripted::default();
    let target = body["model"].as_str().unwrap_or("").to_owned();
    transport.0.borrow_mut().answers = vec![answer(&target), answer(&target)].into();
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
    let status = serve(settings, "POST", path, &mut client);
    let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
    let log = std::mem::take(&mut transport.0.borrow_mut().log);
    Answered {
        status,
        reply: client.reply,
        events: client.events,
        sent,
        log,
    }
}

/// A request on `route` to `target` with `field` set to `value`.
fn request(route: Route, target: &str, field: &str, value: &Value) -> Value {
    let mut body = json!({
        "model": target,
        "messages": [{"role": "user", "content": "Hello?"}],
        "max_tokens": 8000,
        "tools": [],
    });
    if route == Route::ChatCompletions {
        body["tools"] = json!([{"type": "function", "function": {"name": "look",
                                 "parameters": {"type": "object"}}}]);
    } else {
        body["tools"] = json!([{"name": "look", "input_schema": {"type": "object"}}]);
    }
    body[field] = value.clone();
    body
}

/// The value of the reply's header `name`.
fn header<'a>(reply: &'a crate::Reply, name: &str) -> Option<&'a str> {
    reply
        .headers
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

/// What a field becomes at one target.
#[derive(Clone, Debug)]
enum Want {
    /// Sent: the provider's request has this value at this JSON pointer.
    At(&'static str, Value),
    /// Accepted; the provider's request has nothing at this pointer.
    Not(&'static str),
    /// A `400` naming the field and the target; nothing sent.
    Refused,
}

use Want::{At, Not, Refused};

/// Checks one field's outcome at each target.
fn check(route: Route, field: &str, value: Value, wants: [Want; 4]) {
    for (target, want) in TARGETS.iter().zip(wants) {
        let answered = exchange(settings(&[]), route, &request(route, target, field, &value));
        let reply = answered.reply.as_ref().expect("a whole reply");
        let case = format!(
            "{field} = {value} to {target}: {} {}",
            reply.status, reply.body
        );
        match want {
            At(pointer, expected) => {
                assert_eq!(answered.status, 200, "{case}");
                let sent = answered.sent_json(0);
                assert_eq!(
                    sent.pointer(pointer),
                    Some(&expected),
                    "{case}: sent {sent}"
                );
            }
            Not(pointer) => {
                assert_eq!(answered.status, 200, "{case}");
                let sent = answered.sent_json(0);
                assert_eq!(sent.pointer(pointer), None, "{case}: sent {sent}");
            }
            Refused => {
                assert_eq!(answered.status, 400, "{case}");
                assert!(answered.sent.is_empty(), "{case}: something was sent");
                let message = reply.body.as_str();
                assert!(message.contains(&format!("`{field}`")), "{case}");
                assert!(message.contains(target), "{case}");
                assert!(!message.contains("SECRET"), "{case}");
            }
        }
    }
}

#[test]
fn openai_sampling_fields_pass_to_openai_and_are_mapped_or_refused_elsewhere() {
    let chat = Route::ChatCompletions;
    check(
        chat,
        "stop",
        json!(["END", "STOP"]),
        [
            At("/stop", json!(["END", "STOP"])),
            At("/stop_sequences", json!(["END", "STOP"])),
            At("/generationConfig/stopSequences", json!(["END", "STOP"])),
            At("/inferenceConfig/stopSequences", json!(["END", "STOP"])),
        ],
    );
    check(
        chat,
        "stop",
        json!("END"),
        [
            At("/stop", json!("END")),
            At("/stop_sequences", json!(["END"])),
            At("/generationConfig/stopSequences", json!(["END"])),
            At("/inferenceConfig/stopSequences", json!(["END"])),
        ],
    );
    check(
        chat,
        "seed",
        json!(42),
        [
            At("/seed", json!(42)),
            Refused,
            At("/generationConfig/seed", json!(42)),
            Refused,
        ],
    );
    for penalty in ["frequency_penalty", "presence_penalty"] {
        let pointer: &'static str = Box::leak(format!("/{penalty}").into_boxed_str());
        let gemini = if penalty == "frequency_penalty" {
            "/generationConfig/frequencyPenalty"
        } else {
            "/generationConfig/presencePenalty"
        };
        check(
            chat,
            penalty,
            json!(0.5),
            [
                At(pointer, json!(0.5)),
                Refused,
                At(gemini, json!(0.5)),
                Refused,
            ],
        );
    }
    check(
        chat,
        "top_p",
        json!(0.9),
        [
            At("/top_p", json!(0.9)),
            At("/top_p", json!(0.9)),
            At("/generationConfig/topP", json!(0.9)),
            At("/inferenceConfig/topP", json!(0.9)),
        ],
    );
    check(
        chat,
        "logit_bias",
        json!({"50256": -100}),
        [
            At("/logit_bias", json!({"50256": -100})),
            Refused,
            Refused,
            Refused,
        ],
    );
    check(
        chat,
        "max_completion_tokens",
        json!(300),
        [
            At("/max_completion_tokens", json!(300)),
            Not("/max_completion_tokens"),
            Not("/max_completion_tokens"),
            Not("/max_completion_tokens"),
        ],
    );
}

#[test]
fn openai_answer_shaping_fields_are_refused_where_the_answer_cannot_carry_them() {
    let chat = Route::ChatCompletions;
    let everywhere = || [Refused, Refused, Refused, Refused];
    check(chat, "logprobs", json!(true), everywhere());
    check(chat, "top_logprobs", json!(3), everywhere());
    check(chat, "n", json!(2), everywhere());
    check(
        chat,
        "audio",
        json!({"voice": "alloy", "format": "wav"}),
        everywhere(),
    );
    check(chat, "modalities", json!(["text", "audio"]), everywhere());
    check(chat, "web_search_options", json!({}), everywhere());
    check(chat, "functions", json!([{"name": "f"}]), everywhere());
    // Their no-op values are fine anywhere.
    let fine = || {
        [
            Not("/logprobs"),
            Not("/logprobs"),
            Not("/logprobs"),
            Not("/logprobs"),
        ]
    };
    // An OpenAI-compatible target is sent the client's own request, the no-op value as written.
    check(
        chat,
        "logprobs",
        json!(false),
        [
            At("/logprobs", json!(false)),
            Not("/logprobs"),
            Not("/logprobs"),
            Not("/logprobs"),
        ],
    );
    check(chat, "n", json!(1), fine());
    check(chat, "modalities", json!(["text"]), fine());
}

#[test]
fn openai_structured_output_reaches_openai_and_anthropic_with_its_schema() {
    let chat = Route::ChatCompletions;
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let format = json!({"type": "json_schema",
                        "json_schema": {"name": "answer", "schema": schema, "strict": true}});
    check(
        chat,
        "response_format",
        format.clone(),
        [
            At("/response_format", format),
            At(
                "/output_config/format",
                json!({"type": "json_schema", "schema": schema}),
            ),
            At("/generationConfig/responseJsonSchema", schema.clone()),
            Refused,
        ],
    );
    check(
        chat,
        "response_format",
        json!({"type": "json_object"}),
        [
            At("/response_format", json!({"type": "json_object"})),
            Refused,
            At(
                "/generationConfig/responseMimeType",
                json!("application/json"),
            ),
            Refused,
        ],
    );
    check(
        chat,
        "response_format",
        json!({"type": "text"}),
        [
            At("/response_format", json!({"type": "text"})),
            Not("/output_config"),
            Not("/generationConfig/responseMimeType"),
            Not("/additionalModelRequestFields"),
        ],
    );
}

#[test]
fn openai_tool_choice_and_parallel_calls_keep_their_meaning() {
    let chat = Route::ChatCompletions;
    let function = json!({"type": "function", "function": {"name": "look"}});
    check(
        chat,
        "tool_choice",
        function.clone(),
        [
            At("/tool_choice", function),
            At("/tool_choice", json!({"type": "tool", "name": "look"})),
            At(
                "/toolConfig/functionCallingConfig",
                json!({"mode": "ANY", "allowedFunctionNames": ["look"]}),
            ),
            At("/toolConfig/toolChoice", json!({"tool": {"name": "look"}})),
        ],
    );
    check(
        chat,
        "tool_choice",
        json!("required"),
        [
            At("/tool_choice", json!("required")),
            At("/tool_choice", json!({"type": "any"})),
            At("/toolConfig/functionCallingConfig", json!({"mode": "ANY"})),
            At("/toolConfig/toolChoice", json!({"any": {}})),
        ],
    );
    check(
        chat,
        "tool_choice",
        json!("none"),
        [
            At("/tool_choice", json!("none")),
            At("/tool_choice", json!({"type": "none"})),
            Not("/tools"),
            Not("/toolConfig"),
        ],
    );
    check(
        chat,
        "parallel_tool_calls",
        json!(false),
        [
            At("/parallel_tool_calls", json!(false)),
            At(
                "/tool_choice",
                json!({"type": "auto", "disable_parallel_tool_use": true}),
            ),
            Refused,
            Refused,
        ],
    );
    // Both together to Anthropic: one tool_choice with both meanings.
    let mut body = request(chat, TARGETS[1], "tool_choice", &json!("required"));
    body["parallel_tool_calls"] = json!(false);
    let answered = exchange(settings(&[]), chat, &body);
    assert_eq!(answered.status, 200);
    assert_eq!(
        answered.sent_json(0)["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
}

#[test]
fn openai_reasoning_user_and_openais_own_fields() {
    let chat = Route::ChatCompletions;
    check(
        chat,
        "reasoning_effort",
        json!("medium"),
        [
            At("/reasoning_effort", json!("medium")),
            At(
                "/thinking",
                json!({"type": "enabled", "budget_tokens": 2048}),
            ),
            At(
                "/generationConfig/thinkingConfig/thinkingBudget",
                json!(2048),
            ),
            Refused,
        ],
    );
    check(
        chat,
        "user",
        json!("u-1"),
        [
            At("/user", json!("u-1")),
            At("/metadata", json!({"user_id": "u-1"})),
            Refused,
            Refused,
        ],
    );
    for (field, value) in [
        ("store", json!(true)),
        ("service_tier", json!("flex")),
        ("metadata", json!({"k": "v"})),
        ("prediction", json!({"type": "content", "content": "x"})),
        ("prompt_cache_key", json!("k")),
        ("safety_identifier", json!("s")),
        ("verbosity", json!("low")),
        // A field the table does not name: OpenAI's dialect only.
        ("future_field", json!({"x": 1})),
    ] {
        let pointer: &'static str = Box::leak(format!("/{field}").into_boxed_str());
        check(
            chat,
            field,
            value.clone(),
            [At(pointer, value), Refused, Refused, Refused],
        );
    }
}

#[test]
fn anthropic_fields_pass_to_anthropic_and_are_mapped_or_refused_elsewhere() {
    let messages = Route::Messages;
    check(
        messages,
        "stop_sequences",
        json!(["END"]),
        [
            At("/stop", json!(["END"])),
            At("/stop_sequences", json!(["END"])),
            At("/generationConfig/stopSequences", json!(["END"])),
            At("/inferenceConfig/stopSequences", json!(["END"])),
        ],
    );
    check(
        messages,
        "top_k",
        json!(40),
        [
            At("/top_k", json!(40)),
            At("/top_k", json!(40)),
            At("/generationConfig/topK", json!(40)),
            At("/additionalModelRequestFields/top_k", json!(40)),
        ],
    );
    check(
        messages,
        "metadata",
        json!({"user_id": "u-1"}),
        [
            At("/user", json!("u-1")),
            At("/metadata", json!({"user_id": "u-1"})),
            Refused,
            Refused,
        ],
    );
    check(
        messages,
        "tool_choice",
        json!({"type": "tool", "name": "look", "disable_parallel_tool_use": true}),
        [
            At(
                "/tool_choice",
                json!({"type": "function", "function": {"name": "look"}}),
            ),
            At(
                "/tool_choice",
                json!({"type": "tool", "name": "look", "disable_parallel_tool_use": true}),
            ),
            Refused,
            Refused,
        ],
    );
    check(
        messages,
        "tool_choice",
        json!({"type": "any"}),
        [
            At("/tool_choice", json!("required")),
            At("/tool_choice", json!({"type": "any"})),
            At("/toolConfig/functionCallingConfig", json!({"mode": "ANY"})),
            At("/toolConfig/toolChoice", json!({"any": {}})),
        ],
    );
    check(
        messages,
        "thinking",
        json!({"type": "enabled", "budget_tokens": 4096}),
        [
            At("/reasoning_effort", json!("medium")),
            At(
                "/thinking",
                json!({"type": "enabled", "budget_tokens": 4096}),
            ),
            At(
                "/generationConfig/thinkingConfig/thinkingBudget",
                json!(4096),
            ),
            At(
                "/additionalModelRequestFields/thinking",
                json!({"type": "enabled", "budget_tokens": 4096}),
            ),
        ],
    );
    // Bedrock's other models have no thinking to turn on.
    let nova = request(
        messages,
        "bedrock/amazon.nova-pro-v1:0",
        "thinking",
        &json!({"type": "enabled", "budget_tokens": 4096}),
    );
    let refused = exchange(settings(&[]), messages, &nova);
    assert_eq!(refused.status, 400);
    assert!(refused.sent.is_empty());
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    check(
        messages,
        "output_config",
        json!({"format": {"type": "json_schema", "schema": schema}}),
        [
            At(
                "/response_format",
                json!({"type": "json_schema",
                       "json_schema": {"name": "output", "schema": schema, "strict": true}}),
            ),
            At(
                "/output_config",
                json!({"format": {"type": "json_schema", "schema": schema}}),
            ),
            At("/generationConfig/responseJsonSchema", schema.clone()),
            Refused,
        ],
    );
    for (field, value) in [
        ("service_tier", json!("auto")),
        ("container", json!("c-1")),
        (
            "mcp_servers",
            json!([{"type": "url", "url": "https://x", "name": "x"}]),
        ),
        ("context_management", json!({"edits": []})),
        ("future_field", json!(1)),
    ] {
        let pointer: &'static str = Box::leak(format!("/{field}").into_boxed_str());
        check(
            messages,
            field,
            value.clone(),
            [Refused, At(pointer, value), Refused, Refused],
        );
    }
}

#[test]
fn a_value_of_the_wrong_shape_is_refused_whatever_the_setting() {
    let drop_all = || settings(&[("OMA_GATEWAY_DROP_PARAMS", "true")]);
    for (route, field, value, target) in [
        (Route::ChatCompletions, "stop", json!(7), TARGETS[1]),
        (Route::ChatCompletions, "tool_choice", json!(3), TARGETS[1]),
        (
            Route::ChatCompletions,
            "reasoning_effort",
            json!("lots"),
            TARGETS[1],
        ),
        (Route::Messages, "top_k", json!("many"), TARGETS[0]),
        (
            Route::Messages,
            "metadata",
            json!({"user_id": 5}),
            TARGETS[0],
        ),
    ] {
        let answered = exchange(drop_all(), route, &request(route, target, field, &value));
        assert_eq!(answered.status, 400, "{field} {value}");
        assert!(answered.sent.is_empty());
        let body = &answered.reply.as_ref().expect("a reply").body;
        assert!(body.contains(&format!("`{field}`")), "{body}");
    }
}

#[test]
fn drop_params_turns_refusals_into_named_drops() {
    let chat = Route::ChatCompletions;
    let mut body = request(chat, TARGETS[1], "seed", &json!(42));
    body["logprobs"] = json!(true);
    body["stop"] = json!("END");
    // Unset: the first refusal is a 400, nothing sent.
    let refused = exchange(settings(&[]), chat, &body);
    assert_eq!(refused.status, 400);
    assert!(refused.sent.is_empty());
    // Every refusal dropped: the rest reaches the provider; the header and the log name them.
    let dropped = exchange(
        settings(&[("OMA_GATEWAY_DROP_PARAMS", "true")]),
        chat,
        &body,
    );
    assert_eq!(dropped.status, 200, "{:?}", dropped.reply);
    let sent = dropped.sent_json(0);
    assert_eq!(sent["stop_sequences"], json!(["END"]));
    assert!(
        sent.get("seed").is_none() && sent.get("logprobs").is_none(),
        "{sent}"
    );
    let reply = dropped.reply.as_ref().expect("a reply");
    assert_eq!(
        header(reply, crate::DROPPED_HEADER),
        Some("seed, logprobs"),
        "{:?}",
        reply.headers
    );
    assert!(
        dropped.log.iter().any(|line| line
            == "oma-gateway: dropped for anthropic/claude-x (OMA_GATEWAY_DROP_PARAMS): seed, logprobs\n"),
        "{:?}",
        dropped.log
    );
    // A list drops only the fields it names.
    let some = exchange(
        settings(&[("OMA_GATEWAY_DROP_PARAMS", "seed")]),
        chat,
        &body,
    );
    assert_eq!(some.status, 400);
    assert!(some
        .reply
        .as_ref()
        .expect("a reply")
        .body
        .contains("`logprobs`"));
    let both = settings(&[("OMA_GATEWAY_DROP_PARAMS", " seed , logprobs")]);
    assert_eq!(exchange(both, chat, &body).status, 200);
    // Nothing is dropped for a target that takes everything.
    body["model"] = json!(TARGETS[0]);
    body.as_object_mut().expect("an object").remove("logprobs");
    let same = exchange(
        settings(&[("OMA_GATEWAY_DROP_PARAMS", "true")]),
        chat,
        &body,
    );
    assert_eq!(same.status, 200);
    assert_eq!(same.sent_json(0)["seed"], json!(42));
    let reply = same.reply.as_ref().expect("a reply");
    assert_eq!(header(reply, crate::DROPPED_HEADER), None);
    // A malformed setting is the operator's error.
    let bad = settings(&[("OMA_GATEWAY_DROP_PARAMS", "seed;rm -rf")]).expect_err("malformed");
    assert_eq!(bad.name, "OMA_GATEWAY_DROP_PARAMS");
}

#[test]
fn a_fallback_that_refuses_a_field_is_skipped_and_one_that_drops_it_is_tried() {
    let fallbacks = r#"{"openai/gpt-4o": ["anthropic/claude-x"]}"#;
    let mut body = request(Route::ChatCompletions, TARGETS[0], "seed", &json!(42));
    body["stop"] = json!("END");
    let failing = |settings| {
        let transport = Scripted::default();
        transport.0.borrow_mut().answers = vec![
            (
                503,
                "application/json",
                r#"{"error":{"message":"busy"}}"#.to_owned(),
            ),
            answer(TARGETS[1]),
        ]
        .into();
        let mut client = Client {
            headers: vec![("authorization", format!("Bearer {TOKEN}"))],
            body: body.to_string().into_bytes(),
            transport: transport.clone(),
            reply: None,
            events: None,
        };
        let status = serve(settings, "POST", "/v1/chat/completions", &mut client);
        let sent = std::mem::take(&mut transport.0.borrow_mut().sent);
        (status, sent, client.reply)
    };
    // The fallback cannot take `seed`: skipped, and the first target's failure is the answer.
    let (status, sent, _) = failing(settings(&[("OMA_GATEWAY_FALLBACKS", fallbacks)]));
    assert_eq!(status, 503);
    assert_eq!(sent.len(), 1);
    // With `seed` droppable, the fallback is tried without it, its answer naming the drop.
    let (status, sent, reply) = failing(settings(&[
        ("OMA_GATEWAY_FALLBACKS", fallbacks),
        ("OMA_GATEWAY_DROP_PARAMS", "seed"),
    ]));
    assert_eq!(status, 200);
    assert_eq!(sent.len(), 2);
    let second: Value = serde_json::from_str(&sent[1].body).expect("JSON");
    assert_eq!(second["stop_sequences"], json!(["END"]));
    assert!(second.get("seed").is_none());
    let first: Value = serde_json::from_str(&sent[0].body).expect("JSON");
    assert_eq!(first["seed"], json!(42));
    assert_eq!(
        header(&reply.expect("a reply"), crate::DROPPED_HEADER),
        Some("seed")
    );
}

#[test]
fn every_field_of_the_table_is_named_once_per_route() {
    for field in FIELDS {
        let same = FIELDS
            .iter()
            .filter(|f| f.route == field.route && f.name == field.name)
            .count();
        assert_eq!(same, 1, "{} twice", field.name);
    }
}

#[test]
fn docs_show_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gateway.md");
    let page = std::fs::read_to_string(path).expect("docs/gateway.md");
    let (start, end) = ("<!-- fields: start -->\n", "<!-- fields: end -->");
    let from = page.find(start).expect("the table's start marker") + start.len();
    let to = page.find(end).expect("the table's end marker");
    let table = crate::fields::markdown();
    assert!(
        page[from..to] == table,
        "docs/gateway.md's field table is not the code's; put this between the markers:\n{table}"
    );
}

/// Sends `body` on `route` (its model the target) with `extra` settings: the status, the
/// reply's body and the requests sent.
fn nested(route: Route, body: &Value, extra: &[(&str, &str)]) -> Answered {
    exchange(settings(extra), route, body)
}

/// Checks that a nested field at `path` (row `row`) is refused at `target`: a `400` naming its
/// place, the target and its row, nothing sent; dropped (the row named in the header) under
/// `OMA_GATEWAY_DROP_PARAMS`.
fn refused_nested(route: Route, body: &Value, path: &str, row: &str) {
    let target = body["model"].as_str().expect("a model");
    let answered = nested(route, body, &[]);
    let reply = answered.reply.as_ref().expect("a whole reply");
    let case = format!("{path} to {target}: {} {}", reply.status, reply.body);
    assert_eq!(answered.status, 400, "{case}");
    assert!(answered.sent.is_empty(), "{case}: something was sent");
    assert!(reply.body.contains(&format!("`{path}`")), "{case}");
    assert!(reply.body.contains(target), "{case}");
    assert!(reply.body.contains(&format!("`{row}`")), "{case}");
    let dropped = nested(route, body, &[("OMA_GATEWAY_DROP_PARAMS", row)]);
    assert_eq!(dropped.status, 200, "{case}: {:?}", dropped.reply);
    let reply = dropped.reply.as_ref().expect("a whole reply");
    assert_eq!(header(reply, crate::DROPPED_HEADER), Some(row), "{case}");
}

#[test]
fn nested_chat_fields_pass_to_openai_and_are_decided_elsewhere() {
    let chat = Route::ChatCompletions;
    for target in TARGETS {
        let own = target.starts_with("openai/");
        // Checks the nested field at `path` (row `row`): the client's own request reaches an
        // OpenAI-compatible target with it as written; the others refuse it by its place.
        let decided = |body: &Value, path: &str, row: &str, pointer: &str| {
            if own {
                let answered = nested(chat, body, &[]);
                assert_eq!(answered.status, 200, "{path}: {:?}", answered.reply);
                let sent = answered.sent_json(0);
                assert_eq!(
                    sent.pointer(pointer),
                    body.pointer(pointer),
                    "{path}: {sent}"
                );
                assert!(sent.pointer(pointer).is_some(), "{path}: {sent}");
            } else {
                refused_nested(chat, body, path, row);
            }
        };
        // A participant name.
        let mut body = request(chat, target, "n", &json!(1));
        body["messages"] = json!([{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Hello?", "name": "ann"}]);
        decided(
            &body,
            "messages[1].name",
            "messages[].name",
            "/messages/1/name",
        );
        // `null` is not sent.
        body["messages"][1]["name"] = Value::Null;
        assert_eq!(nested(chat, &body, &[]).status, 200, "{target}");
        // An image's detail: `auto` is every target's default, another level has no place in
        // OMA's image block.
        let image = |detail: &str| {
            json!([{"role": "user", "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=",
                                                    "detail": detail}}]}])
        };
        body["messages"] = image("auto");
        assert_eq!(nested(chat, &body, &[]).status, 200, "{target}");
        body["messages"] = image("high");
        decided(
            &body,
            "messages[0].content[1].image_url.detail",
            "messages[].content[].image_url.detail",
            "/messages/0/content/1/image_url/detail",
        );
        if !own {
            body["messages"] = image("bright");
            let wrong = nested(chat, &body, &[("OMA_GATEWAY_DROP_PARAMS", "true")]);
            assert_eq!(wrong.status, 400, "a wrong shape is never dropped");
        }
        // A strict function.
        body["messages"] = json!([{"role": "user", "content": "Hello?"}]);
        body["tools"][0]["function"]["strict"] = json!(false);
        assert_eq!(nested(chat, &body, &[]).status, 200, "{target}");
        body["tools"][0]["function"]["strict"] = json!(true);
        decided(
            &body,
            "tools[0].function.strict",
            "tools[].function.strict",
            "/tools/0/function/strict",
        );
        // A member no row names: passed to the client's own dialect, refused elsewhere.
        body["tools"][0]["function"]
            .as_object_mut()
            .expect("a function")
            .remove("strict");
        body["messages"] = json!([{"role": "user", "content": "Look."},
            {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "index": 0,
             "function": {"name": "look", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "seen"}]);
        decided(
            &body,
            "messages[1].tool_calls[0].index",
            "messages[].tool_calls[].index",
            "/messages/1/tool_calls/0/index",
        );
    }
}

#[test]
fn a_request_rebuilt_for_an_openai_target_refuses_the_nested_fields_it_would_lose() {
    // A tool message with an image: OpenAI's tool messages hold text, so the request is
    // rebuilt from OMA's (the image in a user message after it), which has no place for a
    // participant name.
    let chat = Route::ChatCompletions;
    let mut body = request(chat, TARGETS[0], "n", &json!(1));
    body["messages"] = json!([{"role": "user", "content": "Look.", "name": "ann"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [
            {"type": "text", "text": "seen"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]);
    refused_nested(chat, &body, "messages[0].name", "messages[].name");
    let answered = nested(chat, &body, &[]);
    let text = &answered.reply.as_ref().expect("a reply").body;
    assert!(text.contains("rebuilt"), "{text}");
    // Without the name it is sent rebuilt, the image after the tool message.
    body["messages"][0]
        .as_object_mut()
        .expect("a message")
        .remove("name");
    let answered = nested(chat, &body, &[]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    let sent = answered.sent_json(0);
    assert_eq!(sent["messages"][3]["role"], "user", "{sent}");
    assert_eq!(
        sent["messages"][3]["content"][1]["type"], "image_url",
        "{sent}"
    );
    // So is a media URL given as a string, which OpenAI's own API takes as `{"url"}`.
    body["messages"] = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": "https://example.com/a.png"}]}]);
    let answered = nested(chat, &body, &[]);
    assert_eq!(answered.status, 200, "{:?}", answered.reply);
    assert_eq!(
        answered.sent_json(0)["messages"][0]["content"][0]["image_url"],
        json!({"url": "https://example.com/a.png"})
    );
}

#[test]
fn nested_messages_fields_pass_to_anthropic_and_are_decided_elsewhere() {
    let messages = Route::Messages;
    let cited = json!([{"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi.",
                                           "citations": [{"type": "char_location"}]}]},
        {"role": "user", "content": "And?"}]);
    let web = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3});
    for target in TARGETS {
        let mut body = request(messages, target, "max_tokens", &json!(8000));
        body["messages"] = cited.clone();
        if target.starts_with("anthropic/") {
            // The client's own request: every nested field as written.
            let answered = nested(messages, &body, &[]);
            assert_eq!(answered.status, 200, "{:?}", answered.reply);
            let sent = answered.sent_json(0);
            assert_eq!(
                sent["messages"][1]["content"][0]["citations"],
                json!([{"type": "char_location"}])
            );
            body["tools"] = json!([web]);
            let answered = nested(messages, &body, &[]);
            assert_eq!(answered.status, 200, "{:?}", answered.reply);
            assert_eq!(answered.sent_json(0)["tools"][0], web);
            continue;
        }
        refused_nested(
            messages,
            &body,
            "messages[1].content[0].citations",
            "messages[].content[].citations",
        );
        body["messages"] = json!([{"role": "user", "content": "Hello?"}]);
        body["tools"] = json!([{"type": "custom", "name": "look",
                                "input_schema": {"type": "object"}}]);
        assert_eq!(nested(messages, &body, &[]).status, 200, "{target}");
        body["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
        let answered = nested(messages, &body, &[]);
        assert_eq!(answered.status, 400, "{target}");
        let text = &answered.reply.as_ref().expect("a reply").body;
        assert!(text.contains("`tools[0].type`"), "{text}");
        // A member no row names, on a message, a block or a tool: refused by its place.
        body["tools"] = json!([{"name": "look", "input_schema": {"type": "object"},
                                "input_examples": [{}]}]);
        refused_nested(
            messages,
            &body,
            "tools[0].input_examples",
            "tools[].input_examples",
        );
    }
}

#[test]
fn mapped_objects_refuse_the_members_they_have_no_place_for() {
    let chat = Route::ChatCompletions;
    let choice = json!({"type": "function", "function": {"name": "look", "strict": true}});
    check(
        chat,
        "tool_choice",
        choice.clone(),
        [At("/tool_choice", choice), Refused, Refused, Refused],
    );
    let format = json!({"type": "json_schema", "json_schema": {
        "name": "a", "schema": {"type": "object"}, "description": "the answer"}});
    check(
        chat,
        "response_format",
        format.clone(),
        [At("/response_format", format), Refused, Refused, Refused],
    );
    let messages = Route::Messages;
    let choice = json!({"type": "auto", "extra": 1});
    check(
        messages,
        "tool_choice",
        choice.clone(),
        [Refused, At("/tool_choice", choice), Refused, Refused],
    );
}
