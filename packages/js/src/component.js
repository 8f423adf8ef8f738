// The component the package runs on: the `portable` world of oma_portable.wasm, transpiled by
// jco into gen/. It never does I/O; everything here steps its sessions (agent/runner.js) or calls
// its stateless functions. This is the one module that imports it.
//
// `#oma-portable` (package.json `imports`): gen/, for Node and Workers alike (its core modules are
// imported as `#oma-core/NAME`: the .wasm files under the `workerd` condition, gen/node/ loaders
// elsewhere).

import { codec, driver } from '#oma-portable'
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
