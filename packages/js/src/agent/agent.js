// OMA's `Agent` (OMA: agent/agent.ts): `run`, `stream`, `prompt` on a persistent history,
// `getHistory`, `reset`, `getState` and the tool methods, over one component agent.

import { callComponent, driver } from '../component.js'
import { resolveTools } from '../tool/grants.js'
import { prepareConfig } from './config.js'
import { promptInputJson, runInputJson } from './input.js'
import { complete, ZERO_USAGE } from './result.js'
import { newRun, sessionOptions } from './run-options.js'
import { streamEvents } from './stream.js'

export class Agent {
  #agent
  #host
  #json
  #toolsKey
  #state = { status: 'idle', messages: [], tokenUsage: { ...ZERO_USAGE } }

  /**
   * OMA's `new Agent(config, toolRegistry?, toolExecutor?)`. An invalid configuration or
   * history throws here. Tools named in `config.tools` come from the registry; `customTools`
   * and tools added with `addTool` are offered as well.
   */
  constructor(config, toolRegistry, toolExecutor) {
    const { json, host } = prepareConfig(config, toolRegistry, toolExecutor)
    this.#json = json
    this.#host = host
    const tools = resolveTools(host).json
    this.#toolsKey = JSON.stringify(tools)
    this.#agent = callComponent(() => driver.Agent.create(JSON.stringify({ ...json, tools })))
    this.name = host.name
    this.config = config
  }

  /** The component agent for this run's tools (re-made, history kept, when they changed). */
  #agentFor(run) {
    const key = JSON.stringify(run.tools.json)
    if (key !== this.#toolsKey) {
      const history = JSON.parse(this.#agent.history())
      const json = { ...this.#json, tools: run.tools.json, history }
      const previous = this.#agent
      this.#agent = callComponent(() => driver.Agent.create(JSON.stringify(json)))
      previous[Symbol.dispose ?? Symbol.for('dispose')]?.()
      this.#toolsKey = key
    }
    return this.#agent
  }

  async #settle(promise) {
    this.#state = { ...this.#state, status: 'running' }
    const result = await promise
    const usage = this.#state.tokenUsage
    this.#state = {
      status: result.success || result.budgetExceeded ? 'completed' : 'error',
      messages: [...result.messages],
      tokenUsage: {
        input_tokens: usage.input_tokens + result.tokenUsage.input_tokens,
        output_tokens: usage.output_tokens + result.tokenUsage.output_tokens,
      },
      ...(result.success || result.budgetExceeded ? {} : { error: result.error }),
    }
    return result
  }

  /** A fresh run (history neither read nor written): OMA's AgentRunResult. */
  async run(input, options) {
    const parts = runInputJson(input)
    const run = newRun(this.#host, options)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.runParts(parts.text, parts.strings, sessionOptions(run))
      : agent.run(parts.text, sessionOptions(run)))
    return this.#settle(complete(session, this.#host, run))
  }

  /** As `run`, as OMA StreamEvents; invalid input throws here, at the call. */
  stream(input, options) {
    const parts = runInputJson(input)
    const run = newRun(this.#host, options)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.streamParts(parts.text, parts.strings, sessionOptions(run))
      : agent.stream(parts.text, sessionOptions(run)))
    return streamEvents(session, this.#host, run)
  }

  /** One user turn (a string or content blocks) on the persistent history. */
  async prompt(input, options) {
    const parts = promptInputJson(input)
    const run = newRun(this.#host, options)
    const agent = this.#agentFor(run)
    const session = callComponent(() => parts.strings
      ? agent.promptParts(parts.text, parts.strings, sessionOptions(run))
      : agent.prompt(parts.text, sessionOptions(run)))
    return this.#settle(complete(session, this.#host, run))
  }

  /** A copy of the persistent history (OMA LLMMessage[]). */
  getHistory() {
    return JSON.parse(this.#agent.history())
  }

  /** Clears the persistent history. */
  reset() {
    this.#agent.reset()
    this.#state = { status: 'idle', messages: [], tokenUsage: { ...ZERO_USAGE } }
  }

  /** OMA's AgentState: `idle`, `running`, `completed` or `error`, with the last run's messages. */
  getState() {
    return { ...this.#state, messages: [...this.#state.messages] }
  }

  /** Registers a tool for the next runs (OMA's `addTool`). */
  addTool(tool) {
    this.#host.registry.register(tool, { runtimeAdded: true })
  }

  /** Removes a registered tool (no-op when absent). */
  removeTool(name) {
    this.#host.registry.deregister(name)
  }

  /** The names of the registered tools. */
  getTools() {
    return this.#host.registry.list().map((tool) => tool.name)
  }
}
