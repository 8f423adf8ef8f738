//! An agent's configuration (OMA's `AgentConfig`, see `docs/agent.md`), from typed values or
//! from OMA-style JSON, and the [`RunSpec`] it makes: one place that checks a configuration and
//! writes the secret-free JSON a `beforeRun` hook is shown.

use serde_json::{json, Map, Value};

use crate::adapter::{self, ChatRequest, Credentials, Endpoint, IdSource, Sampling, Thinking};
use crate::agent::before_run::ExternalKind;
use crate::agent::context::ContextOptions;
use crate::agent::host_adapter::HostAdapter;
use crate::agent::loop_detect::LoopDetection;
use crate::agent::machine::RunSpec;
use crate::agent::observability::options::RecordOptions;
use crate::agent::structured::OutputSchema;
use crate::agent::trace::TraceOptions;
use crate::agent::turn::{TurnOptions, DEFAULT_MAX_TURNS};
use crate::error::Error;
use crate::http::call::CallOptions;
use crate::http::{EgressPolicy, Limits};
use crate::json::messages_from_value;
use crate::json::object::{Object, ShapeError};
use crate::message::LlmMessage;
use crate::retry::RetryPolicy;

/// Everything an agent is made of.
#[derive(Clone, Debug, Default)]
pub struct AgentSettings {
    /// The agent's name.
    pub name: String,
    /// The model id.
    pub model: String,
    /// The provider, which picks the wire format; with an `adapter`, only what failures are
    /// classified with (empty when not given).
    pub provider: String,
    /// The agent's own LLM adapter, run by the host instead of a provider (OMA's `adapter`);
    /// an external backend takes precedence, as in OMA.
    pub adapter: Option<HostAdapter>,
    /// The base URL, credentials and region.
    pub endpoint: Endpoint,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// Sampling options.
    pub sampling: Sampling,
    /// Extended thinking.
    pub thinking: Option<Thinking>,
    /// Provider-specific keys spread into each request body (OMA's `extraBody`).
    pub extra_body: Map<String, Value>,
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
    /// Loop detection (OMA's `loopDetection`); `None` for none.
    pub loop_detection: Option<LoopDetection>,
    /// Context strategy, tool-result compression and reasoning as text.
    pub context: ContextOptions,
    /// Trace every run (OMA's `onTrace`); `None` for no tracing.
    pub trace: Option<TraceOptions>,
    /// Make OMA's trace records of every run (OMA's `observability`); `None` for none.
    pub records: Option<RecordOptions>,
    /// The schema of the final answer (OMA's `outputSchema`); `None` for free text.
    pub output_schema: Option<OutputSchema>,
}

impl AgentSettings {
    /// The run spec and the seed history. Fails for a provider with no known default URL and
    /// no base URL (unless the agent has an external backend or its own adapter, which send
    /// nothing to one).
    pub fn into_spec(self) -> Result<(RunSpec, Vec<LlmMessage>), Error> {
        // OMA's external backend runs its own loop: the adapter, like the provider, is unused.
        let adapter = self.adapter.filter(|_| self.external.is_none());
        if self.external.is_none() && adapter.is_none() {
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
        });
        if !self.provider.is_empty() {
            config["provider"] = json!(self.provider);
        }
        if let Some(adapter) = &adapter {
            config["adapter"] = adapter.to_json();
        }
        config["maxTurns"] = json!(max_turns);
        config["tools"] = json!(tool_names);
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
        if let Some(detection) = &self.loop_detection {
            config["loopDetection"] = detection.to_json();
        }
        self.context.write_json(&mut config);
        // OMA appends the instruction when it builds its runner, which an external backend
        // does not use.
        let system_prompt = match (&self.output_schema, self.external) {
            (Some(schema), None) => Some(schema.system_prompt(self.system_prompt.as_deref())),
            _ => self.system_prompt,
        };
        let spec = RunSpec {
            template: ChatRequest {
                model: self.model,
                system_prompt,
                messages: Vec::new(),
                tools: self.tools,
                sampling: self.sampling,
                thinking: self.thinking,
                extra_body: self.extra_body,
                preserve_reasoning_as_text: self.context.preserve_reasoning_as_text,
                reasoning_text_max_chars: self.context.reasoning_text_max_chars(),
                stream: false,
                ..ChatRequest::default()
            },
            turn: TurnOptions {
                agent_name: self.name,
                max_turns,
                token_budget: self.token_budget,
                // OMA classifies failures with the configured provider, which an agent with its
                // own adapter may leave out.
                provider: (self.external.is_none() && !self.provider.is_empty())
                    .then(|| self.provider.clone()),
                loop_detection: self.loop_detection,
                context: self.context,
            },
            before_run: self.before_run,
            external: self.external,
            adapter,
            config_json: config.to_string(),
            deadline_ms: self.deadline_ms,
            trace: self.trace,
            records: self.records,
            provider: self.provider,
            endpoint: self.endpoint,
            call: self.call,
            output_schema: self.output_schema,
        };
        Ok((spec, self.history))
    }

    /// Reads OMA-style JSON (see `docs/agent.md#configuration-as-json`). Fails with
    /// [`Error::InvalidRequest`] for a configuration of another shape (naming the field), and
    /// with [`Error::InvalidMessage`] for a history that breaks OMA's rules.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let value: Value = crate::json::from_str(text).map_err(|e| bad(&e))?;
        let (mut settings, history) = Object::strict(value)
            .and_then(Self::from_object)
            .map_err(|e| bad(&e))?;
        // Checked after the shape, so that a shape error is the one reported.
        if let Some(history) = history {
            settings.history = messages_from_value(history)?;
        }
        Ok(settings)
    }

    /// The settings, and the history still as JSON.
    fn from_object(mut config: Object) -> Result<(Self, Option<Value>), ShapeError> {
        let name = config.string("name")?;
        let model = config.required_string("model")?;
        let provider = config.string("provider")?;
        let adapter = match config.object("adapter")? {
            Some(adapter) => Some(HostAdapter::from_object(adapter)?),
            None => None,
        };
        // Only an agent with its own adapter may leave the provider out.
        let provider = match (provider, &adapter) {
            (Some(provider), _) => provider,
            (None, Some(_)) => String::new(),
            (None, None) => return Err(config.missing("provider")),
        };
        let base_url = config.string("baseURL")?;
        let api_key = config.string("apiKey")?;
        let region = config.string("region")?;
        let credentials = match (config.object("aws")?, api_key) {
            (Some(mut aws), _) => {
                let credentials = Credentials::Aws {
                    access_key_id: aws.required_string("accessKeyId")?,
                    secret_access_key: aws.required_string("secretAccessKey")?,
                    session_token: aws.string("sessionToken")?,
                };
                aws.finish()?;
                credentials
            }
            (None, Some(key)) => Credentials::ApiKey(key),
            (None, None) => Credentials::None,
        };
        let system_prompt = config.string("systemPrompt")?;
        let max_turns = config.u32("maxTurns")?;
        let token_budget = config.u64("maxTokenBudget")?;
        let deadline_ms = config.u64("deadlineMs")?;
        let mut sampling = Sampling {
            max_tokens: config.u32("maxTokens")?,
            temperature: config.f64("temperature")?,
            top_p: config.f64("topP")?,
            top_k: config.u32("topK")?,
            frequency_penalty: config.f64("frequencyPenalty")?,
            presence_penalty: config.f64("presencePenalty")?,
            min_p: config.f64("minP")?,
            parallel_tool_calls: config.bool("parallelToolCalls")?,
            reasoning_effort: None,
        };
        let extra_body = match config.take("extraBody") {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(config.invalid("extraBody", "must be an object")),
        };
        let budget = config.u32("thinkingBudget")?;
        let thinking = match config.object("thinking")? {
            None => budget.map(|budget| Thinking {
                enabled: true,
                budget_tokens: Some(budget),
            }),
            Some(mut thinking) => {
                if budget.is_some() {
                    return Err(config.invalid("thinkingBudget", "and `thinking` are both set"));
                }
                let enabled = thinking.bool("enabled")?.unwrap_or(false);
                let budget_tokens = thinking.u32("budgetTokens")?;
                if let Some(effort) = thinking.string("effort")? {
                    if !REASONING_EFFORTS.contains(&effort.as_str()) {
                        return Err(thinking.invalid(
                            "effort",
                            "must be \"low\", \"medium\", \"high\" or \"max\"",
                        ));
                    }
                    sampling.reasoning_effort = Some(effort);
                }
                thinking.finish()?;
                // Kept when off too: DeepSeek then sends `thinking: {type: "disabled"}`.
                Some(Thinking {
                    enabled,
                    budget_tokens,
                })
            }
        };
        let tools = config
            .objects("tools")?
            .into_iter()
            .map(tool_definition)
            .collect::<Result<_, _>>()?;
        let before_run = config.bool("beforeRun")?.unwrap_or(false);
        let external = match config.object("backend")? {
            None => None,
            Some(mut backend) => {
                let kind = match backend.required_string("kind")?.as_str() {
                    "process" => ExternalKind::Process,
                    "acp" => ExternalKind::Acp,
                    _ => return Err(backend.invalid("kind", "must be \"process\" or \"acp\"")),
                };
                backend.finish()?;
                Some(kind)
            }
        };
        let loop_detection = match config.object("loopDetection")? {
            Some(object) => Some(LoopDetection::from_object(object)?),
            None => None,
        };
        let context = ContextOptions::from_config(&mut config)?;
        let host_validates = match config.string("outputValidation")?.as_deref() {
            None | Some("schema") => false,
            Some("host") => true,
            Some(_) => {
                return Err(config.invalid("outputValidation", "must be \"schema\" or \"host\""))
            }
        };
        let output_schema = match config.take("outputSchema") {
            None | Some(Value::Null) => None,
            Some(schema) => Some(OutputSchema::new(schema, host_validates).map_err(|why| {
                config.invalid("outputSchema", &format!("is not a JSON Schema: {why}"))
            })?),
        };
        let history = config.take("history");
        let call = match config.object("call")? {
            Some(call) => call_options(call)?,
            None => call_options(Object::strict(Value::Object(Map::new()))?)?,
        };
        config.finish()?;
        let settings = AgentSettings {
            name: name.unwrap_or_else(|| "agent".into()),
            model,
            provider,
            adapter,
            endpoint: Endpoint {
                base_url,
                credentials,
                region,
                timestamp: None,
            },
            system_prompt,
            sampling,
            thinking,
            extra_body,
            tools,
            max_turns,
            token_budget,
            deadline_ms,
            call,
            history: Vec::new(),
            before_run,
            external,
            loop_detection,
            context,
            trace: None,
            records: None,
            output_schema,
        };
        Ok((settings, history))
    }
}

/// OMA's `ThinkingConfig.effort` values (`max` is DeepSeek's; the other OpenAI-compatible
/// formats leave it out, as OMA does).
const REASONING_EFFORTS: [&str; 4] = ["low", "medium", "high", "max"];

/// One entry of `tools`: `{name, description, inputSchema}` (`input_schema` accepted too).
fn tool_definition(mut tool: Object) -> Result<adapter::ToolDefinition, ShapeError> {
    let name = tool.required_string("name")?;
    let description = tool.required_string("description")?;
    let input_schema = match tool.take("inputSchema") {
        Some(schema) => schema,
        None => tool.required("input_schema")?,
    };
    tool.finish()?;
    Ok(adapter::ToolDefinition {
        name,
        description,
        input_schema,
    })
}

/// `call`: retries, time limits, the response size limit and the egress policy.
fn call_options(mut call: Object) -> Result<CallOptions, ShapeError> {
    let max_retries = call.i64("maxRetries")?;
    let retry_delay_ms = call.f64("retryDelayMs")?;
    let retry_backoff = call.f64("retryBackoff")?;
    let defaults = Limits::default();
    let limits = Limits {
        timeout_ms: call.u64("timeoutMs")?.unwrap_or(defaults.timeout_ms),
        max_response_bytes: call
            .u64("maxResponseBytes")?
            .map_or(defaults.max_response_bytes, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        deadline_ms: call.u64("deadlineMs")?.unwrap_or(defaults.deadline_ms),
    };
    let egress = match call.take("egress") {
        None => EgressPolicy::Open,
        Some(Value::String(word)) if word == "open" => EgressPolicy::Open,
        Some(Value::String(word)) if word == "offline" => EgressPolicy::Offline,
        Some(Value::Array(origins)) => EgressPolicy::Allowlist(
            origins
                .into_iter()
                .map(|origin| match origin {
                    Value::String(origin) => Ok(origin),
                    _ => Err(call.invalid("egress", "origins must be strings")),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => {
            return Err(call.invalid(
                "egress",
                "must be \"open\", \"offline\" or a list of origins",
            ))
        }
    };
    call.finish()?;
    // Any of OMA's three retry options makes the schedule the caller's own; none leaves the
    // provider's default (`docs/errors.md#default-retry-policy`).
    let explicit = max_retries.is_some() || retry_delay_ms.is_some() || retry_backoff.is_some();
    Ok(CallOptions {
        retry: explicit.then(|| {
            RetryPolicy::from_oma(max_retries.unwrap_or(0), retry_delay_ms, retry_backoff)
        }),
        limits,
        egress,
    })
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

fn bad(message: &dyn std::fmt::Display) -> Error {
    Error::InvalidRequest {
        message: format!("the agent configuration is not valid: {message}"),
    }
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
        assert_eq!(settings.call.retry.map(|r| r.max_attempts), Some(3));
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

    /// Without OMA's retry options an agent gets its provider's default policy; any one of
    /// them makes the schedule OMA's (a missing `maxRetries` counts as 0, as in OMA).
    #[test]
    fn retry_options_replace_the_providers_default() {
        let call = |json: &str| {
            AgentSettings::from_json(&format!(
                r#"{{"name": "r", "model": "m", "provider": "anthropic", "call": {json}}}"#
            ))
            .expect("valid")
            .call
            .retry
        };
        assert_eq!(call("{}"), None);
        assert_eq!(call(r#"{"timeoutMs": 5}"#), None);
        assert_eq!(
            call(r#"{"retryDelayMs": 5}"#),
            Some(RetryPolicy::from_oma(0, Some(5.0), None))
        );
        assert_eq!(
            call(r#"{"maxRetries": 4, "retryBackoff": 3}"#),
            Some(RetryPolicy::from_oma(4, None, Some(3.0)))
        );
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
        // Each error names the field by its path.
        for (text, message) in [
            ("[]", "expected an object, got array"),
            (r#"{"provider": "p"}"#, "missing field `model`"),
            (
                r#"{"model": "m", "provider": "p", "maxTurns": -1}"#,
                "`maxTurns` must be a non-negative integer below 4294967296, got number -1",
            ),
            (
                r#"{"model": "m", "provider": "p", "temperature": "hot"}"#,
                "`temperature` must be a number, got string",
            ),
            (
                r#"{"model": "m", "provider": "p", "aws": {"accessKeyId": "a"}}"#,
                "missing field `aws.secretAccessKey`",
            ),
            (
                r#"{"model": "m", "provider": "p", "tools": [{"name": "t"}]}"#,
                "missing field `tools[0].description`",
            ),
            (
                r#"{"model": "m", "provider": "p", "call": {"maxRetries": 1.5}}"#,
                "`call.maxRetries` must be an integer, got number 1.5",
            ),
            (
                r#"{"model": "m", "provider": "p", "call": {"egress": ["a", 1]}}"#,
                "`call.egress` origins must be strings",
            ),
            (
                r#"{"model": "m", "provider": "p", "backend": {"kind": "acp", "x": 1}}"#,
                "unknown field `backend.x`, expected one of `kind`",
            ),
        ] {
            let error = AgentSettings::from_json(text).expect_err(text);
            assert_eq!(
                error.to_string(),
                format!("the agent configuration is not valid: {message}"),
                "{text}"
            );
        }
        // Shape errors come before history errors; `null` is a missing optional field.
        let error = AgentSettings::from_json(
            r#"{"model": "m", "provider": "p", "history": 5, "colour": 1}"#,
        )
        .expect_err("two errors");
        assert_eq!(error.name(), "Error", "{error}");
        let settings = AgentSettings::from_json(
            r#"{"model": "m", "provider": "p", "name": null, "call": null,
                "tools": [{"name": "t", "description": "d", "input_schema": {}}]}"#,
        )
        .expect("null fields and the snake_case schema key are accepted");
        assert_eq!(settings.name, "agent");
        assert_eq!(settings.tools[0].input_schema, json!({}));
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

    /// The body one turn of an agent configured by `options` sends to `provider`.
    fn body_with(provider: &str, options: &str) -> Value {
        let settings = AgentSettings::from_json(&format!(
            r#"{{"model": "m", "provider": "{provider}", "apiKey": "k", "region": "us-east-1",
                 "maxTokens": 2048 {options}}}"#
        ))
        .expect("valid");
        let (spec, _) = settings.into_spec().expect("a known provider");
        let mut request = spec.template.clone();
        request.messages = vec![crate::message::LlmMessage::user_text("hi")];
        let adapter = adapter::for_provider(provider, None, IdSource::default()).expect("known");
        let http = adapter.format(&request, &spec.endpoint).expect("formats");
        serde_json::from_str(&http.body).expect("JSON body")
    }

    /// OMA's provider options reach each wire format as OMA's adapters map them, and only there.
    #[test]
    fn provider_options_are_mapped_per_wire_format() {
        let all = r#", "frequencyPenalty": 0.5, "presencePenalty": -0.25, "minP": 0.05,
            "parallelToolCalls": false, "thinking": {"effort": "high"},
            "extraBody": {"temperature": 0.1, "custom": {"x": 1}, "model": "not-this"}"#;
        let openai = body_with("openai", all);
        assert_eq!(openai["frequency_penalty"], json!(0.5));
        assert_eq!(openai["presence_penalty"], json!(-0.25));
        assert_eq!(openai["min_p"], json!(0.05));
        assert_eq!(openai["parallel_tool_calls"], json!(false));
        assert_eq!(openai["reasoning_effort"], json!("high"));
        assert_eq!(
            openai["temperature"],
            json!(0.1),
            "extraBody overrides sampling"
        );
        assert_eq!(openai["custom"], json!({"x": 1}));
        assert_eq!(
            openai["model"],
            json!("m"),
            "extraBody cannot replace structure"
        );
        // `max` is DeepSeek's: the other Chat Completions presets leave it out, as OMA does.
        let max = r#", "thinking": {"effort": "max"}"#;
        assert!(body_with("openai", max).get("reasoning_effort").is_none());
        let deepseek = body_with("deepseek", max);
        assert_eq!(deepseek["reasoning_effort"], json!("max"));
        assert_eq!(deepseek["thinking"], json!({"type": "disabled"}));
        // Anthropic carries the extra body and none of the OpenAI-track options.
        let anthropic = body_with("anthropic", all);
        for key in [
            "frequency_penalty",
            "presence_penalty",
            "min_p",
            "parallel_tool_calls",
        ] {
            assert!(anthropic.get(key).is_none(), "{key}: {anthropic}");
        }
        assert!(anthropic.get("reasoning_effort").is_none());
        assert_eq!(anthropic["custom"], json!({"x": 1}));
        assert_eq!(anthropic["temperature"], json!(0.1));
        // Bedrock: the extra body goes to `additionalModelRequestFields`.
        let bedrock = body_with("bedrock", all);
        assert_eq!(
            bedrock["additionalModelRequestFields"]["custom"],
            json!({"x": 1})
        );
        // The AI SDK bridge: penalties as sampling keys, the rest as OpenAI provider options.
        let ai_sdk = body_with("ai-sdk", all);
        assert_eq!(ai_sdk["frequencyPenalty"], json!(0.5));
        assert_eq!(ai_sdk["presencePenalty"], json!(-0.25));
        assert_eq!(
            ai_sdk["providerOptions"]["openai"],
            json!({"reasoningEffort": "high", "parallelToolCalls": false, "minP": 0.05})
        );
        // Gemini sends none of them.
        let gemini = body_with("gemini", all);
        assert!(gemini.get("custom").is_none(), "{gemini}");
        assert!(gemini["generationConfig"].get("frequencyPenalty").is_none());
    }

    #[test]
    fn bad_provider_options_name_the_field() {
        for (options, message) in [
            (r#""frequencyPenalty": "high""#, "`frequencyPenalty` must be a number, got string"),
            (r#""presencePenalty": true"#, "`presencePenalty` must be a number, got boolean true"),
            (r#""minP": [1]"#, "`minP` must be a number, got array"),
            (r#""parallelToolCalls": 1"#, "`parallelToolCalls` must be a boolean, got number 1"),
            (r#""extraBody": [1]"#, "`extraBody` must be an object"),
            (r#""extraBody": "x""#, "`extraBody` must be an object"),
            (
                r#""thinking": {"effort": "extreme"}"#,
                "`thinking.effort` must be \"low\", \"medium\", \"high\" or \"max\"",
            ),
            (
                r#""thinking": {"effort": "low", "colour": 1}"#,
                "unknown field `thinking.colour`, expected one of `enabled`, `budgetTokens`, `effort`",
            ),
            (
                r#""thinking": {"enabled": true}, "thinkingBudget": 2000"#,
                "`thinkingBudget` and `thinking` are both set",
            ),
        ] {
            let text = format!(r#"{{"model": "m", "provider": "openai", {options}}}"#);
            let error = AgentSettings::from_json(&text).expect_err(&text);
            assert_eq!(
                error.to_string(),
                format!("the agent configuration is not valid: {message}"),
                "{text}"
            );
        }
    }
}
