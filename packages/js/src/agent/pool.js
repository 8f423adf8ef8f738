// OMA's AgentPool and Semaphore: a registry of named agents and a scheduler that caps how many
// agent runs are in flight at once across the pool, with OMA's rules: runs on one agent are
// serialised (a per-agent lock taken before a pool slot, so a waiting run holds no slot),
// `runParallel` never rejects (a failed run is an error result in the map), `runAny` picks agents
// round robin in insertion order, `getStatus` counts the agents by state.

/** A counting semaphore: `acquire` waits for a free slot, `release` hands it to the next waiter. */
export class Semaphore {
  #max
  #current = 0
  #queue = []

  /** @param {number} max the number of holders allowed at once (at least 1). */
  constructor(max) {
    if (!(max >= 1)) throw new RangeError(`Semaphore max must be at least 1, got ${max}`)
    this.#max = max
  }

  /** The number of holders allowed at once. */
  get limit() {
    return this.#max
  }

  /** Slots held now. */
  get active() {
    return this.#current
  }

  /** Callers waiting for a slot. */
  get pending() {
    return this.#queue.length
  }

  /** Resolves when the caller holds a slot (at once when one is free, else in arrival order). */
  acquire() {
    if (this.#current < this.#max) {
      this.#current++
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#queue.push(resolve))
  }

  /** Gives a slot back; a waiting caller takes it over directly. */
  release() {
    const next = this.#queue.shift()
    if (next !== undefined) next()
    else this.#current--
  }

  /** Runs `fn` holding a slot, releasing it however `fn` ends. */
  async run(fn) {
    await this.acquire()
    try {
      return await fn()
    } finally {
      this.release()
    }
  }
}

const EMPTY_USAGE = () => ({ input_tokens: 0, output_tokens: 0 })

/** OMA's result for a streamed run that ended with no `done` event. */
function emptyResult() {
  return { success: false, output: '', messages: [], tokenUsage: EMPTY_USAGE(), toolCalls: [] }
}

/** Runs `agent` on `prompt`, through `stream` when a callback wants the events. */
async function runOn(agent, prompt, runOptions, streamCallback) {
  if (!streamCallback) return agent.run(prompt, runOptions)
  let result = null
  for await (const event of agent.stream(prompt, runOptions)) {
    // A throwing callback never affects the run (OMA's rule).
    try {
      streamCallback(event)
    } catch {}
    if (event.type === 'done') result = event.data
    if (event.type === 'error') throw event.data
  }
  return result ?? emptyResult()
}

/** Registry and scheduler of named agents with a pool-wide concurrency cap (OMA's AgentPool). */
export class AgentPool {
  #agents = new Map()
  #locks = new Map()
  #semaphore
  #maxConcurrency
  #cursor = 0

  /** @param {number} [maxConcurrency=5] agent runs allowed at once across the pool. */
  constructor(maxConcurrency = 5) {
    this.#maxConcurrency = maxConcurrency
    this.#semaphore = new Semaphore(maxConcurrency)
  }

  /** Pool slots not held now (`maxConcurrency - active`). */
  get availableRunSlots() {
    return this.#maxConcurrency - this.#semaphore.active
  }

  /** The pool's concurrency cap. */
  get runConcurrencyLimit() {
    return this.#semaphore.limit
  }

  /** Registers an agent under its name; a second agent of the same name throws. */
  add(agent) {
    if (this.#agents.has(agent.name)) {
      throw new Error(
        `AgentPool: agent '${agent.name}' is already registered. ` +
          `Call remove('${agent.name}') before re-adding.`,
      )
    }
    this.#agents.set(agent.name, agent)
    this.#locks.set(agent.name, new Semaphore(1))
  }

  /** Unregisters an agent; an unknown name throws. */
  remove(name) {
    if (!this.#agents.has(name)) throw new Error(`AgentPool: agent '${name}' is not registered.`)
    this.#agents.delete(name)
    this.#locks.delete(name)
  }

  /** The agent registered under `name`, or undefined. */
  get(name) {
    return this.#agents.get(name)
  }

  /** The registered agents in insertion order. */
  list() {
    return [...this.#agents.values()]
  }

  /**
   * Runs `prompt` on the named agent under the pool's cap (and the agent's own lock); with a
   * `streamCallback`, through `agent.stream`, the callback seeing every event.
   */
  async run(agentName, prompt, runOptions, streamCallback) {
    const agent = this.#require(agentName)
    const lock = this.#locks.get(agentName)
    await lock.acquire()
    try {
      return await this.#semaphore.run(() => runOn(agent, prompt, runOptions, streamCallback))
    } finally {
      lock.release()
    }
  }

  /** Runs `prompt` on an agent that is not registered, under the pool's cap only (no lock). */
  async runEphemeral(agent, prompt, runOptions, streamCallback) {
    return this.#semaphore.run(() => runOn(agent, prompt, runOptions, streamCallback))
  }

  /**
   * Runs every `{agent, prompt}` at once under the cap; resolves to a Map by agent name (the
   * last result when a name repeats). A run that rejects is a failed result whose `output` is
   * the error's message.
   */
  async runParallel(tasks) {
    const settled = await Promise.allSettled(tasks.map((task) => this.run(task.agent, task.prompt)))
    const results = new Map()
    settled.forEach((outcome, index) => {
      const name = tasks[index]?.agent ?? 'unknown'
      results.set(name, outcome.status === 'fulfilled' ? outcome.value : failure(outcome.reason))
    })
    return results
  }

  /** Runs `prompt` on the next agent in round-robin order; an empty pool throws. */
  async runAny(prompt) {
    const agents = this.list()
    if (agents.length === 0) throw new Error('AgentPool: cannot call runAny on an empty pool.')
    this.#cursor %= agents.length
    const agent = agents[this.#cursor]
    this.#cursor = (this.#cursor + 1) % agents.length
    const lock = this.#locks.get(agent.name)
    await lock.acquire()
    try {
      return await this.#semaphore.run(() => agent.run(prompt))
    } finally {
      lock.release()
    }
  }

  /** How many agents are in each state (`getState().status`). */
  getStatus() {
    const counts = { idle: 0, running: 0, completed: 0, error: 0 }
    for (const agent of this.#agents.values()) {
      const status = agent.getState().status
      if (status in counts) counts[status]++
    }
    return { total: this.#agents.size, ...counts }
  }

  /** Resets every agent (history cleared, state idle); the agents stay registered. */
  async shutdown() {
    for (const agent of this.#agents.values()) agent.reset()
  }

  #require(name) {
    const agent = this.#agents.get(name)
    if (agent === undefined) {
      throw new Error(
        `AgentPool: agent '${name}' is not registered. ` +
          `Registered agents: [${[...this.#agents.keys()].join(', ')}]`,
      )
    }
    return agent
  }
}

/** OMA's failed result for a run that rejected inside `runParallel`. */
function failure(reason) {
  return {
    success: false,
    output: reason instanceof Error ? reason.message : String(reason),
    messages: [],
    tokenUsage: EMPTY_USAGE(),
    toolCalls: [],
  }
}
