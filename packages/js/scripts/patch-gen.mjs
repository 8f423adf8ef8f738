// Speed patches for jco's generated gen/oma_portable_json.js (jco 1.35.0, pinned), applied by
// `npm run build` after `jco transpile`. Each patch replaces one exact piece of jco's output and
// fails the build when that piece is not found exactly once (a jco upgrade must re-check them).
// None changes what crosses the component boundary.
//
// 1. String lowering. jco sizes every string with a JavaScript loop over its UTF-16 units before
//    `encodeInto` (about 2 ns per character: 2 ms for a 1 MiB image in a run's input JSON). The
//    patched function allocates `s.length` bytes and encodes natively in one pass; that is exact
//    for ASCII text (JSON of base64 data, the usual request and response bodies). Otherwise it
//    keeps the ASCII prefix, encodes the rest, and grows the allocation with `cabi_realloc` to
//    the exact size, so the guest still receives a string of exactly its UTF-8 length.
// 2. `_debugLog` reads `process.env.JCO_DEBUG` (a getenv each time) on every one of its many calls
//    per component call. The patched one is off for good and the module reads no environment:
//    reading it made Deno ask for an env permission when the package loaded, and jco's debug log
//    of its own task machinery is not for the package's users.
// 3. The `send` step's request body. jco decodes it from UTF-8 into a JavaScript string, and
//    `fetch` encodes that string back into UTF-8 (two passes over a 1.4 MB body for a 1 MiB
//    image). The patched lifting copies the bytes out as a Uint8Array, which `fetch` sends as
//    they are: the same bytes on the wire (the component sets `content-type` itself; src/transport.js
//    adds fetch's string default where it does not).
// 4. Every `_debugLog(...)` statement is guarded by that flag (`_JCO_DEBUG && _debugLog(...)`):
//    jco's task machinery logs at every step of every component call, and the arguments (object
//    literals, getter calls) were built on each one even with logging off. With the flag a
//    constant, the minifier drops the guarded statements.
//
// Usage: node scripts/patch-gen.mjs [gen/oma_portable_json.js]

import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const ENCODE_ORIGINAL = `function _utf8AllocateAndEncode(s, realloc, memory) {
  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
  if (s.length === 0) { return { ptr: 1, len: 0 }; }
  // Compute the exact allocation size up front. Some older preview1
  // adapters only support an initial allocation, not a subsequent shrink.
  let len = 0;
  let codepoints = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    codepoints++;
    if (ch < 0x80) { len += 1; }
    else if (ch < 0x800) { len += 2; }
    else if (ch >= 0xd800 && ch <= 0xdbff &&
    i + 1 < s.length &&
    (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      len += 4;
      i++;
    } else { len += 3; }
  }
  const ptr = realloc(0, 0, 1, len);
  const { read, written } = TEXT_ENCODER_UTF8.encodeInto(
  s,
  new Uint8Array(memory.buffer, ptr, len),
  );
  if (read !== s.length || written !== len) {
    throw new Error('failed to encode whole string');
  }
  const res = { ptr, len, codepoints };
  return res;
}
`

const ENCODE_PATCHED = `function _utf8AllocateAndEncode(s, realloc, memory) {
  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
  if (s.length === 0) { return { ptr: 1, len: 0 }; }
  // oma-component patch (scripts/patch-gen.mjs): one native pass, exact for ASCII; otherwise
  // keep the ASCII prefix, encode the rest and grow the allocation to the exact UTF-8 length.
  let len = s.length;
  let ptr = realloc(0, 0, 1, len);
  const { read, written } = TEXT_ENCODER_UTF8.encodeInto(
  s,
  new Uint8Array(memory.buffer, ptr, len),
  );
  if (read !== s.length || written !== len) {
    const rest = TEXT_ENCODER_UTF8.encode(read === 0 ? s : s.slice(read));
    const total = written + rest.length;
    ptr = realloc(ptr, len, 1, total);
    new Uint8Array(memory.buffer, ptr + written, rest.length).set(rest);
    len = total;
  }
  return { ptr, len };
}
`

const DEBUG_ORIGINAL = `const _debugLog = (...args) => {
  if (!globalThis?.process?.env?.JCO_DEBUG) { return; }
  console.debug(...args);
};
`

const DEBUG_PATCHED = `// oma-component patch (scripts/patch-gen.mjs): jco's debug log is off; no environment is read.
const _JCO_DEBUG = false;
const _debugLog = (...args) => {
  if (!_JCO_DEBUG) { return; }
  console.debug(...args);
};
`

const PATCHES = [
  ['string lowering (_utf8AllocateAndEncode)', ENCODE_ORIGINAL, ENCODE_PATCHED],
  ['_debugLog', DEBUG_ORIGINAL, DEBUG_PATCHED],
]

function once(js, what, original, patched) {
  const first = js.indexOf(original)
  if (first < 0 || js.indexOf(original, first + 1) >= 0) {
    throw new Error(
      `patch-gen: ${what}: jco's code ${first < 0 ? 'not found' : 'found more than once'} (was jco upgraded?)`,
    )
  }
  return js.slice(0, first) + patched + js.slice(first + original.length)
}

/**
 * Patch 3: the `send` step's `body` lifted as bytes (a copy out of the guest's memory), at each
 * place jco lifts a step: the driver's `session.next` and the routes' `run.next`.
 */
function sendBodyAsBytes(js) {
  const what = "the send step's body"
  const tag = "tag: 'send',"
  const sites = []
  for (let at = js.indexOf(tag); at >= 0; at = js.indexOf(tag, at + 1)) sites.push(at)
  if (sites.length === 0) throw new Error(`patch-gen: ${what}: no send step`)
  // Patched from the last site back, so that the earlier offsets stay valid.
  for (let i = sites.length - 1; i >= 0; i--) {
    const at = sites[i]
    const from = i === 0 ? 0 : sites[i - 1]
    const body = /^\s*val: \{\s*method: result\d+,\s*url: result\d+,\s*headers: result\d+,\s*body: (result\d+),/.exec(
      js.slice(at + tag.length),
    )
    if (!body) throw new Error(`patch-gen: ${what}: the send record's fields are not as expected`)
    const v = body[1]
    const decode = new RegExp(
      `var ${v} = TEXT_DECODER_UTF8\\.decode\\(new Uint8Array\\(memory0\\.buffer, (ptr\\d+), (len\\d+)\\)\\);`,
      'g',
    )
    const region = js.slice(from, at)
    // jco numbers its variables per function, so an earlier function may decode a variable of
    // the same name: the body's lift is the nearest one before the step.
    const found = [...region.matchAll(decode)]
    if (found.length === 0) {
      throw new Error(`patch-gen: ${what}: ${v} is not lifted before send step ${i + 1}`)
    }
    const nearest = found[found.length - 1]
    const [line, ptr, len] = nearest
    const start = from + nearest.index
    js =
      js.slice(0, start) +
      `var ${v} = new Uint8Array(memory0.buffer, ${ptr}, ${len}).slice(); // oma-component patch: bytes` +
      js.slice(start + line.length)
  }
  return js
}

/**
 * Patch 4: `_debugLog(` at the start of a statement becomes `_JCO_DEBUG && _debugLog(`, so that
 * its arguments are not evaluated with logging off. Statements only: a call elsewhere (none in
 * jco 1.35.0) fails the build.
 */
function guardDebugLogs(js) {
  const statement = /^(\s*)_debugLog\(/gm
  const count = [...js.matchAll(statement)].length
  const all = [...js.matchAll(/(?<![\w$.])_debugLog\(/g)].length
  // Commented-out calls (`// _debugLog(`) are left as they are.
  const commented = [...js.matchAll(/\/\/\s*_debugLog\(/g)].length
  if (count < 50 || count + commented !== all) {
    throw new Error(`patch-gen: _debugLog calls: ${count} statements of ${all - commented} calls (was jco upgraded?)`)
  }
  return js.replace(statement, '$1_JCO_DEBUG && _debugLog(')
}

/** Applies the patches to jco's output text; throws when a piece is not found exactly once. */
export function patchGenerated(js) {
  for (const [what, original, patched] of PATCHES) js = once(js, what, original, patched)
  return guardDebugLogs(sendBodyAsBytes(js))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2] ?? fileURLToPath(new URL('../gen/oma_portable_json.js', import.meta.url))
  writeFileSync(file, patchGenerated(readFileSync(file, 'utf8')))
  console.error(`patch-gen: patched ${file}`)
}
