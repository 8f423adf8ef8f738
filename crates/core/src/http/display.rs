//! A request as people may see it: `{"method", "url", "headers", "body"}` with every credential
//! shown as `[redacted]` (headers, the URL's userinfo and credential-looking query values, the
//! configured secrets in any encoding). What `oma-host format` prints and the gateway's `/v1/format` answers,
//! from one implementation.

use serde_json::{json, Map, Value};

use crate::adapter::HttpRequest;
use crate::error::Error;
use crate::secret;

/// Header names whose values are credentials, whatever they hold.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "x-amz-security-token",
    "api-key",
];

/// What a credential is replaced with.
pub const REDACTED: &str = crate::secret::REDACTED;

/// Secrets shorter than this are matched only as whole header values: a few characters would
/// match anywhere.
pub const MIN_SECRET_MATCH: usize = 8;

/// `request` as compact JSON text: credential headers (by name, or by holding one of
/// `secrets` in any of its forms, [`crate::secret::secret_forms`]) replaced by [`REDACTED`];
/// the URL with its userinfo, its credential-looking query values
/// ([`crate::secret::display_url`]) and any secret redacted; header names lowercase, repeated
/// headers joined with `", "`; a JSON body as JSON, any other body as a string.
///
/// Fails, showing nothing of the request, if a secret would still appear (the conversation
/// itself holds the key, say).
pub fn render_request(request: &HttpRequest, secrets: &[String]) -> Result<String, Error> {
    let from_url = secret::url_secrets(&request.url);
    let long: Vec<&str> = secrets
        .iter()
        .chain(&from_url)
        .map(String::as_str)
        .filter(|secret| secret.len() >= MIN_SECRET_MATCH)
        .collect();
    let mut headers = Map::new();
    for (name, value) in &request.headers {
        let name = name.to_ascii_lowercase();
        let secret = SECRET_HEADERS.contains(&name.as_str())
            || secrets.iter().any(|s| s == value)
            || secret::holds_known(value, &long);
        let value = if secret { REDACTED } else { value.as_str() };
        match headers.get_mut(&name) {
            Some(Value::String(joined)) => {
                joined.push_str(", ");
                joined.push_str(value);
            }
            _ => {
                headers.insert(name, Value::String(value.to_owned()));
            }
        }
    }
    let url = secret::display_url(&secret::redact_known(&request.url, &long));
    let body = crate::json::parse_value(&request.body)
        .unwrap_or_else(|_| Value::String(request.body.clone()));
    let text = json!({
        "method": request.method,
        "url": url,
        "headers": headers,
        "body": body,
    })
    .to_string();
    if secret::holds_known(&text, &long) {
        return Err(Error::InvalidRequest {
            message: "the formatted request would show a credential outside its headers; \
                      nothing is shown"
                .into(),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: &str) -> HttpRequest {
        HttpRequest {
            method: "POST".into(),
            url: "https://example.com/v1/chat?key=sk-very-secret".into(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("Authorization".into(), "Bearer abc".into()),
                ("x-custom".into(), "token sk-very-secret".into()),
                ("x-short".into(), "k".into()),
                ("accept".into(), "a".into()),
                ("accept".into(), "b".into()),
            ],
            body: body.to_owned(),
        }
    }

    #[test]
    fn credentials_are_redacted_wherever_they_show() {
        let secrets = ["sk-very-secret".to_string(), "k".to_string()];
        let text = render_request(&request(r#"{"model": "m"}"#), &secrets).expect("renders");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            value,
            json!({
                "method": "POST",
                "url": "https://example.com/v1/chat?key=[redacted]",
                "headers": {
                    "content-type": "application/json",
                    "authorization": "[redacted]",
                    "x-custom": "[redacted]",
                    "x-short": "[redacted]",
                    "accept": "a, b",
                },
                "body": {"model": "m"},
            })
        );
    }

    /// A base URL's userinfo and credential query values never show, and its password is
    /// searched for elsewhere as any configured secret is.
    #[test]
    fn a_base_urls_credentials_are_redacted() {
        let mut shown = request(r#"{"model": "m"}"#);
        shown.url =
            "http://user:pa55word-xyz@127.0.0.1:9/v1/messages?api-key=q-secret-123&v=2".into();
        let text = render_request(&shown, &[]).expect("renders");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            value["url"],
            "http://[redacted]@127.0.0.1:9/v1/messages?api-key=[redacted]&v=2"
        );
        assert!(
            !text.contains("pa55word") && !text.contains("q-secret"),
            "{text}"
        );
        shown.body = r#"{"note": "cGE1NXdvcmQteHl6"}"#.into();
        assert!(
            render_request(&shown, &[]).is_err(),
            "the password, base64-encoded"
        );
    }

    /// The configured key in an encoded form is caught too: in a header it is redacted, in
    /// the body nothing is shown.
    #[test]
    fn an_encoded_key_is_caught() {
        let secrets = ["sk-very-secret".to_string()];
        let mut shown = request(r#"{"model": "m"}"#);
        shown
            .headers
            .push(("x-echo".into(), "c2stdmVyeS1zZWNyZXQ=".into()));
        let text = render_request(&shown, &secrets).expect("renders");
        assert!(text.contains(r#""x-echo":"[redacted]""#), "{text}");
        shown.body = r#"{"note": "c2stdmVyeS1zZWNyZXQ"}"#.into();
        assert!(render_request(&shown, &secrets).is_err());
    }

    #[test]
    fn a_secret_in_the_body_shows_nothing() {
        let secrets = ["sk-very-secret".to_string()];
        let error = render_request(&request(r#"{"note": "sk-very-secret"}"#), &secrets)
            .expect_err("refused");
        assert!(!error.to_string().contains("sk-very-secret"));
        assert!(render_request(&request("not json sk-very-secret"), &secrets).is_err());
        let text = render_request(&request("not json"), &secrets).expect("renders");
        assert!(text.contains(r#""body":"not json""#), "{text}");
    }
}
