//! An agent's configuration (OMA's `AgentConfig`, see `docs/agent.md`), from typed values or
//! from OMA-style JSON, and the [`RunSpec`] it makes: one place that checks a configuration and
//! writes the secret-free JSON a `beforeRun` hook is shown.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::adapter::{self, ChatRequest, Credentials, Endpoint, IdSource, Sampling, Thinking};
use crate::agent::before_run::ExternalKind;
use crate::agent::machine::RunSpec;
use crate::agent::turn::{TurnOptions, DEFAULT_MAX_TURNS};
use crate::error::Error;
use crate::http::call::CallOptions;
use crate::http::retry::RetryPolicy;
use crate::http::{EgressPolicy, Limits};
use crate::json::messages_from_value;
use crate::message::LlmMessage;

/// Everything an agent is made of.
#[derive(Clone, Debug, Default)]
pub struct AgentSettings {
    /// The agent's name.
    pub name: String,
    /// The model id.
    pub model: String,
    /// The provider, which picks the wire format.
    pub provider: String,
    /// The base URL, credentials and region.
    pub endpoint: Endpoint,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// Sampling options.
    pub sampling: Sampling,
    /// Extended thinking.
    pub thinking: Option<Thinking>,
    /// Tools the model may call.
    pub tools: Vec<adapter::ToolDefinition>,
    /// The most chat requests per run; `None` for OMA's 10.
    pub max_turns: Option<u32>,
    /// The token budget per run.
    pub token_budget: Option<u64>,
    /// The most one run may take, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Retries, timeouts, size limit, egress.
    pub call: CallOptions,
    /// The seed of the persistent history.
    pub history: Vec<LlmMessage>,
    /// Whether the host runs a `beforeRun` hook.
    pub before_run: bool,
    /// An external text-only backend.
    pub external: Option<ExternalKind>,
}

impl AgentSettings {
    /// The run spec and the seed history. Fails for a provider with no known default URL and
    /// no base URL (unless the agent has an external backend, which sends nothing to one).
    pub fn into_spec(self) -> Result<(RunSpec, Vec<LlmMessage>), Error> {
        if self.external.is_none() {
            // An unknown provider without a base URL fails now, not on the first run.
            adapter::for_provider(
                &self.provider,
                self.endpoint.base_url.as_deref(),
                IdSource::default(),
            )?;
        }
        let tool_names: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
        let max_turns = self.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        let mut config = json!({
            "name": self.name,
            "model": self.model,
            "provider": self.provider,
            "maxTurns": max_turns,
            "tools": tool_names,
        });
        if let Some(url) = self.endpoint.base_url.as_deref().and_then(shown_base_url) {
            config["baseURL"] = json!(url);
        }
        if let Some(system) = &self.system_prompt {
            config["systemPrompt"] = json!(system);
        }
        if let Some(budget) = self.token_budget {
            config["maxTokenBudget"] = json!(budget);
        }
        if let Some(kind) = self.external {
            config["backend"] = json!({ "kind": kind.word() });
        }
        let spec = RunSpec {
            template: ChatRequest {
                model: self.model,
                system_prompt: self.system_prompt,
                messages: Vec::new(),
                tools: self.tools,
                sampling: self.sampling,
                thinking: self.thinking,
                extra_body: Map::new(),
                preserve_reasoning_as_text: false,
                stream: false,
            },
            turn: TurnOptions {
                agent_name: self.name,
                max_turns,
                token_budget: self.token_budget,
                provider: self.external.is_none().then(|| self.provider.clone()),
            },
            before_run: self.before_run,
            external: self.external,
            config_json: config.to_string(),
            deadline_ms: self.deadline_ms,
            provider: self.provider,
            endpoint: self.endpoint,
            call: self.call,
        };
        Ok((spec, self.history))
    }

    /// Reads OMA-style JSON (see `docs/agent.md#configuration-as-json`). Fails with
    /// [`Error::InvalidRequest`] for a configuration of another shape, and with
    /// [`Error::InvalidMessage`] for a history that breaks OMA's rules.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let config: JsonConfig = serde_json::from_str(text).map_err(|e| Error::InvalidRequest {
            message: format!("the agent configuration is not valid: {e}"),
        })?;
        let credentials = match (config.aws, config.api_key) {
            (Some(aws), _) => Credentials::Aws {
                access_key_id: aws.access_key_id,
                secret_access_key: aws.secret_access_key,
                session_token: aws.session_token,
            },
            (None, Some(key)) => Credentials::ApiKey(key),
            (None, None) => Credentials::None,
        };
        let history = match config.history {
            Some(value) => messages_from_value(value)?,
            None => Vec::new(),
        };
        let call = config.call.unwrap_or_default();
        let egress = match call.egress {
            None => EgressPolicy::Open,
            Some(Value::String(word)) if word == "open" => EgressPolicy::Open,
            Some(Value::String(word)) if word == "offline" => EgressPolicy::Offline,
            Some(Value::Array(origins)) => EgressPolicy::Allowlist(
                origins
                    .into_iter()
                    .map(|origin| match origin {
                        Value::String(origin) => Ok(origin),
                        _ => Err(bad("call.egress origins must be strings")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some(_) => {
                return Err(bad(
                    "call.egress must be \"open\", \"offline\" or a list of origins",
                ))
            }
        };
        let defaults = Limits::default();
        Ok(AgentSettings {
            name: config.name.unwrap_or_else(|| "agent".into()),
            model: config.model,
            provider: config.provider,
            endpoint: Endpoint {
                base_url: config.base_url,
                credentials,
                region: config.region,
                timestamp: None,
            },
            system_prompt: config.system_prompt,
            sampling: Sampling {
                max_tokens: config.max_tokens,
                temperature: config.temperature,
                top_p: config.top_p,
                top_k: config.top_k,
                ..Sampling::default()
            },
            thinking: config.thinking_budget.map(|budget| Thinking {
                enabled: true,
                budget_tokens: Some(budget),
            }),
            tools: config.tools.unwrap_or_default(),
            max_turns: config.max_turns,
            token_budget: config.max_token_budget,
            deadline_ms: config.deadline_ms,
            call: CallOptions {
                retry: RetryPolicy::from_oma(
                    call.max_retries.unwrap_or(0),
                    call.retry_delay_ms,
                    call.retry_backoff,
                ),
                limits: Limits {
                    timeout_ms: call.timeout_ms.unwrap_or(defaults.timeout_ms),
                    max_response_bytes: call
                        .max_response_bytes
                        .map_or(defaults.max_response_bytes, |n| {
                            usize::try_from(n).unwrap_or(usize::MAX)
                        }),
                    deadline_ms: call.deadline_ms.unwrap_or(defaults.deadline_ms),
                },
                egress,
            },
            history,
            before_run: config.before_run.unwrap_or(false),
            external: match config.backend {
                None => None,
                Some(Backend { kind }) => Some(match kind.as_str() {
                    "process" => ExternalKind::Process,
                    "acp" => ExternalKind::Acp,
                    _ => return Err(bad("backend.kind must be \"process\" or \"acp\"")),
                }),
            },
        })
    }
}

/// The base URL as a hook may see it: no user name, password, query or fragment (where keys
/// hide); `None` when it does not parse, so nothing unchecked is shown.
fn shown_base_url(url: &str) -> Option<String> {
    let mut parsed = url::Url::parse(url).ok()?;
    let clean = parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.query().is_none()
        && parsed.fragment().is_none();
    if clean {
        // Shown as given, as OMA shows it.
        return Some(url.to_owned());
    }
    // Only URLs that cannot carry credentials refuse these; then there is nothing to remove.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    Some(parsed.into())
}

fn bad(message: &str) -> Error {
    Error::InvalidRequest {
        message: format!("the agent configuration is not valid: {message}"),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JsonConfig {
    name: Option<String>,
    model: String,
    provider: String,
    #[serde(rename = "baseURL")]
    base_url: Option<String>,
    api_key: Option<String>,
    region: Option<String>,
    aws: Option<AwsJson>,
    system_prompt: Option<String>,
    max_turns: Option<u32>,
    max_token_budget: Option<u64>,
    deadline_ms: Option<u64>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u32>,
    thinking_budget: Option<u32>,
    tools: Option<Vec<adapter::ToolDefinition>>,
    before_run: Option<bool>,
    backend: Option<Backend>,
    history: Option<Value>,
    call: Option<CallJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AwsJson {
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Backend {
    kind: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallJson {
    max_retries: Option<i64>,
    retry_delay_ms: Option<f64>,
    retry_backoff: Option<f64>,
    timeout_ms: Option<u64>,
    max_response_bytes: Option<u64>,
    deadline_ms: Option<u64>,
    egress: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_configuration_reads_oma_names() {
        let settings = AgentSettings::from_json(
            r#"{"name": "r", "model": "m", "provider": "anthropic", "apiKey": "sk-1",
                "baseURL": "http://127.0.0.1:9", "systemPrompt": "be brief", "maxTurns": 3,
                "maxTokenBudget": 100, "maxTokens": 50, "temperature": 0.5, "beforeRun": true,
                "tools": [{"name": "t", "description": "d", "inputSchema": {"type": "object"}}],
                "history": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                "call": {"maxRetries": 2, "retryDelayMs": 10, "timeoutMs": 500,
                         "egress": "offline"}}"#,
        )
        .expect("a valid configuration");
        assert!(settings.endpoint.credentials == Credentials::ApiKey("sk-1".into()));
        assert_eq!(settings.call.retry.max_attempts, 3);
        assert_eq!(settings.call.limits.timeout_ms, 500);
        assert_eq!(settings.call.egress, EgressPolicy::Offline);
        assert_eq!(settings.history.len(), 1);
        let (spec, history) = settings.into_spec().expect("a known provider");
        assert_eq!(history.len(), 1);
        assert_eq!(spec.turn.max_turns, 3);
        assert_eq!(spec.template.sampling.max_tokens, Some(50));
        assert!(!spec.config_json.contains("sk-1"), "{}", spec.config_json);
        let config: Value = serde_json::from_str(&spec.config_json).expect("JSON");
        assert_eq!(config["tools"], json!(["t"]));
        assert_eq!(config["baseURL"], "http://127.0.0.1:9");
    }

    #[test]
    fn the_hook_sees_no_credentials_in_the_base_url() {
        let mut settings = AgentSettings::from_json(
            r#"{"model": "m", "provider": "openai",
                "baseURL": "https://user:pa55@llm.example/v1?key=sk-q#frag"}"#,
        )
        .expect("valid");
        let (spec, _) = settings.clone().into_spec().expect("valid");
        let config: Value = serde_json::from_str(&spec.config_json).expect("JSON");
        assert_eq!(config["baseURL"], "https://llm.example/v1");
        assert_eq!(
            spec.endpoint.base_url.as_deref(),
            Some("https://user:pa55@llm.example/v1?key=sk-q#frag"),
            "requests still go where the user said"
        );
        settings.endpoint.base_url = Some("not a url".into());
        let (spec, _) = settings.into_spec().expect("valid");
        assert!(
            !spec.config_json.contains("baseURL"),
            "{}",
            spec.config_json
        );
    }

    #[test]
    fn bad_configurations_are_typed_errors() {
        for (text, needle) in [
            ("{}", "missing field"),
            (
                r#"{"model": "m", "provider": "p", "colour": 1}"#,
                "unknown field",
            ),
            (
                r#"{"model": "m", "provider": "openai", "backend": {"kind": "x"}}"#,
                "backend",
            ),
            (
                r#"{"model": "m", "provider": "openai", "call": {"egress": 3}}"#,
                "egress",
            ),
        ] {
            let error = AgentSettings::from_json(text).expect_err(text);
            assert!(error.to_string().contains(needle), "{text}: {error}");
            assert_eq!(error.name(), "Error");
        }
        let error = AgentSettings::from_json(
            r#"{"model": "m", "provider": "openai", "history": [{"role": "user", "content": "x"}]}"#,
        )
        .expect_err("a bad history");
        assert_eq!(error.name(), "InvalidMessageError");
        let error = AgentSettings::from_json(r#"{"model": "m", "provider": "nowhere"}"#)
            .expect("reads")
            .into_spec()
            .expect_err("no URL for an unknown provider");
        assert!(error.to_string().contains("unknown provider"), "{error}");
    }
}
