// The per-scorer aggregates of a run's records (OMA: eval/report.ts): scorer errors are counted
// apart and never enter a score; percentiles by nearest rank.

function nearestRank(sorted, percentile) {
  if (sorted.length === 0) return 0
  const rank = Math.max(1, Math.ceil(percentile * sorted.length))
  return sorted[Math.min(rank - 1, sorted.length - 1)]
}

/** One scorer's (by name and version) statistics over `records`. */
export function aggregateOne(scorer, records) {
  const matching = records.filter((r) => r.scorer.name === scorer.name && r.scorer.version === scorer.version)
  const scored = matching.filter((r) => r.status === 'scored' && r.score !== undefined)
  const scores = scored.map((r) => r.score).sort((a, b) => a - b)
  const judged = scored.filter((r) => r.pass !== undefined)
  const out = {
    scorer: { name: scorer.name, ...(scorer.version !== undefined ? { version: scorer.version } : {}) },
    scoredCount: scores.length,
    errorCount: matching.filter((r) => r.status === 'scorer_error').length,
    avg: scores.length === 0 ? 0 : scores.reduce((sum, s) => sum + s, 0) / scores.length,
    p50: nearestRank(scores, 0.5),
    p95: nearestRank(scores, 0.95),
    min: scores[0] ?? 0,
    max: scores[scores.length - 1] ?? 0,
  }
  if (judged.length > 0) out.passRate = judged.filter((r) => r.pass === true).length / judged.length
  return out
}

/** One aggregate per scorer (in order), with `byTag` when any case of the run has a tag. */
export function aggregateRecords(records, scorers, tagsByCase) {
  const tags = [...new Set([...tagsByCase.values()].flat())]
  return scorers.map((scorer) => {
    const aggregate = aggregateOne(scorer, records)
    if (tags.length === 0) return aggregate
    const byTag = Object.fromEntries(tags.map((tag) => [tag, aggregateOne(scorer,
      records.filter((r) => r.caseId !== undefined && tagsByCase.get(r.caseId)?.includes(tag)))]))
    return { ...aggregate, byTag }
  })
}
