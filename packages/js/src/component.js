// The component the package runs on: the `portable-json` world of oma_portable_json.wasm (the
// agent with OMA JSON in and out, and the codec's text operations), transpiled by jco into gen/.
// It never does I/O; everything here steps its sessions (agent/runner.js) or calls its stateless
// functions. This is the one module that imports it.
//
// `#oma-portable-json` (package.json `imports`): gen/, for Node and Workers alike (its core
// modules are imported as `#oma-core/NAME`: the .wasm files under the `workerd` condition,
// gen/node/ loaders elsewhere).

import { jsonCodec as codec, jsonDriver as driver } from '#oma-portable-json'
import { fromComponent } from './errors.js'

export { codec, driver }

/** Runs a call into the component, its errors thrown as OMA's error classes. */
export function callComponent(fn) {
  try {
    return fn()
  } catch (e) {
    throw fromComponent(e)
  }
}
