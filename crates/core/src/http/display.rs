//! A request as people may see it: `{"method", "url", "headers", "body"}` with every credential
//! shown as `[redacted]`. What `oma-host format` prints and the gateway's `/v1/format` answers,
//! from one implementation.

use serde_json::{json, Map, Value};

use crate::adapter::HttpRequest;
use crate::error::Error;

/// Header names whose values are credentials, whatever they hold.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "x-amz-security-token",
    "api-key",
];

/// What a credential is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are matched only as whole header values: a few characters would
/// match anywhere.
pub const MIN_SECRET_MATCH: usize = 8;

/// `request` as compact JSON text: credential headers (by name, or by holding one of
/// `secrets`) and any secret in the URL replaced by [`REDACTED`]; header names lowercase,
/// repeated headers joined with `", "`; a JSON body as JSON, any other body as a string.
///
/// Fails, showing nothing of the request, if a secret would still appear (the conversation
/// itself holds the key, say).
pub fn render_request(request: &HttpRequest, secrets: &[String]) -> Result<String, Error> {
    let long: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|secret| secret.len() >= MIN_SECRET_MATCH)
        .collect();
    let holds_secret = |text: &str| long.iter().any(|secret| text.contains(secret));
    let mut headers = Map::new();
    for (name, value) in &request.headers {
        let name = name.to_ascii_lowercase();
        let secret = SECRET_HEADERS.contains(&name.as_str())
            || secrets.iter().any(|s| s == value)
            || holds_secret(value);
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
    let url = long.iter().fold(request.url.clone(), |url, secret| {
        url.replace(secret, REDACTED)
    });
    let body = serde_json::from_str::<Value>(&request.body)
        .unwrap_or_else(|_| Value::String(request.body.clone()));
    let text = json!({
        "method": request.method,
        "url": url,
        "headers": headers,
        "body": body,
    })
    .to_string();
    if holds_secret(&text) {
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
