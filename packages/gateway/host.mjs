// The gateway's host setup under `jco serve`: pass it with `--jco-import ./host.mjs`. It runs
// before the component is loaded and sets up the very preview2-shim instance the component
// imports (jco links the one in this package's node_modules, where these imports resolve too).
//
// 1. The environment. preview2-shim's wasi:cli/environment hands the component node's whole
//    environment (process.env). This narrows it to the variables the gateway reads, the names
//    `oma-host serve` passes on too: OMA_GATEWAY_*, OTEL_EXPORTER_OTLP_*, *_API_KEY, *_BASE_URL
//    and AWS_*.
//
// 2. `wasi:http/types.http-error-code`. For a response body that fails mid-stream (the provider
//    drops the connection, or a between-bytes timeout ends the response), preview2-shim 0.26.1
//    returns node's own Error object instead of an `error-code`; lowering that throws a
//    TypeError out of the request handler and the whole server exits. Here such an error
//    becomes the `error-code` it stands for, so the gateway sees a failed provider call and
//    answers as it does on every other host.
import { _setEnv } from "@bytecodealliance/preview2-shim/cli";
import { types } from "@bytecodealliance/preview2-shim/http";

const forTheGateway = (name) =>
  name.startsWith("OMA_GATEWAY_") ||
  name.startsWith("OTEL_EXPORTER_OTLP_") ||
  name.endsWith("_API_KEY") ||
  name.endsWith("_BASE_URL") ||
  name.startsWith("AWS_");

_setEnv(
  Object.fromEntries(
    Object.entries(process.env).filter(
      ([name, value]) => value !== undefined && forTheGateway(name),
    ),
  ),
);

const shimHttpErrorCode = types.httpErrorCode;
types.httpErrorCode = (err) => {
  const code = shimHttpErrorCode(err);
  if (code === undefined || (typeof code === "object" && typeof code?.tag === "string")) {
    return code;
  }
  const cause = code instanceof Error ? code : err?.payload ?? err;
  const reason = String(cause?.code ?? cause?.message ?? cause);
  if (/timeout|timed out|ETIMEDOUT/i.test(reason)) {
    return { tag: "connection-read-timeout" };
  }
  if (/aborted|ECONNRESET|socket hang up|EPIPE/i.test(reason)) {
    return { tag: "connection-terminated" };
  }
  return { tag: "internal-error", val: reason };
};
