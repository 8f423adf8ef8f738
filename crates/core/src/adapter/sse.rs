//! An incremental Server-Sent Events parser (the WHATWG event-stream format), for the streamed
//! responses of Anthropic, OpenAI-compatible providers and Gemini.
//!
//! Bytes go in as they arrive, in chunks of any size; complete events come out. A chunk boundary
//! is never an error: an unfinished line waits for the next chunk. [`SseParser::finish`] tells a
//! stream that ended mid-event apart from one that ended cleanly.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the event has one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a chunk; returns the events it completes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.skip_lf {
                self.skip_lf = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.line.extend_from_slice(&rest[..end]);
                    self.skip_lf = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        events.push(event);
                    }
                }
                None => {
                    self.line.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
        events
    }

    /// Ends the stream, dispatching an event whose closing blank line never came (providers
    /// sometimes omit it). Whether a stream that ends early is complete is for the wire format
    /// to judge (e.g. OpenAI's `[DONE]`, Anthropic's `message_stop`).
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: message_start\ndata: {\"a\":1}\n\n: comment\r\ndata: one\r\ndata: two\r\n\r\nevent: x\ndata:no-space\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            SseEvent {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: None,
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: Some("x".into()),
                data: "no-space".into(),
            },
        ]
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        for size in 1..STREAM.len() {
            let mut parser = SseParser::new();
            let mut events = Vec::new();
            for chunk in STREAM.as_bytes().chunks(size) {
                events.extend(parser.feed(chunk));
            }
            assert_eq!(parser.finish(), None);
            assert_eq!(events, expected(), "chunk size {size}");
        }
    }

    /// 20,000 events fed one byte at a time: each byte is looked at once, so this is linear.
    #[test]
    fn many_tiny_chunks_give_every_event() {
        let stream = "event: e\ndata: 0123456789\n\n".repeat(20_000);
        let mut parser = SseParser::new();
        let mut events = 0;
        for byte in stream.as_bytes().chunks(1) {
            for event in parser.feed(byte) {
                assert_eq!(event.event.as_deref(), Some("e"));
                assert_eq!(event.data, "0123456789");
                events += 1;
            }
        }
        assert_eq!(parser.finish(), None);
        assert_eq!(events, 20_000);
    }

    /// A 4 MiB line with no line break, in 1-byte then 64 KiB chunks: the unfinished line is
    /// only appended to, never searched again.
    #[test]
    fn a_huge_line_without_a_break_is_not_rescanned() {
        let line = format!("data: {}", "x".repeat(4 << 20));
        for size in [1, 1 << 16] {
            let mut parser = SseParser::new();
            for chunk in line.as_bytes().chunks(size) {
                assert!(parser.feed(chunk).is_empty());
            }
            let event = parser.finish().expect("the line is dispatched at the end");
            assert_eq!(event.data.len(), 4 << 20);
        }
    }

    #[test]
    fn a_missing_final_blank_line_still_dispatches() {
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: [DONE]").is_empty());
        assert_eq!(
            parser.finish(),
            Some(SseEvent {
                event: None,
                data: "[DONE]".into()
            })
        );
    }
}
