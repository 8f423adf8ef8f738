//! Bytes in arbitrary chunks: the SSE parser never panics and gives the same events as when the
//! body comes in one piece; each SSE-based stream decoder gives the same result whatever the
//! chunking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oma_component_fuzz::{adapter, chunks};
use oma_core::adapter::sse::SseParser;
use oma_core::adapter::{ResponseContext, StreamEvent};
use oma_core::error::Error;

/// Everything a decoder gives for `pieces`: the events up to the first error, and that error.
fn decode(selector: u8, pieces: &[&[u8]]) -> (Vec<StreamEvent>, Option<Error>) {
    let mut decoder = adapter(selector).stream_decoder(&ResponseContext::default());
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

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (head, body) = data.split_at(2);
    let sizes = [head[0], head[1], head[0] ^ head[1]];
    let pieces = chunks(body, &sizes);

    let mut whole = SseParser::new();
    let mut expected = whole.feed(body);
    expected.extend(whole.finish());
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in &pieces {
        events.extend(parser.feed(piece));
    }
    events.extend(parser.finish());
    assert_eq!(events, expected);

    // anthropic, openai, gemini and ai-sdk (newline-delimited JSON) read text streams.
    for selector in [0u8, 1, 5, 7] {
        let one = decode(selector, &[body]);
        let many = decode(selector, &pieces);
        // A failed stream may deliver more or fewer events before its error, depending on
        // where the chunks end; a successful one gives exactly the same events.
        assert_eq!(one.1, many.1, "selector {selector}");
        if one.1.is_none() {
            assert_eq!(one.0, many.0, "selector {selector}");
        }
    }
});
