# workerd's configuration for the gateway Worker (src/gateway.js) as `npm run bundle:gateway`
# leaves it in dist-gateway/: `workerd serve gateway.capnp --socket-addr http=127.0.0.1:PORT`
# from this directory. crates/cli/tests/gateway.rs runs the gateway's HTTP suite against it.
#
# - Configuration: every variable of the gateway (docs/gateway.md) is a binding taken from
#   workerd's own environment by the same name (`fromEnvironment`); a deployed Worker has them
#   as vars and secrets (wrangler.toml). A variable workerd's environment lacks is no
#   binding. A provider not listed here (`<PROVIDER>_API_KEY`) needs a line of its own.
# - Outbound: the Worker's fetch goes to `loopback`, a network service that reaches loopback
#   addresses only, so a test can never reach another host (workerd's default, the `internet`
#   service, reaches public addresses only; workerd itself contacts nothing).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .gateway),
    (name = "loopback", network = (allow = ["local"])),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:8080", http = (), service = "main"),
  ],
);

const gateway :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "dist-gateway/worker.js"),
    (name = "oma_routes.core.wasm", wasm = embed "dist-gateway/oma_routes.core.wasm"),
    (name = "oma_routes.core2.wasm", wasm = embed "dist-gateway/oma_routes.core2.wasm"),
    (name = "oma_routes.core3.wasm", wasm = embed "dist-gateway/oma_routes.core3.wasm"),
  ],
  compatibilityDate = "2026-11-17",
  bindings = [
    (name = "ANTHROPIC_API_KEY", fromEnvironment = "ANTHROPIC_API_KEY"),
    (name = "ANTHROPIC_BASE_URL", fromEnvironment = "ANTHROPIC_BASE_URL"),
    (name = "OPENAI_API_KEY", fromEnvironment = "OPENAI_API_KEY"),
    (name = "OPENAI_BASE_URL", fromEnvironment = "OPENAI_BASE_URL"),
    (name = "GEMINI_API_KEY", fromEnvironment = "GEMINI_API_KEY"),
    (name = "GEMINI_BASE_URL", fromEnvironment = "GEMINI_BASE_URL"),
    (name = "MINIMAX_API_KEY", fromEnvironment = "MINIMAX_API_KEY"),
    (name = "MINIMAX_BASE_URL", fromEnvironment = "MINIMAX_BASE_URL"),
    (name = "DEEPSEEK_API_KEY", fromEnvironment = "DEEPSEEK_API_KEY"),
    (name = "DEEPSEEK_BASE_URL", fromEnvironment = "DEEPSEEK_BASE_URL"),
    (name = "XAI_API_KEY", fromEnvironment = "XAI_API_KEY"),
    (name = "XAI_BASE_URL", fromEnvironment = "XAI_BASE_URL"),
    (name = "AWS_BEARER_TOKEN_BEDROCK", fromEnvironment = "AWS_BEARER_TOKEN_BEDROCK"),
    (name = "AWS_ACCESS_KEY_ID", fromEnvironment = "AWS_ACCESS_KEY_ID"),
    (name = "AWS_SECRET_ACCESS_KEY", fromEnvironment = "AWS_SECRET_ACCESS_KEY"),
    (name = "AWS_SESSION_TOKEN", fromEnvironment = "AWS_SESSION_TOKEN"),
    (name = "AWS_REGION", fromEnvironment = "AWS_REGION"),
    (name = "AWS_DEFAULT_REGION", fromEnvironment = "AWS_DEFAULT_REGION"),
    (name = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", fromEnvironment = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"),
    (name = "OMA_GATEWAY_EGRESS", fromEnvironment = "OMA_GATEWAY_EGRESS"),
    (name = "OMA_GATEWAY_TOKEN", fromEnvironment = "OMA_GATEWAY_TOKEN"),
    (name = "OMA_GATEWAY_MAX_BODY_BYTES", fromEnvironment = "OMA_GATEWAY_MAX_BODY_BYTES"),
    (name = "OMA_GATEWAY_DEADLINE_MS", fromEnvironment = "OMA_GATEWAY_DEADLINE_MS"),
    (name = "OMA_GATEWAY_MAX_RETRIES", fromEnvironment = "OMA_GATEWAY_MAX_RETRIES"),
    (name = "OMA_GATEWAY_FALLBACKS", fromEnvironment = "OMA_GATEWAY_FALLBACKS"),
    (name = "OMA_GATEWAY_MODELS", fromEnvironment = "OMA_GATEWAY_MODELS"),
  ],
  globalOutbound = "loopback",
);
