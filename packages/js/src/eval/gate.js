// OMA's `evaluateGate` (OMA: eval/gate.ts): a run report held to thresholds on its aggregates,
// to scorer and target health, and to a baseline report (regressions), with OMA's messages.
import { EvalDefinitionError, isRecord, refuseUnknown } from './values.js'

const METRICS = ['avg', 'p50', 'p95', 'min', 'passRate']

function unit(value, field) {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
    throw new EvalDefinitionError(field, `${field} must be a number from 0 through 1`)
  }
  return value
}

/** The policy with scorer names and tags trimmed, or an `EvalDefinitionError` naming the field. */
export function checkGatePolicy(policy) {
  const what = 'a gate policy'
  if (!isRecord(policy)) throw new EvalDefinitionError('', 'a gate policy must be an object')
  refuseUnknown(policy, ['schemaVersion', 'thresholds', 'maxScorerErrorRate', 'maxTargetErrorRate', 'baseline'], '', what)
  if (policy.schemaVersion !== 1) throw new EvalDefinitionError('schemaVersion', 'schemaVersion must be 1')
  if (!Array.isArray(policy.thresholds)) throw new EvalDefinitionError('thresholds', 'thresholds must be an array')
  const thresholds = policy.thresholds.map((threshold, i) => {
    const where = `thresholds[${i}]`
    if (!isRecord(threshold)) throw new EvalDefinitionError(where, `${where} must be an object`)
    refuseUnknown(threshold, ['scorer', 'metric', 'min', 'max', 'tag'], `${where}.`, what)
    if (typeof threshold.scorer !== 'string' || threshold.scorer.trim() === '') {
      throw new EvalDefinitionError(`${where}.scorer`, `${where}.scorer must be a non-empty string`)
    }
    if (!METRICS.includes(threshold.metric)) throw new EvalDefinitionError(`${where}.metric`, `${where}.metric must be one of ${METRICS.join(', ')}`)
    const min = unit(threshold.min, `${where}.min`)
    const max = unit(threshold.max, `${where}.max`)
    if (min === undefined && max === undefined) throw new EvalDefinitionError(where, `${where}: at least one of min or max is required`)
    if (min !== undefined && max !== undefined && min > max) throw new EvalDefinitionError(where, `${where}: min must be less than or equal to max`)
    if (threshold.tag !== undefined && (typeof threshold.tag !== 'string' || threshold.tag.trim() === '')) {
      throw new EvalDefinitionError(`${where}.tag`, `${where}.tag must be a non-empty string`)
    }
    return { ...threshold, scorer: threshold.scorer.trim(), ...(threshold.tag !== undefined ? { tag: threshold.tag.trim() } : {}) }
  })
  unit(policy.maxScorerErrorRate, 'maxScorerErrorRate')
  unit(policy.maxTargetErrorRate, 'maxTargetErrorRate')
  if (policy.baseline !== undefined) {
    const baseline = policy.baseline
    if (!isRecord(baseline)) throw new EvalDefinitionError('baseline', 'baseline must be an object')
    refuseUnknown(baseline, ['maxRegression', 'perScorer', 'allowSetMismatch'], 'baseline.', what)
    unit(baseline.maxRegression, 'baseline.maxRegression')
    if (baseline.perScorer !== undefined) {
      if (!isRecord(baseline.perScorer)) throw new EvalDefinitionError('baseline.perScorer', 'baseline.perScorer must be an object')
      for (const [key, value] of Object.entries(baseline.perScorer)) unit(value, `baseline.perScorer.${key}`)
    }
    if (baseline.allowSetMismatch !== undefined && typeof baseline.allowSetMismatch !== 'boolean') {
      throw new EvalDefinitionError('baseline.allowSetMismatch', 'baseline.allowSetMismatch must be a boolean')
    }
  }
  return { ...policy, thresholds }
}

function aggregateFor(report, threshold) {
  const aggregate = report.aggregates.find((a) => a.scorer.name === threshold.scorer)
  if (aggregate === undefined || threshold.tag === undefined) return aggregate
  return aggregate.byTag?.[threshold.tag]
}

const metricOf = (aggregate, metric) => (aggregate === undefined ? undefined : aggregate[metric])

function targetOf(threshold) {
  return threshold.tag === undefined
    ? `scorer "${threshold.scorer}"`
    : `scorer "${threshold.scorer}" for tag "${threshold.tag}"`
}

const named = (threshold) => ({
  scorer: threshold.scorer,
  metric: threshold.metric,
  ...(threshold.tag !== undefined ? { tag: threshold.tag } : {}),
})

function thresholdFailures(report, threshold) {
  const actual = metricOf(aggregateFor(report, threshold), threshold.metric)
  const target = targetOf(threshold)
  if (actual === undefined) {
    const suffix = threshold.metric === 'passRate' ? ' or has no scored records with a pass value' : ''
    return [{
      kind: 'missing_scorer', ...named(threshold), actual: 0, limit: 1,
      message: `Gate threshold references ${target}, but the metric "${threshold.metric}" is unavailable${suffix}.`,
    }]
  }
  const failures = []
  if (threshold.min !== undefined && actual < threshold.min) {
    failures.push({
      kind: 'threshold', ...named(threshold), actual, limit: threshold.min,
      message: `Gate metric "${threshold.metric}" for ${target} is ${actual}, below minimum ${threshold.min}.`,
    })
  }
  if (threshold.max !== undefined && actual > threshold.max) {
    failures.push({
      kind: 'threshold', ...named(threshold), actual, limit: threshold.max,
      message: `Gate metric "${threshold.metric}" for ${target} is ${actual}, above maximum ${threshold.max}.`,
    })
  }
  return failures
}

const versionOf = (report, scorer) => report.aggregates.find((a) => a.scorer.name === scorer)?.scorer.version
const shownVersion = (version) => (version === undefined ? '(unversioned)' : `"${version}"`)
const setOf = (report) => `${report.evalSet.name}@${report.evalSet.version}`

function exceeds(actual, limit) {
  const tolerance = Number.EPSILON * 4 * Math.max(1, Math.abs(actual), Math.abs(limit))
  return actual - limit > tolerance
}

/**
 * OMA's `evaluateGate(report, policy, baseline?)`: `{pass, failures, warnings}`. The policy is
 * checked first (an `EvalDefinitionError` naming the field); thresholds on aggregates (a tag's
 * when given), the scorer error rate (0.1 by default) and the target error rate (0 by default),
 * and with a baseline report of the same set and scorer version, regressions beyond
 * `baseline.perScorer[scorer]` or `baseline.maxRegression`.
 */
export function evaluateGate(report, policy, baseline) {
  const checked = checkGatePolicy(policy)
  const failures = checked.thresholds.flatMap((t) => thresholdFailures(report, t))
  const warnings = new Set()
  const scorerRecords = report.records.filter((r) => r.status === 'scored' || r.status === 'scorer_error')
  const scorerErrors = scorerRecords.filter((r) => r.status === 'scorer_error').length
  const scorerErrorRate = scorerRecords.length === 0 ? 0 : scorerErrors / scorerRecords.length
  const maxScorerErrorRate = checked.maxScorerErrorRate ?? 0.1
  if (scorerErrorRate > maxScorerErrorRate) {
    failures.push({
      kind: 'scorer_health', actual: scorerErrorRate, limit: maxScorerErrorRate,
      message: `Scorer error rate ${scorerErrorRate} exceeds maximum ${maxScorerErrorRate}.`,
    })
  }
  const samples = report.caseCount * report.repeats
  const targetErrorRate = samples === 0 ? 0 : report.totals.targetErrors / samples
  const maxTargetErrorRate = checked.maxTargetErrorRate ?? 0
  if (targetErrorRate > maxTargetErrorRate) {
    failures.push({
      kind: 'target_health', actual: targetErrorRate, limit: maxTargetErrorRate,
      message: `Target error rate ${targetErrorRate} exceeds maximum ${maxTargetErrorRate}.`,
    })
  }
  if (baseline === undefined) {
    if (checked.baseline !== undefined) {
      warnings.add('Baseline policy is configured but no baseline report was provided; regression checks were skipped.')
    }
  } else if (report.evalSet.name !== baseline.evalSet.name || report.evalSet.version !== baseline.evalSet.version) {
    const message = `Baseline EvalSet mismatch: current is ${setOf(report)}, baseline is ${setOf(baseline)}; regression checks were skipped.`
    if (checked.baseline?.allowSetMismatch === true) warnings.add(message)
    else failures.push({ kind: 'baseline_mismatch', actual: 1, limit: 0, message })
  } else {
    for (const threshold of checked.thresholds) {
      const maxRegression = checked.baseline?.perScorer?.[threshold.scorer] ?? checked.baseline?.maxRegression
      if (maxRegression === undefined) continue
      const currentVersion = versionOf(report, threshold.scorer)
      const baselineVersion = versionOf(baseline, threshold.scorer)
      if (currentVersion !== baselineVersion) {
        warnings.add(`Scorer version drift for "${threshold.scorer}": current ${shownVersion(currentVersion)}, baseline ${shownVersion(baselineVersion)}; regression checks were skipped for this scorer.`)
        continue
      }
      const current = metricOf(aggregateFor(report, threshold), threshold.metric)
      const before = metricOf(aggregateFor(baseline, threshold), threshold.metric)
      if (current === undefined || before === undefined) {
        warnings.add(`Baseline metric "${threshold.metric}" for ${targetOf(threshold)} is unavailable; regression check was skipped.`)
        continue
      }
      const regression = before - current
      if (exceeds(regression, maxRegression)) {
        failures.push({
          kind: 'regression', ...named(threshold), actual: regression, limit: maxRegression,
          message: `Gate metric "${threshold.metric}" for ${targetOf(threshold)} regressed by ${regression} (baseline ${before}, current ${current}), exceeding ${maxRegression}.`,
        })
      }
    }
  }
  return { pass: failures.length === 0, failures, warnings: [...warnings] }
}
