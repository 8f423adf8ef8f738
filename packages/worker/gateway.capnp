# workerd's configuration for the gateway Worker (src/gateway.js) as `npm run bundle:gateway`
# leaves it in dist-gateway/: `workerd serve gateway.capnp --socket-addr http=127.0.0.1:PORT`
# from this directory. crates/cli/tests/gateway.rs runs the gateway's HTTP suite against it.
#
# - Configuration: every variable the gateway reads (docs/gateway.md; the list is
#   `oma_gateway_rules::env::variable_names`, and crates/cli/tests/deploy_configs.rs holds this
#   file to it) is a binding taken from workerd's own environment by the same name
#   (`fromEnvironment`); a variable workerd's environment lacks is no binding, so each is
#   optional. A deployed Worker has them as vars and secrets (wrangler.toml). A provider of
#   your own (`<PROVIDER>_API_KEY`, `<PROVIDER>_BASE_URL`) needs a line of its own.
# - Outbound: the Worker's fetch goes to `loopback`, a network service that reaches loopback
#   addresses only, so a test can never reach another host (workerd's default, the `internet`
#   service, reaches public addresses only; workerd itself contacts nothing).
# - Per-token limits: the Worker exports the Durable Object class `LimitsCounter`, declared here
#   as a namespace kept in memory (workerd's process; `localDisk` would keep it on disk) and
#   bound as `LIMITS`. With `OMA_GATEWAY_LIMITS_BUCKET=LIMITS` in workerd's environment the
#   limits of OMA_GATEWAY_KEYS are counted there, one object per key, shared by every isolate
#   bound to the namespace (another Worker service reaches it with
#   `durableObjectNamespace = (className = "LimitsCounter", serviceName = "main")`); without it,
#   in each isolate's memory.
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
  durableObjectNamespaces = [
    (className = "LimitsCounter", uniqueKey = "oma-gateway-limits"),
  ],
  durableObjectStorage = (inMemory = void),
  bindings = [
    # The per-token limits' store (OMA_GATEWAY_LIMITS_BUCKET=LIMITS).
    (name = "LIMITS", durableObjectNamespace = "LimitsCounter"),
    # The gateway's own settings.
    (name = "OMA_GATEWAY_DEADLINE_MS", fromEnvironment = "OMA_GATEWAY_DEADLINE_MS"),
    (name = "OMA_GATEWAY_DROP_PARAMS", fromEnvironment = "OMA_GATEWAY_DROP_PARAMS"),
    (name = "OMA_GATEWAY_EGRESS", fromEnvironment = "OMA_GATEWAY_EGRESS"),
    (name = "OMA_GATEWAY_FALLBACKS", fromEnvironment = "OMA_GATEWAY_FALLBACKS"),
    (name = "OMA_GATEWAY_KEYS", fromEnvironment = "OMA_GATEWAY_KEYS"),
    (name = "OMA_GATEWAY_LIMITS_BUCKET", fromEnvironment = "OMA_GATEWAY_LIMITS_BUCKET"),
    (name = "OMA_GATEWAY_MAX_BODY_BYTES", fromEnvironment = "OMA_GATEWAY_MAX_BODY_BYTES"),
    (name = "OMA_GATEWAY_MAX_RETRIES", fromEnvironment = "OMA_GATEWAY_MAX_RETRIES"),
    (name = "OMA_GATEWAY_MODELS", fromEnvironment = "OMA_GATEWAY_MODELS"),
    (name = "OMA_GATEWAY_TOKEN", fromEnvironment = "OMA_GATEWAY_TOKEN"),
    # OpenTelemetry's exporter (traces).
    (name = "OTEL_EXPORTER_OTLP_ENDPOINT", fromEnvironment = "OTEL_EXPORTER_OTLP_ENDPOINT"),
    (name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", fromEnvironment = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    # Bedrock's AWS credentials, region and endpoint.
    (name = "AWS_ACCESS_KEY_ID", fromEnvironment = "AWS_ACCESS_KEY_ID"),
    (name = "AWS_BEARER_TOKEN_BEDROCK", fromEnvironment = "AWS_BEARER_TOKEN_BEDROCK"),
    (name = "AWS_DEFAULT_REGION", fromEnvironment = "AWS_DEFAULT_REGION"),
    (name = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME", fromEnvironment = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"),
    (name = "AWS_REGION", fromEnvironment = "AWS_REGION"),
    (name = "AWS_SECRET_ACCESS_KEY", fromEnvironment = "AWS_SECRET_ACCESS_KEY"),
    (name = "AWS_SESSION_TOKEN", fromEnvironment = "AWS_SESSION_TOKEN"),
    # Each built-in provider's key and base URL, under every name OMA reads them by.
    (name = "AI_SDK_API_KEY", fromEnvironment = "AI_SDK_API_KEY"),
    (name = "AI_SDK_BASE_URL", fromEnvironment = "AI_SDK_BASE_URL"),
    (name = "ANTHROPIC_API_KEY", fromEnvironment = "ANTHROPIC_API_KEY"),
    (name = "ANTHROPIC_BASE_URL", fromEnvironment = "ANTHROPIC_BASE_URL"),
    (name = "ARK_API_KEY", fromEnvironment = "ARK_API_KEY"),
    (name = "BEDROCK_API_KEY", fromEnvironment = "BEDROCK_API_KEY"),
    (name = "BEDROCK_BASE_URL", fromEnvironment = "BEDROCK_BASE_URL"),
    (name = "DEEPSEEK_API_KEY", fromEnvironment = "DEEPSEEK_API_KEY"),
    (name = "DEEPSEEK_BASE_URL", fromEnvironment = "DEEPSEEK_BASE_URL"),
    (name = "DOUBAO_API_KEY", fromEnvironment = "DOUBAO_API_KEY"),
    (name = "DOUBAO_BASE_URL", fromEnvironment = "DOUBAO_BASE_URL"),
    (name = "GEMINI_API_KEY", fromEnvironment = "GEMINI_API_KEY"),
    (name = "GEMINI_BASE_URL", fromEnvironment = "GEMINI_BASE_URL"),
    (name = "GOOGLE_API_KEY", fromEnvironment = "GOOGLE_API_KEY"),
    (name = "HUNYUAN_API_KEY", fromEnvironment = "HUNYUAN_API_KEY"),
    (name = "HUNYUAN_BASE_URL", fromEnvironment = "HUNYUAN_BASE_URL"),
    (name = "MIMO_API_KEY", fromEnvironment = "MIMO_API_KEY"),
    (name = "MIMO_BASE_URL", fromEnvironment = "MIMO_BASE_URL"),
    (name = "MINIMAX_API_KEY", fromEnvironment = "MINIMAX_API_KEY"),
    (name = "MINIMAX_BASE_URL", fromEnvironment = "MINIMAX_BASE_URL"),
    (name = "OPENAI_API_KEY", fromEnvironment = "OPENAI_API_KEY"),
    (name = "OPENAI_BASE_URL", fromEnvironment = "OPENAI_BASE_URL"),
    (name = "QINIU_API_KEY", fromEnvironment = "QINIU_API_KEY"),
    (name = "QINIU_BASE_URL", fromEnvironment = "QINIU_BASE_URL"),
    (name = "XAI_API_KEY", fromEnvironment = "XAI_API_KEY"),
    (name = "XAI_BASE_URL", fromEnvironment = "XAI_BASE_URL"),
  ],
  globalOutbound = "loopback",
);
