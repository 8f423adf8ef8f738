//! Where OMA finds what an agent's configuration leaves out: the environment variables that hold
//! a provider's API key, base URL and region (docs/api-keys.md).
//!
//! OMA's adapters pass `apiKey ?? process.env[...]` to the provider SDK they drive, and the SDKs
//! read variables of their own; code written for OMA relies on both. The component never reads
//! an environment (no world gives it one): the language packages read these variables on the
//! host side and pass what they find in the agent's configuration. This table is the one place
//! that says which variables those are, so every package reads the same ones in the same order;
//! the packages ask for it through the `codec` export (`environment-names`).

/// The variables a provider's missing settings come from, each list in the order it is read:
/// the first variable that is set and not empty is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvironmentNames {
    /// The variables that may hold the API key (or bearer token).
    pub api_key: &'static [&'static str],
    /// The variable that may hold the base URL.
    pub base_url: Option<&'static str>,
    /// The variables that may hold the region (Bedrock).
    pub region: &'static [&'static str],
    /// The region when no variable sets one (Bedrock: `us-east-1`, as OMA's adapter).
    pub default_region: Option<&'static str>,
}

const NONE: EnvironmentNames = EnvironmentNames {
    api_key: &[],
    base_url: None,
    region: &[],
    default_region: None,
};

/// The variables OMA 1.16.1 (or the SDK it drives) reads for `provider`; none for a provider
/// it does not know (an OpenAI-compatible server named by its base URL, the AI SDK bridge).
pub fn environment_names(provider: &str) -> EnvironmentNames {
    let key = |api_key: &'static [&'static str]| EnvironmentNames { api_key, ..NONE };
    let key_and_url = |api_key: &'static [&'static str], base_url: &'static str| EnvironmentNames {
        api_key,
        base_url: Some(base_url),
        ..NONE
    };
    match provider {
        "anthropic" => key_and_url(&["ANTHROPIC_API_KEY"], "ANTHROPIC_BASE_URL"),
        "openai" => key_and_url(&["OPENAI_API_KEY"], "OPENAI_BASE_URL"),
        "azure-openai" => key(&["AZURE_OPENAI_API_KEY"]),
        "gemini" => key(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
        "grok" => key(&["XAI_API_KEY"]),
        "minimax" => key_and_url(&["MINIMAX_API_KEY"], "MINIMAX_BASE_URL"),
        "mimo" => key_and_url(&["MIMO_API_KEY"], "MIMO_BASE_URL"),
        "deepseek" => key(&["DEEPSEEK_API_KEY"]),
        "doubao" => key(&["ARK_API_KEY"]),
        "hunyuan" => key_and_url(&["HUNYUAN_API_KEY"], "HUNYUAN_BASE_URL"),
        "qiniu" => key(&["QINIU_API_KEY"]),
        "copilot" => key(&["GITHUB_COPILOT_TOKEN", "GITHUB_TOKEN"]),
        // The AWS SDK OMA drives sends a Bedrock API key from `AWS_BEARER_TOKEN_BEDROCK` as a
        // bearer token; the region is OMA's own fallback.
        "bedrock" => EnvironmentNames {
            api_key: &["AWS_BEARER_TOKEN_BEDROCK"],
            region: &["AWS_REGION"],
            default_region: Some("us-east-1"),
            ..NONE
        },
        _ => NONE,
    }
}

/// Every provider [`environment_names`] has variables for.
pub const PROVIDERS: [&str; 13] = [
    "anthropic",
    "openai",
    "azure-openai",
    "gemini",
    "grok",
    "minimax",
    "mimo",
    "deepseek",
    "doubao",
    "hunyuan",
    "qiniu",
    "copilot",
    "bedrock",
];

/// Whether `name` is a variable that holds some provider's API key or token in this table.
pub fn is_key_variable(name: &str) -> bool {
    PROVIDERS
        .iter()
        .any(|provider| environment_names(provider).api_key.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_provider_has_a_key_variable() {
        let openai_presets = crate::adapter::openai::PRESETS.iter().copied();
        for provider in ["anthropic", "gemini", "bedrock", "azure-openai", "copilot"]
            .into_iter()
            .chain(openai_presets)
        {
            assert!(PROVIDERS.contains(&provider), "{provider} in PROVIDERS");
            assert!(
                !environment_names(provider).api_key.is_empty(),
                "{provider} has no key variable"
            );
        }
        assert_eq!(environment_names("ai-sdk"), NONE);
        assert_eq!(environment_names("my-llm"), NONE);
        assert_eq!(
            environment_names("gemini").api_key,
            ["GEMINI_API_KEY", "GOOGLE_API_KEY"]
        );
        assert_eq!(
            environment_names("bedrock").default_region,
            Some("us-east-1")
        );
    }
}
