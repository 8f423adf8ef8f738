// oma-component/gateway: what a host needs to serve the gateway's HTTP contract
// (docs/gateway.md) with its own HTTP server, as packages/worker's gateway Worker does on
// Cloudflare Workers. The rules are the component's (`routes`, the same code as
// oma_gateway.wasm's); a `/v1/run` is stepped by the package's own session loop
// (`driveSession`: fetch with `redirect: 'manual'`, identity encoding, bodies streamed to the
// component and held to its byte limits, every read bounded by the step's timeout, retry waits
// and the run's deadline).
export { routes } from '#oma-portable'
export { driveSession } from './index.js'
