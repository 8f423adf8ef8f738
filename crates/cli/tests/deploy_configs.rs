//! Every deploy configuration this repository ships passes every variable the gateway reads,
//! and none it does not: the one list is `oma_gateway_rules::env::variable_names(None)` (the
//! gateway's own settings, OpenTelemetry's exporter variables, the AWS ones, and the key and base
//! URL of every built-in provider, OpenAI-compatible presets included, under each name OMA reads
//! them by). A variable added to the gateway's rules and forgotten in a configuration fails here.
//!
//! What "passes" means depends on the platform, and every variable stays optional:
//!
//! - workerd (`packages/worker/gateway.capnp`): one binding per variable, taken from workerd's
//!   environment by the same name (`fromEnvironment`; an unset one is no binding).
//! - wasmCloud (`packages/wasmcloud/.wash/config.yaml`): the settings come from a `dir:` secret
//!   source (one file per variable, any subset), never from `fromEnv` (which refuses to start
//!   when a named variable is unset); the inline settings are gateway variables.
//! - Spin (`packages/gateway/spin.toml`), Workers (`packages/worker/wrangler.toml`), Fastly
//!   (`crates/fastly/fastly.toml`): the platform passes whatever the operator sets (`spin up
//!   --env`, `wrangler secret put`, the Fastly stores, which the Fastly layer reads under every
//!   name of the list); the names the files write are gateway variables.
//! - `oma-host serve` and `jco serve` (`packages/gateway/host.mjs`) filter the process
//!   environment by name: every variable of the list gets through.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use oma_gateway_rules::env::{variable_names, PROVIDERS_VARIABLE};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The variables the gateway reads.
fn the_list() -> BTreeSet<String> {
    variable_names(None).into_iter().collect()
}

/// Whether `name` is a variable the gateway reads: one of the list, or the key or base URL of a
/// provider named only in the configuration (`<PROVIDER>_API_KEY`, `<PROVIDER>_BASE_URL`), or
/// the Fastly layer's `OMA_GATEWAY_PROVIDERS`.
fn read_by_the_gateway(name: &str) -> bool {
    the_list().contains(name)
        || name == PROVIDERS_VARIABLE
        || name.ends_with("_API_KEY")
        || name.ends_with("_BASE_URL")
}

#[test]
fn the_list_holds_what_the_issue_names() {
    let list = the_list();
    for name in [
        "OMA_GATEWAY_TOKEN",
        "OMA_GATEWAY_FALLBACKS",
        "OMA_GATEWAY_MAX_RETRIES",
        "OMA_GATEWAY_MODELS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "MINIMAX_API_KEY",
        "GOOGLE_API_KEY",
        "ARK_API_KEY",
        "DEEPSEEK_API_KEY",
        "DEEPSEEK_BASE_URL",
        "XAI_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
    ] {
        assert!(list.contains(name), "{name} is not in {list:?}");
    }
}

/// `(name = "X", fromEnvironment = "Y")` lines of a workerd configuration.
fn capnp_bindings(text: &str) -> Vec<(String, String)> {
    let quoted = |line: &str, field: &str| -> Option<String> {
        let rest = line.split_once(&format!("{field} = \""))?.1;
        Some(rest.split_once('"')?.0.to_owned())
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| Some((quoted(line, "name")?, quoted(line, "fromEnvironment")?)))
        .collect()
}

#[test]
fn the_worker_config_binds_every_variable_from_the_environment() {
    let bindings = capnp_bindings(&read("packages/worker/gateway.capnp"));
    for (name, from) in &bindings {
        assert_eq!(name, from, "a binding takes the variable of its own name");
        assert!(
            read_by_the_gateway(name),
            "gateway.capnp binds {name}, which the gateway does not read"
        );
    }
    let bound: BTreeSet<String> = bindings.into_iter().map(|(name, _)| name).collect();
    let missing: Vec<String> = the_list()
        .into_iter()
        .filter(|n| !bound.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "gateway.capnp does not bind {missing:?}"
    );
}

#[test]
fn the_wasmcloud_config_passes_every_variable_and_requires_none() {
    let text = read("packages/wasmcloud/.wash/config.yaml");
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect();
    assert!(
        !lines.iter().any(|line| line.contains("fromEnv")),
        "a `fromEnv` secret source refuses to start when one of its variables is unset"
    );
    // The settings' directory: named by the secret source, shipped (with a .gitignore that keeps
    // what an operator puts there out of git), so that wash finds it.
    let dir = lines
        .iter()
        .find_map(|line| line.trim().strip_prefix("dir:"))
        .map(|dir| dir.trim().trim_matches('"').to_owned())
        .expect("a `dir:` secret source");
    let shipped = repo("packages/wasmcloud").join(&dir).join(".gitignore");
    let ignore = std::fs::read_to_string(&shipped).unwrap_or_else(|e| {
        panic!("{}: {e}", shipped.display());
    });
    assert!(ignore.lines().any(|line| line.trim() == "*"), "{ignore}");
    assert!(
        lines.iter().any(|line| line.trim() == "secretFrom:"),
        "the workload takes the directory's settings"
    );
    // The inline settings, under workload.environment.config, are gateway variables.
    let mut in_config = false;
    for line in &lines {
        let indent = line.len() - line.trim_start().len();
        if line.trim() == "config:" && indent == 4 {
            in_config = true;
            continue;
        }
        if in_config && indent <= 4 {
            in_config = false;
        }
        if in_config {
            let name = line.trim().split_once(':').expect("NAME: value").0;
            assert!(read_by_the_gateway(name), "config.yaml sets {name}");
            assert!(
                !name.ends_with("_API_KEY") && !name.contains("TOKEN"),
                "{name}: a secret written in the file"
            );
        }
    }
}

#[test]
fn the_platform_files_write_only_gateway_variables() {
    let spin: toml::Table = read("packages/gateway/spin.toml").parse().expect("TOML");
    let component = &spin["component"]["oma-gateway"];
    assert!(
        spin.get("variables").is_none(),
        "a Spin application variable without a default is required at `spin up`"
    );
    let wrangler: toml::Table = read("packages/worker/wrangler.toml").parse().expect("TOML");
    let fastly: toml::Table = read("crates/fastly/fastly.toml").parse().expect("TOML");
    let local = &fastly["local_server"];
    let mut written: Vec<(&str, String)> = Vec::new();
    for (file, table) in [
        ("spin.toml", component.get("environment")),
        ("wrangler.toml", wrangler.get("vars")),
        (
            "fastly.toml",
            local["config_stores"]["oma_gateway"].get("contents"),
        ),
    ] {
        let table = table.and_then(toml::Value::as_table).expect(file);
        written.extend(table.keys().map(|name| (file, name.clone())));
    }
    for store in local["secret_stores"]["oma_gateway_secrets"]
        .as_array()
        .expect("fastly.toml's secret store")
    {
        let key = store["key"].as_str().expect("a key");
        assert_eq!(store["env"].as_str(), Some(key), "taken by its own name");
        written.push(("fastly.toml", key.to_owned()));
    }
    for (file, name) in written {
        assert!(read_by_the_gateway(&name), "{file} sets {name}");
    }
}

#[test]
fn the_hosts_that_filter_the_environment_let_every_variable_through() {
    for name in the_list() {
        assert!(
            oma_wasmtime::serve::passes_through(&name),
            "oma-host serve drops {name}"
        );
    }
    // packages/gateway/host.mjs: `forTheGateway`, the same rule by prefixes and suffixes.
    let host = read("packages/gateway/host.mjs");
    let rule = host
        .split_once("const forTheGateway = (name) =>")
        .and_then(|(_, rest)| rest.split_once(';'))
        .expect("host.mjs's forTheGateway")
        .0;
    let clauses: Vec<(&str, String)> = rule
        .split("||")
        .map(|clause| {
            let clause = clause.trim();
            let kind = if clause.starts_with("name.startsWith(") {
                "prefix"
            } else if clause.starts_with("name.endsWith(") {
                "suffix"
            } else if clause.starts_with("name === ") {
                "exact"
            } else {
                panic!("host.mjs: {clause}")
            };
            let value = clause.split('"').nth(1).expect("a quoted name").to_owned();
            (kind, value)
        })
        .collect();
    for name in the_list() {
        let through = clauses.iter().any(|(kind, value)| match *kind {
            "prefix" => name.starts_with(value.as_str()),
            "suffix" => name.ends_with(value.as_str()),
            _ => name == *value,
        });
        assert!(through, "jco serve (host.mjs) drops {name}");
    }
}
