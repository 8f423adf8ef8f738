# workerd's configuration for the probe Worker (src/probe.js) as `npm run bundle` leaves it in
# dist/: `workerd serve workerd.capnp --socket-addr http=127.0.0.1:PORT` from this directory.
#
# - Settings come from workerd's own environment by name (`fromEnvironment`), as a deployed
#   Worker's come from its vars and secrets.
# - Outbound: the Worker's fetch goes to `loopback`, a network service that may reach loopback
#   addresses and nothing else, so a test can never reach another host. (workerd's default,
#   the `internet` service, allows public addresses only; workerd itself contacts nothing.)
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .probe),
    (name = "loopback", network = (allow = ["local"])),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:8080", http = (), service = "main"),
  ],
);

const probe :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "dist/worker.js"),
    (name = "oma_portable_json.core.wasm", wasm = embed "dist/oma_portable_json.core.wasm"),
    (name = "oma_portable_json.core2.wasm", wasm = embed "dist/oma_portable_json.core2.wasm"),
    (name = "oma_portable_json.core3.wasm", wasm = embed "dist/oma_portable_json.core3.wasm"),
  ],
  compatibilityDate = "2026-11-17",
  bindings = [
    (name = "ANTHROPIC_API_KEY", fromEnvironment = "ANTHROPIC_API_KEY"),
    (name = "ANTHROPIC_BASE_URL", fromEnvironment = "ANTHROPIC_BASE_URL"),
  ],
  globalOutbound = "loopback",
);
