// OMA's `delegate_to_agent` built-in (registered only with `includeDelegateTool`): hands a
// sub-task to a teammate in an orchestrated team run. The package runs single agents, so outside
// a team context that offers `runDelegatedAgent` it answers OMA's error result; with one, it
// applies OMA's checks (self, roster, cycles, depth, free pool slot) before delegating.

import { s } from './schema.js'

export const delegateToAgentTool = {
  name: 'delegate_to_agent',
  description:
    "Run a sub-task on another agent from this team and return that agent's final answer as the tool result. " +
    'Use when you need a specialist teammate to produce output you will incorporate. ' +
    'The target agent runs in a fresh conversation for this prompt only.',
  inputSchema: s.object({
    target_agent: s.string().min(1).describe('Name of the team agent to run the sub-task.'),
    prompt: s.string().min(1).describe('Instructions / question for the target agent.'),
  }),
  async execute({ target_agent: target, prompt }, context) {
    const team = context?.team
    const fail = (data) => ({ data, isError: true })
    if (!team?.runDelegatedAgent) {
      return fail(
        'delegate_to_agent is only available during orchestrated team runs with the delegation tool enabled. ' +
          'Use SharedMemory or explicit tasks instead.',
      )
    }
    if (target === context.agent.name) return fail('Cannot delegate to yourself; use another team member.')
    if (!team.agents.includes(target)) return fail(`Unknown agent "${target}". Roster: ${team.agents.join(', ')}`)
    const chain = team.delegationChain ?? []
    if (chain.includes(target)) {
      return fail(`Delegation cycle detected: ${[...chain, target].join(' -> ')}. Pick a different target or restructure the plan.`)
    }
    const maxDepth = team.maxDelegationDepth ?? 3
    if ((team.delegationDepth ?? 0) >= maxDepth) {
      return fail(`Maximum delegation depth (${maxDepth}) reached; cannot delegate further.`)
    }
    if (team.delegationPool !== undefined && team.delegationPool.availableRunSlots < 1) {
      return fail(
        'Agent pool has no free concurrency slot for a delegated run (nested run would block indefinitely). ' +
          'Increase orchestrator maxConcurrency, wait for parallel work to finish, or avoid delegating while the pool is saturated.',
      )
    }
    const result = await team.runDelegatedAgent(target, prompt)
    return { data: result.output, isError: !result.success, metadata: { tokenUsage: result.tokenUsage } }
  },
}
