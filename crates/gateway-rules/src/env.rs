//! The gateway's configuration, read from the environment only (`docs/gateway.md#configuration`):
//! provider keys and base URLs under the names the CLI and the providers' SDKs use, the egress
//! allowlist, the bearer token, the body limit, the deadline and the retries.
//!
//! Reading is pure: [`Settings::from_vars`] takes the variables as a list, so the rules are
//! tested natively and the handler passes what `wasi:cli/environment` gives.

use std::collections::HashMap;

use oma_core::adapter::{Credentials, Endpoint};
use oma_core::http::EgressPolicy;

use crate::chat::Target;

/// The largest request body by default: 32 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 32 << 20;
/// How long one request may take by default, provider calls included.
pub const DEFAULT_DEADLINE_MS: u64 = 120_000;

/// Everything the gateway is configured with.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Settings {
    vars: HashMap<String, String>,
    /// The bearer token callers must present; `None` for no authentication.
    pub token: Option<String>,
    /// The largest request body, in bytes.
    pub max_body_bytes: u64,
    /// How long one request may take, in milliseconds.
    pub deadline_ms: u64,
    /// Retries of a failed provider call (`OMA_GATEWAY_MAX_RETRIES`, with OMA's schedule);
    /// `None` when unset: each provider's default policy.
    pub max_retries: Option<u32>,
    /// `OMA_GATEWAY_EGRESS`, when set; `None` allows the requested provider's origin only, and
    /// only when that provider is configured.
    pub egress: Option<EgressPolicy>,
    /// `OMA_GATEWAY_FALLBACKS`: for a requested `<provider>/<model>`, the ones to try in order
    /// when it fails with a retryable error (`crate::chat`).
    pub fallbacks: Vec<(String, Vec<Target>)>,
    /// `OMA_GATEWAY_MODELS`: the `<provider>/<model>` list `GET /v1/models` names (with the
    /// models of the fallbacks).
    pub models: Vec<Target>,
    /// Where the chat routes' traces are exported (OTLP/HTTP JSON, [`crate::trace`]):
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.
    pub traces: Option<String>,
    /// `OMA_GATEWAY_KEYS`: the clients' tokens with their limits per minute ([`crate::limits`]).
    pub keys: crate::limits::Keys,
    /// `OMA_GATEWAY_LIMITS_BUCKET`: the `wasi:keyvalue` bucket the replicas count limits in;
    /// `None`: each instance counts in its own memory.
    pub limits_bucket: Option<String>,
    /// `OMA_GATEWAY_DROP_PARAMS`: the refusals of the chat routes' field table
    /// ([`crate::fields`]) that become drops; none unless set.
    pub drop_params: crate::fields::DropParams,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The variables hold keys: only their names are shown.
        let mut names: Vec<&str> = self.vars.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("Settings")
            .field("variables", &names)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("deadline_ms", &self.deadline_ms)
            .field("max_retries", &self.max_retries)
            .field("egress", &self.egress)
            .field("fallbacks", &self.fallbacks)
            .field("models", &self.models)
            .field("traces", &self.traces.is_some())
            .field("keys", &self.keys)
            .field("limits_bucket", &self.limits_bucket)
            .field("drop_params", &self.drop_params)
            .finish()
    }
}

/// A provider's endpoint as the environment configures it, and every secret it holds.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProviderEnv {
    /// Base URL, credentials and region.
    pub endpoint: Endpoint,
    /// The values that must never be shown: keys, AWS key ids, secrets and tokens, the
    /// credentials in the base URL.
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for ProviderEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderEnv")
            .field("endpoint", &self.endpoint)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl ProviderEnv {
    /// Whether the environment names this provider at all (a key or a base URL).
    pub fn configured(&self) -> bool {
        self.endpoint.base_url.is_some() || self.endpoint.credentials != Credentials::None
    }
}

/// The variable that holds the API key of `provider`: `XAI_API_KEY` for `grok`, else
/// `<PROVIDER>_API_KEY` (upper-cased, anything but letters and digits as `_`).
pub fn key_variable(provider: &str) -> String {
    format!("{}_API_KEY", stem(provider))
}

/// The variables that may hold the API key of `provider`, in the order they are read: its
/// [`key_variable`], then the ones OMA reads for it (`oma_core::environment`, e.g.
/// `GOOGLE_API_KEY` for `gemini`, `ARK_API_KEY` for `doubao`), so that an environment set up
/// for OMA configures the gateway and the CLI too.
pub fn key_variables(provider: &str) -> Vec<String> {
    let mut names = vec![key_variable(provider)];
    for name in oma_core::environment::environment_names(provider).api_key {
        if !names.iter().any(|known| known == name) {
            names.push((*name).to_owned());
        }
    }
    names
}

/// The variable that holds the base URL of `provider`: `XAI_BASE_URL` for `grok`, else
/// `<PROVIDER>_BASE_URL`.
pub fn base_url_variable(provider: &str) -> String {
    format!("{}_BASE_URL", stem(provider))
}

fn stem(provider: &str) -> String {
    match provider {
        "grok" => "XAI".into(),
        other => other
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect(),
    }
}

/// The endpoint of `provider` from the variables `var` reads (an empty value counts as unset):
/// its key (Bedrock: a bearer token, else AWS access keys and a region) and its base URL.
/// `base_url` given by the caller wins over the environment's.
pub fn provider_env(
    provider: &str,
    base_url: Option<String>,
    var: impl Fn(&str) -> Option<String>,
) -> ProviderEnv {
    let var = |name: &str| var(name).filter(|value| !value.is_empty());
    let mut endpoint = Endpoint {
        base_url: base_url.or_else(|| var(&base_url_variable(provider))),
        ..Endpoint::default()
    };
    let mut secrets = Vec::new();
    if provider == oma_core::adapter::bedrock::NAME {
        endpoint.region = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION"));
        if endpoint.base_url.is_none() {
            endpoint.base_url = var("AWS_ENDPOINT_URL_BEDROCK_RUNTIME");
        }
        if let Some(token) = var("AWS_BEARER_TOKEN_BEDROCK") {
            secrets.push(token.clone());
            endpoint.credentials = Credentials::ApiKey(token);
        } else if let (Some(id), Some(secret)) =
            (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
        {
            let token = var("AWS_SESSION_TOKEN");
            secrets.extend([id.clone(), secret.clone()]);
            secrets.extend(token.iter().cloned());
            endpoint.credentials = Credentials::Aws {
                access_key_id: id,
                secret_access_key: secret,
                session_token: token,
            };
        }
    } else if let Some(key) = key_variables(provider).iter().find_map(|name| var(name)) {
        secrets.push(key.clone());
        endpoint.credentials = Credentials::ApiKey(key);
    }
    if let Some(url) = &endpoint.base_url {
        secrets.extend(oma_core::secret::url_secrets(url));
    }
    ProviderEnv { endpoint, secrets }
}

/// The gateway's own variables (`OMA_GATEWAY_*`), as [`Settings::from_vars`] reads them.
pub const GATEWAY_VARIABLES: [&str; 10] = [
    "OMA_GATEWAY_TOKEN",
    crate::limits::KEYS_VARIABLE,
    crate::limits::BUCKET_VARIABLE,
    "OMA_GATEWAY_MAX_BODY_BYTES",
    "OMA_GATEWAY_DEADLINE_MS",
    "OMA_GATEWAY_MAX_RETRIES",
    "OMA_GATEWAY_FALLBACKS",
    "OMA_GATEWAY_MODELS",
    "OMA_GATEWAY_EGRESS",
    DROP_PARAMS_VARIABLE,
];

/// The operator's setting that turns refusals of the chat routes' field table into drops
/// ([`crate::fields::DropParams`]).
pub const DROP_PARAMS_VARIABLE: &str = "OMA_GATEWAY_DROP_PARAMS";

/// OpenTelemetry's exporter variables the gateway reads ([`crate::trace`]).
pub const OTEL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// The AWS variables [`provider_env`] reads for Bedrock.
pub const AWS_VARIABLES: [&str; 7] = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Names more providers for a platform whose configuration cannot be listed (a Fastly config
/// store is read key by key): a comma-separated list of provider names, e.g. `my-llm`, whose
/// `<PROVIDER>_API_KEY` and `<PROVIDER>_BASE_URL` are read besides those of the built-in
/// providers.
pub const PROVIDERS_VARIABLE: &str = "OMA_GATEWAY_PROVIDERS";

/// Every variable the gateway reads, for a platform that can only look a variable up by name:
/// the gateway's own, the AWS ones, the key and base URL of each built-in provider, and those
/// of each provider `providers` names (the value of [`PROVIDERS_VARIABLE`], if set). Reading
/// these names and passing what was found to [`Settings::from_vars`] gives the settings an
/// environment holding the same values would.
pub fn variable_names(providers: Option<&str>) -> Vec<String> {
    use oma_core::adapter::{ai_sdk, anthropic, bedrock, gemini, openai};
    let mut names: Vec<String> = GATEWAY_VARIABLES
        .iter()
        .chain(OTEL_VARIABLES.iter())
        .chain(AWS_VARIABLES.iter())
        .map(|name| (*name).to_owned())
        .collect();
    let built_in = [anthropic::NAME, gemini::NAME, ai_sdk::NAME, bedrock::NAME]
        .into_iter()
        .chain(openai::PRESETS.iter().copied());
    let named = providers
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty());
    for provider in built_in.chain(named) {
        let mut own = key_variables(provider);
        own.push(base_url_variable(provider));
        for name in own {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// `OMA_GATEWAY_FALLBACKS`' value: a JSON object whose keys and list items are all
/// `<provider>/<model>`; `None` for anything else.
fn parse_fallbacks(text: &str) -> Option<Vec<(String, Vec<Target>)>> {
    let value: serde_json::Value = oma_core::json::parse_value(text).ok()?;
    value
        .as_object()?
        .iter()
        .map(|(model, list)| {
            let requested = Target::parse(model)?.label();
            let targets = list
                .as_array()?
                .iter()
                .map(|item| item.as_str().and_then(Target::parse))
                .collect::<Option<Vec<_>>>()?;
            Some((requested, targets))
        })
        .collect()
}

/// A variable whose value the gateway cannot use; the gateway answers 500 naming it (never
/// its value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadVariable {
    /// The variable's name.
    pub name: &'static str,
    /// What it must be.
    pub expected: &'static str,
}

impl Settings {
    /// The settings in `vars` (the whole environment; later duplicates win).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, BadVariable> {
        let vars: HashMap<String, String> = vars.into_iter().collect();
        let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let number = |name: &'static str, default: u64| match get(name) {
            None => Ok(default),
            Some(text) => text.parse::<u64>().map_err(|_| BadVariable {
                name,
                expected: "a whole number",
            }),
        };
        let max_body_bytes = number("OMA_GATEWAY_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        let deadline_ms = number("OMA_GATEWAY_DEADLINE_MS", DEFAULT_DEADLINE_MS)?;
        let max_retries = match get("OMA_GATEWAY_MAX_RETRIES") {
            None => None,
            Some(_) => Some(
                u32::try_from(number("OMA_GATEWAY_MAX_RETRIES", 0)?)
                    .ok()
                    .filter(|n| *n <= 10)
                    .ok_or(BadVariable {
                        name: "OMA_GATEWAY_MAX_RETRIES",
                        expected: "a whole number from 0 to 10",
                    })?,
            ),
        };
        if deadline_ms == 0 {
            return Err(BadVariable {
                name: "OMA_GATEWAY_DEADLINE_MS",
                expected: "a positive whole number",
            });
        }
        let egress = match get("OMA_GATEWAY_EGRESS") {
            None => None,
            Some(word) if word.eq_ignore_ascii_case("open") => Some(EgressPolicy::Open),
            Some(list) => {
                let origins: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|origin| !origin.is_empty())
                    .map(|origin| origin.trim_end_matches('/').to_owned())
                    .collect();
                let well_formed = origins.iter().all(|origin| {
                    url::Url::parse(origin).is_ok_and(|url| {
                        matches!(url.scheme(), "http" | "https")
                            && url
                                .origin()
                                .ascii_serialization()
                                .eq_ignore_ascii_case(origin)
                    })
                });
                if !well_formed {
                    return Err(BadVariable {
                        name: "OMA_GATEWAY_EGRESS",
                        expected: "`open` or origins such as https://api.anthropic.com, \
                                   separated by commas",
                    });
                }
                Some(EgressPolicy::Allowlist(origins))
            }
        };
        let token = get("OMA_GATEWAY_TOKEN").map(str::to_owned);
        let fallbacks = match get("OMA_GATEWAY_FALLBACKS") {
            None => Vec::new(),
            Some(text) => parse_fallbacks(text).ok_or(BadVariable {
                name: "OMA_GATEWAY_FALLBACKS",
                expected: "a JSON object mapping `<provider>/<model>` to a list of \
                           `<provider>/<model>`",
            })?,
        };
        let models = match get("OMA_GATEWAY_MODELS") {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(Target::parse)
                .collect::<Option<Vec<_>>>()
                .ok_or(BadVariable {
                    name: "OMA_GATEWAY_MODELS",
                    expected: "`<provider>/<model>` names separated by commas",
                })?,
        };
        let traces = crate::trace::endpoint_of(
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        )?;
        let keys = match get(crate::limits::KEYS_VARIABLE) {
            None => crate::limits::Keys::default(),
            Some(text) => crate::limits::Keys::parse(text).ok_or(BadVariable {
                name: crate::limits::KEYS_VARIABLE,
                expected: "a JSON object mapping each token to its limits,                            {\"rpm\": <requests per minute>, \"tpm\": <tokens per minute>},                            each a positive whole number or left out",
            })?,
        };
        let limits_bucket = get(crate::limits::BUCKET_VARIABLE).map(str::to_owned);
        let drop_params = match get(DROP_PARAMS_VARIABLE) {
            None => crate::fields::DropParams::Never,
            Some(text) => crate::fields::DropParams::parse(text).ok_or(BadVariable {
                name: DROP_PARAMS_VARIABLE,
                expected: "`true`, `false`, or field names separated by commas",
            })?,
        };
        Ok(Settings {
            drop_params,
            keys,
            limits_bucket,
            vars,
            token,
            max_body_bytes,
            deadline_ms,
            max_retries,
            egress,
            fallbacks,
            models,
            traces,
        })
    }

    /// The fallbacks configured for the requested `<provider>/<model>`, in order.
    pub fn fallbacks_for(&self, requested: &str) -> Vec<Target> {
        self.fallbacks
            .iter()
            .find(|(model, _)| model == requested)
            .map(|(_, targets)| targets.clone())
            .unwrap_or_default()
    }

    /// The endpoint of `provider` as the environment configures it.
    pub fn provider(&self, provider: &str) -> ProviderEnv {
        provider_env(provider, None, |name| self.vars.get(name).cloned())
    }

    /// Every value the gateway must never show, whichever provider a request names: the keys,
    /// tokens and AWS credentials of its environment, its own token, and the credentials in
    /// base URLs. For replies written before a request names its provider (a request body of
    /// the wrong shape echoes the field names it was given).
    pub fn all_secrets(&self) -> Vec<String> {
        let mut secrets: Vec<String> = self.token.iter().cloned().collect();
        secrets.extend(self.keys.tokens().map(str::to_owned));
        for (name, value) in &self.vars {
            if name.ends_with("_BASE_URL") || name.starts_with("AWS_ENDPOINT_URL") {
                secrets.extend(oma_core::secret::url_secrets(value));
            } else if name.ends_with("_API_KEY")
                || oma_core::environment::is_key_variable(name)
                || (name.starts_with("AWS_")
                    && (name.contains("SECRET")
                        || name.contains("TOKEN")
                        || name.contains("KEY_ID")))
            {
                secrets.push(value.clone());
            }
        }
        secrets.retain(|secret| !secret.is_empty());
        secrets
    }

    /// Where a run with `provider` may send: `OMA_GATEWAY_EGRESS` when set; otherwise anywhere
    /// the configuration points (a configured provider's URL comes from the environment, not
    /// from the request) and nowhere for a provider the environment does not name.
    pub fn egress_for(&self, provider: &ProviderEnv) -> EgressPolicy {
        match &self.egress {
            Some(policy) => policy.clone(),
            None if provider.configured() => EgressPolicy::Open,
            None => EgressPolicy::Allowlist(Vec::new()),
        }
    }

    /// Whether the request carries the configured token, as `authorization: Bearer <token>`
    /// (what OpenAI's clients send their API key as) or `x-api-key: <token>` (Anthropic's);
    /// always true without one. Compared in constant time.
    ///
    /// With `OMA_GATEWAY_KEYS`, each of its tokens is accepted too (as [`client_key`] reads them),
    /// and a token is required even without `OMA_GATEWAY_TOKEN`.
    pub fn authorized_either(&self, authorization: Option<&str>, api_key: Option<&str>) -> bool {
        if !self.keys.is_empty() {
            let given = client_key(authorization, api_key);
            if given.is_some_and(|given| self.keys.find(given).is_some()) {
                return true;
            }
            if self.token.is_none() {
                return false;
            }
        }
        let Some(token) = &self.token else {
            return true;
        };
        let by_key =
            api_key.is_some_and(|key| constant_time_eq(key.trim().as_bytes(), token.as_bytes()));
        by_key | self.authorized(authorization)
    }

    /// Whether `authorization` (the request's header) carries the configured token; always
    /// true without one. Compared in constant time.
    pub fn authorized(&self, authorization: Option<&str>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let given = authorization
            .and_then(|value| {
                let (scheme, rest) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .unwrap_or("");
        constant_time_eq(given.as_bytes(), token.as_bytes())
    }
}

/// The key a client presents: `x-api-key` (Anthropic's clients), else the `Bearer` token of
/// `authorization` (OpenAI's), trimmed; `None` when neither holds one.
pub fn client_key<'a>(authorization: Option<&'a str>, api_key: Option<&'a str>) -> Option<&'a str> {
    api_key
        .map(str::trim)
        .filter(|key| !key.is_empty())
        .or_else(|| {
            let (scheme, rest) = authorization?.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .filter(|key| !key.is_empty())
}

/// Whether `a == b`, in a time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, BadVariable> {
        Settings::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn defaults_without_variables() {
        let s = settings(&[]).expect("valid");
        assert_eq!(s.max_body_bytes, 32 << 20);
        assert_eq!(s.deadline_ms, 120_000);
        assert_eq!(s.max_retries, None, "each provider's default policy");
        assert_eq!(s.token, None);
        assert!(s.authorized(None));
        let anthropic = s.provider("anthropic");
        assert!(!anthropic.configured());
        assert_eq!(
            s.egress_for(&anthropic),
            EgressPolicy::Allowlist(Vec::new()),
            "an unconfigured provider is reached nowhere"
        );
    }

    #[test]
    fn keys_and_base_urls_come_from_the_usual_names() {
        let s = settings(&[
            ("ANTHROPIC_API_KEY", "sk-ant-1"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("XAI_API_KEY", "xai-1"),
            ("MY_LLM_API_KEY", "m-1"),
            ("DEEPSEEK_API_KEY", ""),
        ])
        .expect("valid");
        let anthropic = s.provider("anthropic");
        assert!(anthropic.endpoint.credentials == Credentials::ApiKey("sk-ant-1".into()));
        assert_eq!(anthropic.secrets, vec!["sk-ant-1".to_string()]);
        assert_eq!(s.egress_for(&anthropic), EgressPolicy::Open);
        let openai = s.provider("openai");
        assert_eq!(
            openai.endpoint.base_url.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        assert!(openai.configured());
        assert!(s.provider("grok").endpoint.credentials == Credentials::ApiKey("xai-1".into()));
        assert!(s.provider("my-llm").configured());
        assert!(!s.provider("deepseek").configured(), "empty is unset");
        // After its own name, a provider's key is read where OMA reads it.
        let oma = settings(&[
            ("GOOGLE_API_KEY", "g-1"),
            ("ARK_API_KEY", "ark-1"),
            ("DOUBAO_API_KEY", "doubao-1"),
            ("GITHUB_TOKEN", "gh-1"),
        ])
        .expect("valid");
        let key = |provider: &str| oma.provider(provider).endpoint.credentials;
        assert!(key("gemini") == Credentials::ApiKey("g-1".into()));
        assert!(
            key("doubao") == Credentials::ApiKey("doubao-1".into()),
            "its own name first"
        );
        assert!(key("copilot") == Credentials::ApiKey("gh-1".into()));
        let secrets = oma.all_secrets();
        for secret in ["g-1", "ark-1", "doubao-1", "gh-1"] {
            assert!(
                secrets.iter().any(|s| s == secret),
                "{secret} in {secrets:?}"
            );
        }
        let shown = format!("{s:?}");
        for secret in ["sk-ant-1", "xai-1", "m-1"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn variable_names_cover_what_the_settings_read() {
        let names = variable_names(Some(" my-llm, ,grok"));
        for name in [
            "OMA_GATEWAY_TOKEN",
            "OMA_GATEWAY_EGRESS",
            "AWS_SECRET_ACCESS_KEY",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "OPENAI_API_KEY",
            "GEMINI_BASE_URL",
            "AI_SDK_BASE_URL",
            "XAI_API_KEY",
            "GOOGLE_API_KEY",
            "ARK_API_KEY",
            "MY_LLM_API_KEY",
            "MY_LLM_BASE_URL",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        let unique: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "no name twice");
        assert!(!variable_names(None).iter().any(|n| n.starts_with("MY_LLM")));
        // What is found under those names configures the gateway as an environment would.
        let found = [
            ("MY_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OMA_GATEWAY_DEADLINE_MS", "500"),
        ];
        let s = settings(&found).expect("valid");
        assert!(s.provider("my-llm").configured());
        assert_eq!(s.deadline_ms, 500);
    }

    #[test]
    fn keys_authenticate_as_the_token_does() {
        let keys = r#"{"team-a": {"rpm": 60}, "team-b": {}}"#;
        let s = settings(&[("OMA_GATEWAY_KEYS", keys)]).expect("valid");
        assert!(s.authorized_either(Some("Bearer team-a"), None));
        assert!(s.authorized_either(None, Some("team-b")));
        assert!(!s.authorized_either(Some("Bearer team-c"), None));
        assert!(
            !s.authorized_either(None, None),
            "a key is required once keys are set"
        );
        let both =
            settings(&[("OMA_GATEWAY_KEYS", keys), ("OMA_GATEWAY_TOKEN", "admin")]).expect("valid");
        assert!(both.authorized_either(Some("Bearer admin"), None));
        assert!(both.authorized_either(Some("Bearer team-a"), None));
        assert!(!both.authorized_either(Some("Bearer nobody"), None));
        for secret in ["team-a", "team-b", "admin"] {
            assert!(both.all_secrets().iter().any(|s| s == secret), "{secret}");
        }
        assert!(!format!("{both:?}").contains("team-a"));
        assert_eq!(
            client_key(Some("Bearer  k1 "), None),
            Some("k1"),
            "the bearer token, trimmed"
        );
        assert_eq!(client_key(Some("Bearer k1"), Some("k2")), Some("k2"));
        assert_eq!(client_key(Some("Basic k1"), None), None);
        let bad = settings(&[("OMA_GATEWAY_KEYS", "[\"team-a\"]")]).expect_err("not an object");
        assert_eq!(bad.name, "OMA_GATEWAY_KEYS");
    }

    #[test]
    fn bedrock_reads_aws_credentials() {
        let s = settings(&[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
            ("AWS_SESSION_TOKEN", "tok"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9"),
        ])
        .expect("valid");
        let bedrock = s.provider("bedrock");
        assert_eq!(bedrock.endpoint.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            bedrock.endpoint.base_url.as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(bedrock.secrets.len(), 3);
        let s = settings(&[
            ("AWS_BEARER_TOKEN_BEDROCK", "bear"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
        ])
        .expect("valid");
        assert!(
            s.provider("bedrock").endpoint.credentials == Credentials::ApiKey("bear".into()),
            "the bearer token wins"
        );
    }

    #[test]
    fn egress_token_and_limits_are_read_and_checked() {
        let s = settings(&[
            (
                "OMA_GATEWAY_EGRESS",
                "https://api.anthropic.com/, http://127.0.0.1:8080",
            ),
            ("OMA_GATEWAY_TOKEN", "t0ken"),
            ("OMA_GATEWAY_MAX_BODY_BYTES", "1024"),
            ("OMA_GATEWAY_DEADLINE_MS", "500"),
            ("OMA_GATEWAY_MAX_RETRIES", "2"),
        ])
        .expect("valid");
        assert_eq!(
            s.egress,
            Some(EgressPolicy::Allowlist(vec![
                "https://api.anthropic.com".into(),
                "http://127.0.0.1:8080".into()
            ]))
        );
        assert_eq!(
            (s.max_body_bytes, s.deadline_ms, s.max_retries),
            (1024, 500, Some(2))
        );
        assert!(s.authorized(Some("Bearer t0ken")));
        assert!(s.authorized(Some("bearer  t0ken ")));
        for wrong in [
            None,
            Some("t0ken"),
            Some("Bearer t0ke"),
            Some("Basic t0ken"),
        ] {
            assert!(!s.authorized(wrong), "{wrong:?}");
        }
        assert_eq!(
            settings(&[("OMA_GATEWAY_EGRESS", "open")])
                .expect("valid")
                .egress,
            Some(EgressPolicy::Open)
        );
        for (name, value) in [
            ("OMA_GATEWAY_MAX_BODY_BYTES", "lots"),
            ("OMA_GATEWAY_DEADLINE_MS", "0"),
            ("OMA_GATEWAY_MAX_RETRIES", "99"),
            ("OMA_GATEWAY_EGRESS", "api.anthropic.com"),
            ("OMA_GATEWAY_EGRESS", "https://api.anthropic.com/v1"),
        ] {
            let error = settings(&[(name, value)]).expect_err(value);
            assert_eq!(error.name, name);
        }
    }
}
