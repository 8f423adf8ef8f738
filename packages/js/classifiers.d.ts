// Types of `oma-component/classifiers` (OMA's `@open-multi-agent/core/classifiers`).

/** Risk level of a bash command. */
export type BashRiskLevel = 'safe' | 'review' | 'high'

/** A classification: the level and the reason naming the pattern that set it. */
export interface BashRiskAssessment {
  /** `safe` (read-only), `review` (ambiguous or context-heavy), `high` (destructive or sensitive). */
  readonly level: BashRiskLevel
  /** Why, in words. */
  readonly reason: string
}

/**
 * Classifies a bash command for an `onToolCall` gate; the worst level of its pieces wins, an
 * unknown command is `review`. A heuristic, not a sandbox.
 */
export declare function classifyBashCommand(command: string): BashRiskAssessment
