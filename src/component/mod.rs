//! The wit-bindgen glue: WIT values to and from the model, and the exports. Nothing else.

use std::cell::RefCell;

mod agent;
mod convert;

use crate::adapter as a;
use crate::call;
use crate::json;

use convert::*;

wit_bindgen::generate!({
    world: "component",
    path: "wit",
});

use exports::oma::agent::codec::Guest as Codec;
use exports::oma::agent::provider as p;
use oma::agent::types as wit;
use oma::agent::wire;

struct Component;

export!(Component);

impl Codec for Component {
    fn messages_from_json(json: String) -> Result<Vec<wit::LlmMessage>, wit::Error> {
        let messages = json::messages_from_json(&json)?;
        Ok(messages.into_iter().map(to_wit_message).collect())
    }

    fn messages_to_json(messages: Vec<wit::LlmMessage>) -> Result<String, wit::Error> {
        let messages = from_wit_messages_validated(messages)?;
        Ok(json::messages_to_json(&messages)?)
    }

    fn validate_messages(messages: Vec<wit::LlmMessage>) -> Result<(), wit::Error> {
        from_wit_messages_validated(messages)?;
        Ok(())
    }

    fn format_request(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
    ) -> Result<wire::HttpRequest, wit::Error> {
        let adapter = adapter_for(&endpoint)?;
        let request = from_wit_request(request)?;
        let http = adapter.format(&request, &from_wit_endpoint(endpoint))?;
        Ok(wire::HttpRequest {
            method: http.method,
            url: http.url,
            headers: http.headers,
            body: http.body,
        })
    }

    fn parse_response(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        body: Vec<u8>,
    ) -> Result<wire::LlmResponse, wit::Error> {
        let adapter = adapter_for(&endpoint)?;
        let request = from_wit_request(request)?;
        Ok(to_wit_response(adapter.parse(&request, &body)?))
    }
}

impl p::Guest for Component {
    type ChatStream = Stream;

    fn chat(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        options: p::CallOptions,
    ) -> Result<wire::LlmResponse, wit::Error> {
        let adapter = adapter_for(&endpoint)?;
        let request = from_wit_request(request)?;
        let response = call::chat(
            adapter.as_ref(),
            &request,
            &from_wit_endpoint(endpoint),
            &from_wit_options(options),
        )?;
        Ok(to_wit_response(response))
    }

    fn stream_chat(
        request: wire::ChatRequest,
        endpoint: wire::Endpoint,
        options: p::CallOptions,
    ) -> Result<p::ChatStream, wit::Error> {
        let adapter = adapter_for(&endpoint)?;
        let mut request = from_wit_request(request)?;
        request.stream = true;
        let stream = call::chat_stream(
            adapter.as_ref(),
            &request,
            &from_wit_endpoint(endpoint),
            &from_wit_options(options),
        )?;
        Ok(p::ChatStream::new(Stream(RefCell::new(stream))))
    }
}

/// A streamed turn, held by the host as a `chat-stream` resource.
struct Stream(RefCell<call::ChatStream>);

impl p::GuestChatStream for Stream {
    fn next(&self) -> Result<Option<p::StreamEvent>, wit::Error> {
        let event = self.0.borrow_mut().next_event()?;
        Ok(event.map(|event| match event {
            a::StreamEvent::Text(text) => p::StreamEvent::Text(text),
            a::StreamEvent::Reasoning(text) => p::StreamEvent::Reasoning(text),
            a::StreamEvent::ToolUse(call) => p::StreamEvent::ToolUse(to_wit_tool_use(call)),
            a::StreamEvent::Done(response) => p::StreamEvent::Done(to_wit_response(response)),
        }))
    }
}
