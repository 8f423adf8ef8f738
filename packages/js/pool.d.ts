// Types of the package's AgentPool and Semaphore (OMA's, exported from `oma-component`).
import type { Agent, AgentRunResult, RunOptions, StreamEvent } from './index.js'

/** A counting semaphore: at most `limit` holders; waiters are served in arrival order. */
export declare class Semaphore {
  /** Throws RangeError below 1. */
  constructor(max: number)
  /** The number of holders allowed at once. */
  readonly limit: number
  /** Slots held now. */
  readonly active: number
  /** Callers waiting for a slot. */
  readonly pending: number
  acquire(): Promise<void>
  release(): void
  /** Runs `fn` holding a slot. */
  run<T>(fn: () => Promise<T>): Promise<T>
}

/** How many pool agents are in each state. */
export interface PoolStatus {
  readonly total: number
  readonly idle: number
  readonly running: number
  readonly completed: number
  readonly error: number
}

/**
 * OMA's AgentPool: named agents and a pool-wide cap on runs in flight; runs on one agent are
 * serialised.
 */
export declare class AgentPool {
  /** `maxConcurrency` defaults to 5. */
  constructor(maxConcurrency?: number)
  /** Pool slots not held now. */
  readonly availableRunSlots: number
  /** The pool's cap. */
  readonly runConcurrencyLimit: number
  /** Throws when an agent of the same name is registered. */
  add(agent: Agent): void
  /** Throws for an unknown name. */
  remove(name: string): void
  get(name: string): Agent | undefined
  list(): Agent[]
  /** Throws (rejects) for an unknown name. */
  run(agentName: string, prompt: string, runOptions?: Partial<RunOptions>, streamCallback?: (event: StreamEvent) => void): Promise<AgentRunResult>
  runEphemeral(agent: Agent, prompt: string, runOptions?: Partial<RunOptions>, streamCallback?: (event: StreamEvent) => void): Promise<AgentRunResult>
  /** Never rejects: a failed run is a `success: false` result whose `output` is the error message. */
  runParallel(tasks: ReadonlyArray<{ readonly agent: string; readonly prompt: string }>): Promise<Map<string, AgentRunResult>>
  /** Round robin over the agents in insertion order; rejects on an empty pool. */
  runAny(prompt: string): Promise<AgentRunResult>
  getStatus(): PoolStatus
  /** Resets every agent. */
  shutdown(): Promise<void>
}
