// OMA's InMemoryStore (OMA: memory/store.ts): the MemoryStore a SharedMemory uses unless given
// another. Entries keyed by string, each with its text value, optional metadata, the time the
// key was first written and, when written with an expiry, the turn it expires at.

function entryOf(key, value, metadata, createdAt, expiresAtTurn) {
  return {
    key,
    value,
    metadata: metadata === undefined ? undefined : { ...metadata },
    createdAt,
    ...(expiresAtTurn !== undefined ? { expiresAtTurn } : {}),
  }
}

/** A MemoryStore in a Map: `get`, `set`, `compareAndSet`, `setWithExpiry`, `list`, `delete`, `clear`, `search`. */
export class InMemoryStore {
  #entries = new Map()

  async get(key) {
    return this.#entries.get(key) ?? null
  }

  /** Writes `value`; a key written before keeps its `createdAt` (and loses any expiry). */
  async set(key, value, metadata) {
    this.#entries.set(key, entryOf(key, value, metadata, this.#entries.get(key)?.createdAt ?? new Date()))
  }

  /** Writes `value` only when the key's value is `expectedValue` (null: absent); whether it did. */
  async compareAndSet(key, expectedValue, value, metadata) {
    const existing = this.#entries.get(key)
    if ((existing?.value ?? null) !== expectedValue) return false
    this.#entries.set(key, entryOf(key, value, metadata, existing?.createdAt ?? new Date()))
    return true
  }

  /** Writes `value` to expire at turn `expiresAtTurn` (SharedMemory's turn counter). */
  async setWithExpiry(key, value, expiresAtTurn, metadata) {
    this.#entries.set(key, entryOf(key, value, metadata, this.#entries.get(key)?.createdAt ?? new Date(), expiresAtTurn))
  }

  /** Every entry, in the order the keys were first written. */
  async list() {
    return [...this.#entries.values()]
  }

  async delete(key) {
    this.#entries.delete(key)
  }

  async clear() {
    this.#entries.clear()
  }

  /** The entries whose key or value contains `query`, case ignored; every entry for ''. */
  async search(query) {
    if (query.length === 0) return this.list()
    const needle = query.toLowerCase()
    return [...this.#entries.values()].filter((e) => e.key.toLowerCase().includes(needle) || e.value.toLowerCase().includes(needle))
  }

  get size() {
    return this.#entries.size
  }

  has(key) {
    return this.#entries.has(key)
  }
}
