// OMA's redaction of secrets in free text (OMA: utils/redaction.ts), as its `bash` built-in
// applies it to a command's output and `classifyRunFailure` to error messages: private-key
// blocks, `Authorization:` values, bearer tokens, `key=value` / `key: "value"` pairs whose key
// names a secret, and literal token shapes all become `[redacted]`. The rules are the
// component's (the codec's `redact-sensitive-text` and `is-sensitive-name`, the same code every
// run's errors are redacted with: docs/agent.md#redaction-rules); this module only calls them.

import { codec } from '../component.js'

/** Whether a variable or field name names a secret. */
export function isSensitiveName(name) {
  return codec.isSensitiveName(String(name).toWellFormed())
}

/**
 * `text` with OMA's secret shapes replaced by `[redacted]`. A lone surrogate, which no rule
 * matches and UTF-8 cannot carry to the component, comes back as U+FFFD.
 */
export function redactSensitiveText(text) {
  if (text.length === 0) return text
  return codec.redactSensitiveText(text.toWellFormed())
}
