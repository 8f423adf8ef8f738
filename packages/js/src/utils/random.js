// Randomness for sessions and trace ids, from the platform's CSPRNG (`crypto.getRandomValues`),
// drawn in blocks so that a small run pays for no call of its own.

// Session seeds and identities come from the platform's CSPRNG, drawn 64 at a time.
const seeds = new BigUint64Array(64)
let seedsLeft = 0

/** A 64-bit seed for one session (jitter, sampling, generated ids). */
export function seed() {
  if (seedsLeft === 0) {
    globalThis.crypto.getRandomValues(seeds)
    seedsLeft = seeds.length
  }
  return seeds[--seedsLeft]
}

// Trace and span ids come from the platform's CSPRNG too, drawn 4 KiB at a time: two
// `getRandomValues` calls per run were a visible share of a small run.
const randomBytes = new Uint8Array(4096)
let randomUsed = randomBytes.length
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'))

/** `bytes` random bytes as lower-case hex. */
export function hex(bytes) {
  if (randomUsed + bytes > randomBytes.length) {
    globalThis.crypto.getRandomValues(randomBytes)
    randomUsed = 0
  }
  let out = ''
  for (let i = randomUsed; i < randomUsed + bytes; i++) out += HEX[randomBytes[i]]
  randomUsed += bytes
  return out
}

/**
 * A random (version 4) UUID: `crypto.randomUUID` where the platform has it, else one made from
 * `crypto.getRandomValues`, which browsers also give pages that are not a secure context (plain
 * `http://` other than localhost), where `randomUUID` is missing.
 */
export function uuid() {
  if (typeof globalThis.crypto.randomUUID === 'function') return globalThis.crypto.randomUUID()
  const h = hex(16)
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`
}
