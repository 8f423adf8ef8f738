// OMA's SharedMemory (OMA: memory/shared.ts): a key-value memory several agents share, over a
// MemoryStore (an InMemoryStore unless given one). Each agent writes under its own namespace
// (`<agent>/<key>`); values are JSON values (a string is kept as it is, anything else as JSON
// text marked in the entry's metadata); entries may expire after a number of turns of the
// memory's own counter; `getSummary` renders the whole memory as a Markdown section for a prompt.

import { InMemoryStore } from './store.js'

const STORE_METHODS = ['get', 'set', 'list', 'delete', 'clear']
/** The metadata key, and its value, that mark an entry's text as a JSON-encoded value. */
const ENCODING_KEY = 'sharedMemoryValueEncoding'
const ENCODING = 'json'
/** Keys OMA's checkpoints and durable approvals keep in the same store: never shown or restored. */
const RESERVED_PREFIXES = ['__oma_checkpoint__/', '__oma_approval__/']
/** How long a value may be in a summary line before it is cut (with an ellipsis). */
const SUMMARY_VALUE_CHARS = 200

const isReserved = (key) => RESERVED_PREFIXES.some((prefix) => key.startsWith(prefix))

function isMemoryStore(value) {
  return value !== null && typeof value === 'object' && STORE_METHODS.every((m) => typeof value[m] === 'function')
}

/** Throws OMA's TypeError for a value JSON cannot carry faithfully (naming where it is). */
function checkJsonValue(value, seen, path) {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`SharedMemory.write: value at ${path} must be a finite number.`)
    return
  }
  if (typeof value !== 'object') throw new TypeError(`SharedMemory.write: value at ${path} is not JSON-serializable.`)
  if (seen.has(value)) throw new TypeError(`SharedMemory.write: value at ${path} contains a circular reference.`)
  seen.add(value)
  if (Array.isArray(value)) value.forEach((item, i) => checkJsonValue(item, seen, `${path}[${i}]`))
  else for (const [key, child] of Object.entries(value)) checkJsonValue(child, seen, `${path}.${key}`)
  seen.delete(value)
}

/** The stored text and metadata of `value` (checked against `options.schema`, a zod schema, first). */
function encode(value, options) {
  let checked = value
  if (options?.schema) {
    const parsed = options.schema.safeParse(value)
    if (!parsed.success) {
      const issues = parsed.error.issues.map((issue) => `  • ${issue.path.join('.') || '<root>'}: ${issue.message}`).join('\n')
      throw new TypeError(`SharedMemory.write: value failed schema validation:\n${issues}`)
    }
    checked = parsed.data
  }
  checkJsonValue(checked, new WeakSet(), '<root>')
  if (typeof checked === 'string') return { text: checked, marks: undefined }
  return { text: JSON.stringify(checked), marks: { [ENCODING_KEY]: ENCODING } }
}

/** The caller's metadata without the encoding mark (only the memory sets it). */
function callerMetadata(metadata) {
  if (metadata === undefined || !(ENCODING_KEY in metadata)) return metadata
  const { [ENCODING_KEY]: _mark, ...rest } = metadata
  return rest
}

/** An entry with its value decoded when it is marked as JSON (kept as text when it does not parse). */
function decode(entry) {
  if (entry.metadata?.[ENCODING_KEY] !== ENCODING) return entry
  try {
    return { ...entry, value: JSON.parse(entry.value) }
  } catch {
    return entry
  }
}

function snapshotOf(entry) {
  return {
    key: entry.key,
    value: entry.value,
    ...(entry.metadata !== undefined ? { metadata: { ...entry.metadata } } : {}),
    createdAt: entry.createdAt.toISOString(),
    ...(entry.expiresAtTurn !== undefined ? { expiresAtTurn: entry.expiresAtTurn } : {}),
  }
}

/** The agent and the key within its namespace of a stored key (`_unknown` without a namespace). */
function splitKey(key) {
  const slash = key.indexOf('/')
  return slash === -1 ? ['_unknown', key] : [key.slice(0, slash), key.slice(slash + 1)]
}

export class SharedMemory {
  #store
  #turn = 0

  /** A memory over `store` (OMA's MemoryStore: get, set, list, delete, clear), else an InMemoryStore. */
  constructor(store) {
    if (store !== undefined && !isMemoryStore(store)) {
      throw new TypeError(`SharedMemory: \`store\` must implement the MemoryStore interface (methods: ${STORE_METHODS.join(', ')}).`)
    }
    this.#store = store ?? new InMemoryStore()
  }

  advanceTurn() {
    this.#turn++
  }

  getTurnCount() {
    return this.#turn
  }

  setTurnCount(turnCount) {
    this.#turn = turnCount
  }

  /** The live entries and the turn counter, as OMA's snapshot (version 1). */
  async snapshot() {
    return { version: 1, turnCount: this.#turn, entries: this.#live(await this.#store.list()).map(snapshotOf) }
  }

  static async fromSnapshot(snapshot, store) {
    const memory = new SharedMemory(store)
    await memory.restore(snapshot)
    return memory
  }

  /** Replaces the memory's entries (reserved keys untouched) and turn counter with a snapshot's. */
  async restore(snapshot) {
    if (snapshot?.version !== 1) {
      throw new Error(`SharedMemory.restore: unsupported snapshot version ${String(snapshot?.version)}.`)
    }
    for (const entry of await this.#store.list()) {
      if (!isReserved(entry.key)) await this.#store.delete(entry.key)
    }
    for (const entry of snapshot.entries) {
      if (isReserved(entry.key)) continue
      if (entry.expiresAtTurn !== undefined && typeof this.#store.setWithExpiry === 'function') {
        await this.#store.setWithExpiry(entry.key, entry.value, entry.expiresAtTurn, entry.metadata)
      } else {
        await this.#store.set(entry.key, entry.value, entry.metadata)
      }
    }
    this.#turn = snapshot.turnCount
  }

  /** Writes `value` as `<agentName>/<key>`; the entry's metadata names the agent. */
  async write(agentName, key, value, metadata, options) {
    const { text, marks } = encode(value, options)
    await this.#store.set(`${agentName}/${key}`, text, { ...callerMetadata(metadata), ...marks, agent: agentName })
  }

  /**
   * As `write`, expiring `ttlTurns` turns from now (an integer of at least 1); a store without
   * `setWithExpiry` keeps the entry without expiry.
   */
  async writeExpiring(agentName, key, value, ttlTurns, metadata, options) {
    if (!Number.isInteger(ttlTurns) || ttlTurns < 1) {
      throw new RangeError(
        `SharedMemory.writeExpiring: ttlTurns must be an integer ≥ 1 (got ${ttlTurns}). Use write() for entries that should never expire.`,
      )
    }
    const { text, marks } = encode(value, options)
    const fullKey = `${agentName}/${key}`
    const meta = { ...callerMetadata(metadata), ...marks, agent: agentName }
    if (typeof this.#store.setWithExpiry === 'function') await this.#store.setWithExpiry(fullKey, text, this.#turn + ttlTurns, meta)
    else await this.#store.set(fullKey, text, meta)
  }

  /** The live entry of a full key (`<agent>/<key>`), its value decoded, or null. */
  async read(key) {
    if (isReserved(key)) return null
    const entry = await this.#store.get(key)
    if (entry === null || this.#expired(entry)) return null
    return decode(entry)
  }

  async listAll() {
    return this.#live(await this.#store.list()).map(decode)
  }

  async listByAgent(agentName) {
    const prefix = `${agentName}/`
    return this.#live(await this.#store.list()).filter((entry) => entry.key.startsWith(prefix)).map(decode)
  }

  /**
   * The live entries as Markdown for a prompt: `## Shared Team Memory`, then per agent a
   * `### <agent>` heading and `- <key>: <value>` lines (values as text or JSON, cut to 200
   * characters); '' when empty. `taskIds` keeps only the `task:<id>:result` entries of those tasks.
   */
  async getSummary(filter) {
    let entries = this.#live(await this.#store.list())
    if (filter?.taskIds && filter.taskIds.length > 0) {
      const wanted = new Set(filter.taskIds)
      entries = entries.filter((entry) => {
        const local = splitKey(entry.key)[1]
        return local.startsWith('task:') && local.endsWith(':result') && wanted.has(local.slice(5, local.length - 7))
      })
    }
    if (entries.length === 0) return ''
    const byAgent = new Map()
    for (const entry of entries) {
      const [agent, local] = splitKey(entry.key)
      if (!byAgent.has(agent)) byAgent.set(agent, [])
      byAgent.get(agent).push([local, decode(entry).value])
    }
    const lines = ['## Shared Team Memory', '']
    for (const [agent, items] of byAgent) {
      lines.push(`### ${agent}`)
      for (const [local, value] of items) {
        const text = typeof value === 'string' ? value : JSON.stringify(value)
        lines.push(`- ${local}: ${text.length > SUMMARY_VALUE_CHARS ? `${text.slice(0, SUMMARY_VALUE_CHARS - 3)}…` : text}`)
      }
      lines.push('')
    }
    return lines.join('\n').trimEnd()
  }

  getStore() {
    return this.#store
  }

  #expired(entry) {
    return entry.expiresAtTurn !== undefined && this.#turn >= entry.expiresAtTurn
  }

  /** The entries neither reserved nor expired (expired ones stay in the store, as in OMA). */
  #live(entries) {
    return entries.filter((entry) => !isReserved(entry.key) && !this.#expired(entry))
  }
}
