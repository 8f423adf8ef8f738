//! The AWS event stream framing (`application/vnd.amazon.eventstream`), decoded incrementally.
//!
//! A message is a 12-byte prelude (total length, headers length, CRC32 of the first eight
//! bytes, all big-endian), the headers, the payload, and a CRC32 of everything before it.
//! Bytes go in as they arrive; complete, checksum-verified messages come out. A chunk boundary
//! anywhere is never an error: an unfinished message waits for more bytes, and only
//! [`EventStreamDecoder::finish`] tells a stream cut mid-message apart from a clean end.

use crate::error::Error;

use super::NAME;

/// Prelude (12) plus message CRC (4): the smallest possible message.
const MIN_MESSAGE: usize = 16;
/// The largest message accepted (AWS caps event stream messages at 16 MiB), so a corrupt
/// length cannot make the decoder buffer without bound.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// One header value, by its wire type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValue {
    /// Types 0 and 1.
    Bool(bool),
    /// Type 2.
    Byte(i8),
    /// Type 3.
    Short(i16),
    /// Type 4.
    Int(i32),
    /// Type 5.
    Long(i64),
    /// Type 6.
    Bytes(Vec<u8>),
    /// Type 7 (UTF-8; invalid sequences are replaced).
    String(String),
    /// Type 8: milliseconds since the epoch.
    Timestamp(i64),
    /// Type 9.
    Uuid([u8; 16]),
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The headers, in wire order.
    pub headers: Vec<(String, HeaderValue)>,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

impl Message {
    /// The value of a string header such as `:event-type`.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, v)| match v {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// The decoder's state between chunks.
#[derive(Debug, Default)]
pub struct EventStreamDecoder {
    buffer: Vec<u8>,
    failed: Option<Error>,
}

impl EventStreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a chunk; returns the messages it completes, or an error for a frame that is
    /// invalid (bad length, checksum or header), never for one that is merely unfinished.
    ///
    /// Messages completed before an invalid frame are returned first; the error then comes
    /// from the next call, and from every call after it.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Message>, Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        self.buffer.extend_from_slice(bytes);
        let mut messages = Vec::new();
        let mut start = 0;
        let result = loop {
            match frame(&self.buffer[start..]) {
                Ok(Some((message, used))) => {
                    messages.push(message);
                    start += used;
                }
                Ok(None) => break Ok(messages),
                Err(error) => {
                    self.failed = Some(error.clone());
                    break if messages.is_empty() {
                        Err(error)
                    } else {
                        Ok(messages)
                    };
                }
            }
        };
        self.buffer.drain(..start);
        result
    }

    /// Ends the stream: an error if it stopped in the middle of a message.
    pub fn finish(&mut self) -> Result<(), Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.buffer.is_empty() {
            Ok(())
        } else {
            Err(malformed(format!(
                "event stream ended inside a message ({} bytes left)",
                self.buffer.len()
            )))
        }
    }
}

fn malformed(what: impl std::fmt::Display) -> Error {
    crate::adapter::malformed(NAME, what)
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// CRC-32 (ISO-HDLC, the checksum of the AWS event-stream framing), with one 1 KB table:
/// messages are small, and the 16 KB tables of a faster variant would be a sizeable part of the
/// component.
fn crc32(bytes: &[u8]) -> u32 {
    const CRC: crc::Crc<u32, crc::Table<1>> =
        crc::Crc::<u32, crc::Table<1>>::new(&crc::CRC_32_ISO_HDLC);
    CRC.checksum(bytes)
}

/// One message from the front of `bytes`, with the bytes it used; `None` if more are needed.
fn frame(bytes: &[u8]) -> Result<Option<(Message, usize)>, Error> {
    let (Some(total), Some(headers_len), Some(prelude_crc)) =
        (be_u32(bytes, 0), be_u32(bytes, 4), be_u32(bytes, 8))
    else {
        return Ok(None);
    };
    if crc32(&bytes[..8]) != prelude_crc {
        return Err(malformed("event stream prelude checksum mismatch"));
    }
    let (total, headers_len) = (total as usize, headers_len as usize);
    if !(MIN_MESSAGE..=MAX_MESSAGE).contains(&total) || headers_len > total - MIN_MESSAGE {
        return Err(malformed(format!(
            "event stream message lengths out of range (total {total}, headers {headers_len})"
        )));
    }
    let Some(message) = bytes.get(..total) else {
        return Ok(None);
    };
    let body_end = total - 4;
    if be_u32(message, body_end) != Some(crc32(&message[..body_end])) {
        return Err(malformed("event stream message checksum mismatch"));
    }
    let headers = headers(&message[12..12 + headers_len])?;
    let payload = message[12 + headers_len..body_end].to_vec();
    Ok(Some((Message { headers, payload }, total)))
}

/// A little reader over the header block; `None` means it ran out of bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Some(out)
    }
}

fn headers(block: &[u8]) -> Result<Vec<(String, HeaderValue)>, Error> {
    let mut reader = Reader(block);
    let mut out = Vec::new();
    while !reader.0.is_empty() {
        let header = read_header(&mut reader)
            .ok_or_else(|| malformed("event stream header block is invalid"))?;
        out.push(header);
    }
    Ok(out)
}

fn read_header(r: &mut Reader<'_>) -> Option<(String, HeaderValue)> {
    let [name_len] = r.array::<1>()?;
    let name = String::from_utf8_lossy(r.take(name_len as usize)?).into_owned();
    let [kind] = r.array::<1>()?;
    let value = match kind {
        0 => HeaderValue::Bool(true),
        1 => HeaderValue::Bool(false),
        2 => HeaderValue::Byte(i8::from_be_bytes(r.array()?)),
        3 => HeaderValue::Short(i16::from_be_bytes(r.array()?)),
        4 => HeaderValue::Int(i32::from_be_bytes(r.array()?)),
        5 => HeaderValue::Long(i64::from_be_bytes(r.array()?)),
        6 | 7 => {
            let len = u16::from_be_bytes(r.array()?) as usize;
            let bytes = r.take(len)?;
            if kind == 6 {
                HeaderValue::Bytes(bytes.to_vec())
            } else {
                HeaderValue::String(String::from_utf8_lossy(bytes).into_owned())
            }
        }
        8 => HeaderValue::Timestamp(i64::from_be_bytes(r.array()?)),
        9 => HeaderValue::Uuid(r.array()?),
        _ => return None,
    };
    Some((name, value))
}

/// Encodes a message (used to build recorded streams in tests, and by anyone replaying one).
pub fn encode(headers: &[(&str, HeaderValue)], payload: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        match value {
            HeaderValue::Bool(true) => block.push(0),
            HeaderValue::Bool(false) => block.push(1),
            HeaderValue::Byte(v) => {
                block.push(2);
                block.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Short(v) => {
                block.push(3);
                block.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Int(v) => {
                block.push(4);
                block.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Long(v) => {
                block.push(5);
                block.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Bytes(v) => {
                block.push(6);
                block.extend_from_slice(&(v.len() as u16).to_be_bytes());
                block.extend_from_slice(v);
            }
            HeaderValue::String(v) => {
                block.push(7);
                block.extend_from_slice(&(v.len() as u16).to_be_bytes());
                block.extend_from_slice(v.as_bytes());
            }
            HeaderValue::Timestamp(v) => {
                block.push(8);
                block.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Uuid(v) => {
                block.push(9);
                block.extend_from_slice(v);
            }
        }
    }
    let total = (MIN_MESSAGE + block.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(block.len() as u32).to_be_bytes());
    let prelude_crc = crc32(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&block);
    out.extend_from_slice(payload);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC-32 check value (ISO-HDLC: the checksum of "123456789" is 0xCBF43926).
    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    fn event(kind: &str, payload: &str) -> Vec<u8> {
        encode(
            &[
                (":event-type", HeaderValue::String(kind.into())),
                (
                    ":content-type",
                    HeaderValue::String("application/json".into()),
                ),
                (":message-type", HeaderValue::String("event".into())),
            ],
            payload.as_bytes(),
        )
    }

    /// The AWS-documented example frame with no headers and no payload: total length 16,
    /// prelude CRC 0x05c248eb, message CRC 0x7d98c8ff.
    #[test]
    fn empty_message_matches_the_published_frame() {
        let bytes = encode(&[], b"");
        assert_eq!(
            bytes,
            [0, 0, 0, 0x10, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff]
        );
        let mut decoder = EventStreamDecoder::new();
        let messages = decoder.feed(&bytes).unwrap();
        assert_eq!(
            messages,
            [Message {
                headers: vec![],
                payload: vec![]
            }]
        );
        decoder.finish().unwrap();
    }

    #[test]
    fn every_header_type_round_trips() {
        let headers = [
            ("t", HeaderValue::Bool(true)),
            ("f", HeaderValue::Bool(false)),
            ("b", HeaderValue::Byte(-2)),
            ("s", HeaderValue::Short(-300)),
            ("i", HeaderValue::Int(70000)),
            ("l", HeaderValue::Long(-1 << 40)),
            ("y", HeaderValue::Bytes(vec![0, 1, 255])),
            ("str", HeaderValue::String("héllo".into())),
            ("ts", HeaderValue::Timestamp(1_700_000_000_000)),
            ("u", HeaderValue::Uuid([7; 16])),
        ];
        let bytes = encode(&headers, b"{}");
        let messages = EventStreamDecoder::new().feed(&bytes).unwrap();
        let expected: Vec<_> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        assert_eq!(messages[0].headers, expected);
        assert_eq!(messages[0].payload, b"{}");
        assert_eq!(messages[0].header_str("str"), Some("héllo"));
        assert_eq!(messages[0].header_str("t"), None);
    }

    #[test]
    fn any_chunking_gives_the_same_messages() {
        let mut stream = event("messageStart", r#"{"role":"assistant"}"#);
        stream.extend(event("contentBlockDelta", r#"{"delta":{"text":"é"}}"#));
        stream.extend(encode(&[], b""));
        let whole = EventStreamDecoder::new().feed(&stream).unwrap();
        assert_eq!(whole.len(), 3);
        for size in 1..=stream.len() {
            let mut decoder = EventStreamDecoder::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(size) {
                got.extend(decoder.feed(chunk).unwrap());
            }
            decoder.finish().unwrap();
            assert_eq!(got, whole, "chunk size {size}");
        }
    }

    #[test]
    fn truncation_is_reported_only_at_the_end() {
        let stream = event("messageStop", r#"{"stopReason":"end_turn"}"#);
        for cut in 1..stream.len() {
            let mut decoder = EventStreamDecoder::new();
            assert_eq!(decoder.feed(&stream[..cut]).unwrap(), vec![]);
            let error = decoder.finish().unwrap_err();
            assert!(
                error.to_string().contains("ended inside a message"),
                "{error}"
            );
        }
    }

    #[test]
    fn corruption_is_an_error_never_a_panic() {
        let stream = event("contentBlockDelta", r#"{"delta":{"text":"hi"}}"#);
        for at in 0..stream.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = stream.clone();
                bad[at] ^= flip;
                let mut decoder = EventStreamDecoder::new();
                // Either an error now, or (a length grew) a wait for bytes that never come.
                if let Ok(messages) = decoder.feed(&bad) {
                    assert!(messages.is_empty(), "flip {flip:#x} at {at} went unnoticed");
                    assert!(decoder.finish().is_err());
                }
            }
        }
        let mut decoder = EventStreamDecoder::new();
        let error = decoder.feed(b"{\"message\":\"not a stream\"}").unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::Provider);
    }

    #[test]
    fn lengths_out_of_range_are_rejected() {
        for (total, headers) in [(15u32, 0u32), (16, 1), (20, 5), (u32::MAX, 0)] {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&total.to_be_bytes());
            bytes.extend_from_slice(&headers.to_be_bytes());
            let crc = crc32(&bytes);
            bytes.extend_from_slice(&crc.to_be_bytes());
            assert!(
                EventStreamDecoder::new().feed(&bytes).is_err(),
                "{total}/{headers}"
            );
        }
    }

    #[test]
    fn a_bad_header_type_is_rejected() {
        let mut bytes = encode(&[("x", HeaderValue::Bool(true))], b"");
        // Header block: [1, b'x', 0]; turn the type into 10 and fix the checksum.
        bytes[14] = 10;
        let end = bytes.len() - 4;
        let crc = crc32(&bytes[..end]);
        bytes[end..].copy_from_slice(&crc.to_be_bytes());
        assert!(EventStreamDecoder::new().feed(&bytes).is_err());
    }
}
