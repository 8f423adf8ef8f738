//! AWS Signature Version 4 (header form), for signing Bedrock requests with access keys.
//!
//! Pure: the signing time comes in as a `YYYYMMDDTHHMMSSZ` string, nothing reads a clock. The
//! canonical request follows the AWS rules for services other than S3: the path is normalised
//! (empty, `.` and `..` segments removed) and URI-encoded once more (so a model id sent as
//! `v1%3A0` is signed as `v1%253A0`), query parameters are decoded, re-encoded and sorted, and
//! header values are trimmed with inner runs of spaces collapsed.
//!
//! `host` is signed but not added to the request: WASI HTTP forbids a guest to set it, and the
//! transport derives it from the URL, which is exactly the value signed here.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::adapter::HttpRequest;
use crate::error::Error;

/// The signing algorithm's name, as it appears in the string to sign and `authorization`.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Who signs, where, and when.
#[derive(Clone, Copy)]
pub struct Signer<'a> {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: &'a str,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: &'a str,
    /// `AWS_SESSION_TOKEN`, sent and signed as `x-amz-security-token`.
    pub session_token: Option<&'a str>,
    /// The region, e.g. `us-east-1`.
    pub region: &'a str,
    /// The signing name of the service, e.g. `bedrock`.
    pub service: &'a str,
    /// The signing time, `YYYYMMDDTHHMMSSZ`.
    pub timestamp: &'a str,
}

impl std::fmt::Debug for Signer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("region", &self.region)
            .field("service", &self.service)
            .field("timestamp", &self.timestamp)
            .finish_non_exhaustive()
    }
}

/// Signs `request` in place: adds `x-amz-date`, `x-amz-content-sha256` (when asked),
/// `x-amz-security-token` (with a session token) and finally `authorization`, signing every
/// header of the request plus `host`.
///
/// Fails with [`Error::InvalidRequest`] if the timestamp is not `YYYYMMDDTHHMMSSZ` or the URL
/// does not parse.
pub fn sign(
    request: &mut HttpRequest,
    signer: &Signer<'_>,
    content_sha256_header: bool,
) -> Result<(), Error> {
    let date = signing_date(signer.timestamp)?;
    let payload_hash = hex(&Sha256::digest(&request.body));
    request
        .headers
        .push(("x-amz-date".into(), signer.timestamp.into()));
    if content_sha256_header {
        request
            .headers
            .push(("x-amz-content-sha256".into(), payload_hash.clone()));
    }
    if let Some(token) = signer.session_token {
        request
            .headers
            .push(("x-amz-security-token".into(), token.into()));
    }
    let canonical = canonical_request(
        &request.method,
        &request.url,
        &request.headers,
        &payload_hash,
    )?;
    let scope = format!("{date}/{}/{}/aws4_request", signer.region, signer.service);
    let string_to_sign = format!(
        "{ALGORITHM}\n{}\n{scope}\n{}",
        signer.timestamp,
        hex(&Sha256::digest(canonical.text.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", signer.secret_access_key).as_bytes(),
        date.as_bytes(),
    )?;
    for part in [signer.region, signer.service, "aws4_request"] {
        key = hmac(&key, part.as_bytes())?;
    }
    let signature = hex(&hmac(&key, string_to_sign.as_bytes())?);
    request.headers.push((
        "authorization".into(),
        format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={}, Signature={signature}",
            signer.access_key_id, canonical.signed_headers
        ),
    ));
    Ok(())
}

/// A canonical request and the list of headers it signs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalRequest {
    /// The canonical request text, whose SHA-256 goes into the string to sign.
    pub text: String,
    /// The signed header names, sorted and joined with `;`.
    pub signed_headers: String,
}

/// The canonical request for `method` and `url` with `headers` (plus `host`, from the URL,
/// when the headers have none) and the hex SHA-256 of the payload.
///
/// Fails with [`Error::InvalidRequest`] if the URL does not parse or has no host.
pub fn canonical_request(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    payload_hash: &str,
) -> Result<CanonicalRequest, Error> {
    let parsed = url::Url::parse(url).map_err(|e| invalid(format!("bad url {url:?}: {e}")))?;
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), clean_value(value)))
        .filter(|(name, _)| !matches!(name.as_str(), "authorization" | "user-agent"))
        .collect();
    if !pairs.iter().any(|(name, _)| name == "host") {
        let host = parsed
            .host_str()
            .ok_or_else(|| invalid(format!("url {url:?} has no host")))?;
        let host = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        pairs.push(("host".into(), host));
    }
    // By name; a repeated name keeps its values in the order given (they are joined with `,`).
    crate::sort::sort_by(&mut pairs, &|a, b| a.0.cmp(&b.0));
    let mut names: Vec<&str> = Vec::new();
    let mut header_lines = String::new();
    for (name, value) in &pairs {
        if names.last() == Some(&name.as_str()) {
            header_lines.pop();
            header_lines.push(',');
        } else {
            names.push(name);
            header_lines.push_str(name);
            header_lines.push(':');
        }
        header_lines.push_str(value);
        header_lines.push('\n');
    }
    let signed_headers = names.join(";");
    let text = format!(
        "{method}\n{}\n{}\n{header_lines}\n{signed_headers}\n{payload_hash}",
        canonical_path(parsed.path()),
        canonical_query(parsed.query().unwrap_or(""))
    );
    Ok(CanonicalRequest {
        text,
        signed_headers,
    })
}

/// AWS URI encoding: every byte but `A-Z a-z 0-9 - _ . ~` as `%XX` (uppercase hex); `/` is
/// kept when `keep_slash`.
pub fn uri_encode(bytes: &[u8], keep_slash: bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX_UPPER[(b >> 4) as usize] as char);
            out.push(HEX_UPPER[(b & 15) as usize] as char);
        }
    }
    out
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn invalid(message: String) -> Error {
    Error::InvalidRequest {
        message: format!("bedrock: {message}"),
    }
}

/// `YYYYMMDD` from a `YYYYMMDDTHHMMSSZ` timestamp.
fn signing_date(timestamp: &str) -> Result<&str, Error> {
    let b = timestamp.as_bytes();
    let ok = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    if ok {
        Ok(&timestamp[..8])
    } else {
        Err(invalid(format!(
            "the signing timestamp must look like 20250102T030405Z, got {timestamp:?}"
        )))
    }
}

fn clean_value(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn canonical_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut normalized = format!("/{}", segments.join("/"));
    if !segments.is_empty() && path.ends_with('/') {
        normalized.push('/');
    }
    uri_encode(normalized.as_bytes(), true)
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (
                uri_encode(&percent_decode(key), false),
                uri_encode(&percent_decode(value), false),
            )
        })
        .collect();
    crate::sort::sort_by(&mut pairs, &|a, b| a.cmp(b));
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex_pair = bytes.get(i + 1..i + 3).and_then(|h| {
            let h = std::str::from_utf8(h).ok()?;
            u8::from_str_radix(h, 16).ok()
        });
        match (bytes[i], hex_pair) {
            (b'%', Some(value)) => {
                out.push(value);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn hmac(key: &[u8], data: &[u8]) -> Result<[u8; 32], Error> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key)
        .map_err(|_| invalid("the signing key was refused".into()))?;
    mac.update(data);
    Ok(mac.finalize().into_bytes().into())
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_ID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn signer<'a>(service: &'a str, timestamp: &'a str) -> Signer<'a> {
        Signer {
            access_key_id: KEY_ID,
            secret_access_key: SECRET,
            session_token: None,
            region: "us-east-1",
            service,
            timestamp,
        }
    }

    fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
        request
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The worked example of the AWS General Reference ("Create a canonical request",
    /// "Create a string to sign", "Calculate the signature" for IAM ListUsers).
    #[test]
    fn the_published_iam_example() {
        let url = "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08";
        let headers = vec![(
            "content-type".to_string(),
            "application/x-www-form-urlencoded; charset=utf-8".to_string(),
        )];
        let mut with_date = headers.clone();
        with_date.push(("x-amz-date".into(), "20150830T123600Z".into()));
        let canonical = canonical_request("GET", url, &with_date, EMPTY_SHA256).unwrap();
        assert_eq!(
            canonical.text,
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n\
             content-type:application/x-www-form-urlencoded; charset=utf-8\n\
             host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
             content-type;host;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&Sha256::digest(canonical.text.as_bytes())),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
        );

        let mut request = HttpRequest {
            method: "GET".into(),
            url: url.into(),
            headers,
            body: String::new(),
        };
        sign(&mut request, &signer("iam", "20150830T123600Z"), false).unwrap();
        assert_eq!(
            header(&request, "authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date, \
                 Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
            )
        );
        assert_eq!(header(&request, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header(&request, "host"), None);
    }

    /// A Bedrock Converse request: the model id's `:` is `%3A` in the URL and `%253A` in the
    /// canonical path. The signature was computed independently with botocore 1.43's
    /// `SigV4Auth` on the same method, URL, headers and body.
    #[test]
    fn a_bedrock_request_with_a_session_token() {
        let body = r#"{"inferenceConfig":{"maxTokens":4096},"messages":[{"content":[{"text":"hi"}],"role":"user"}]}"#;
        let mut request = HttpRequest::post_json(
            "https://bedrock-runtime.us-west-2.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse".into(),
            body.to_owned(),
        );
        let signer = Signer {
            session_token: Some("FwoGZXIvYXdzEXAMPLETOKEN"),
            region: "us-west-2",
            ..signer("bedrock", "20250102T030405Z")
        };
        sign(&mut request, &signer, true).unwrap();
        let payload = hex(&Sha256::digest(body));
        let canonical =
            canonical_request("POST", &request.url, &request.headers[..4], &payload).unwrap();
        assert_eq!(
            canonical.text.lines().nth(1),
            Some("/model/anthropic.claude-3-5-haiku-20241022-v1%253A0/converse")
        );
        assert_eq!(
            canonical.signed_headers,
            "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
        );
        assert_eq!(
            header(&request, "x-amz-content-sha256"),
            Some(payload.as_str())
        );
        assert_eq!(
            header(&request, "x-amz-security-token"),
            Some("FwoGZXIvYXdzEXAMPLETOKEN")
        );
        assert_eq!(
            header(&request, "authorization"),
            Some(BEDROCK_AUTHORIZATION)
        );
    }

    const BEDROCK_AUTHORIZATION: &str = "AWS4-HMAC-SHA256 \
        Credential=AKIDEXAMPLE/20250102/us-west-2/bedrock/aws4_request, \
        SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, \
        Signature=4f652af9c83dcd352ca121ecc60f04da13baae4521bea800a049d25104da3cc2";

    #[test]
    fn bad_timestamps_are_refused() {
        for bad in [
            "",
            "20150830",
            "20150830T123600",
            "20150830t123600Z",
            "2015083OT123600Z",
        ] {
            let mut request =
                HttpRequest::post_json("https://x.amazonaws.com/".into(), String::new());
            let error = sign(&mut request, &signer("bedrock", bad), false).unwrap_err();
            assert!(matches!(error, Error::InvalidRequest { .. }), "{bad:?}");
            assert!(!error.to_string().contains(SECRET));
        }
    }

    #[test]
    fn canonical_forms() {
        let cases = [
            ("https://h.com", "/", ""),
            ("https://h.com/a/./b/../c//d/", "/a/c/d/", ""),
            (
                "https://h.com/a%20b/%E2%82%AC",
                "/a%2520b/%25E2%2582%25AC",
                "",
            ),
            ("https://h.com/?b=2&a=1&a=0&c", "/", "a=0&a=1&b=2&c="),
            ("https://h.com/?k=a%20b&s=x/y", "/", "k=a%20b&s=x%2Fy"),
        ];
        for (url, path, query) in cases {
            let canonical = canonical_request("GET", url, &[], EMPTY_SHA256).unwrap();
            let mut lines = canonical.text.lines();
            assert_eq!(lines.nth(1), Some(path), "{url}");
            assert_eq!(lines.next(), Some(query), "{url}");
        }
        let headers = [
            ("X-Multi".to_string(), "  a   b  ".to_string()),
            ("x-multi".to_string(), "c".to_string()),
            ("Host".to_string(), "override:8443".to_string()),
        ];
        let canonical = canonical_request("GET", "http://h.com:8080/", &headers, "x").unwrap();
        assert!(canonical
            .text
            .contains("host:override:8443\nx-multi:a b,c\n"));
        let canonical = canonical_request("GET", "http://h.com:8080/", &[], "x").unwrap();
        assert!(canonical.text.contains("host:h.com:8080\n"));
        assert!(canonical_request("GET", "not a url", &[], "x").is_err());
        assert_eq!(
            uri_encode("a b/c~d*e:".as_bytes(), false),
            "a%20b%2Fc~d%2Ae%3A"
        );
    }
}
