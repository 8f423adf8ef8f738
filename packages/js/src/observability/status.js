// OMA's `classifyRunFailure`: turns any thrown value into the `status` and `errorInfo` fields of
// an AgentRunResult, the way OMA classifies a failure (the package's own results are classified
// by the component; this is for OMA programs that classify their own failures).

import {
  CostBudgetExceededError,
  EgressPolicyError,
  LLMCallTimeoutError,
  TokenBudgetExceededError,
  isRetryableError,
} from '../errors.js'

/** How long a status message and an errorInfo message may be, as in OMA. */
const STATUS_MESSAGE_CHARS = 256
const ERROR_MESSAGE_CHARS = 1024
const HIDDEN = '[redacted]'

/** Names whose assigned value is a secret (`apiKey=...`, `"password": "..."`, `token: ...`). */
const SECRET_NAME =
  /(?:api[_-]?key|secret|passw(?:or)?d|pwd|private[_-]?key|access[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|github[_-]?token|authori[sz]ation|auth[_-]?token|cookie|session|credential|bearer|^token$|[_-]token$|^token[_-])/i

/** Literal shapes of well-known keys and tokens. */
const SECRET_LITERALS = [
  /\bsk-[A-Za-z0-9_-]{16,}\b/g,
  /\bgh[pousr]_[A-Za-z0-9_]{20,}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}\b/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bxox[baprs]-[A-Za-z0-9-]{10,}\b/g,
]

/**
 * `text` with what looks like a secret replaced by `[redacted]`: PEM private keys, the value of
 * an assignment whose name says it is a secret, and the literal shapes of common API keys.
 */
function redact(text) {
  let out = text.replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g, HIDDEN)
  // Quoted values first (`key: "a b"`), then bare ones up to a delimiter (`key=value`).
  out = out.replace(/(["']?)([A-Za-z_][\w.-]*)(\1?\s*[:=]\s*)(["'])([\s\S]*?)\4/g, (all, q, name, sep, quote) =>
    SECRET_NAME.test(name) ? `${q}${name}${sep}${quote}${HIDDEN}${quote}` : all)
  out = out.replace(/(["']?)([A-Za-z_][\w.-]*)(\1?\s*[:=]\s*)([^"'\s,;}\]\n\r][^,;}\]\n\r]*)/g, (all, q, name, sep, value) =>
    SECRET_NAME.test(name) && value !== HIDDEN ? `${q}${name}${sep}${HIDDEN}` : all)
  out = out.replace(/\b(Bearer)\s+[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${HIDDEN}`)
  for (const pattern of SECRET_LITERALS) out = out.replace(pattern, HIDDEN)
  return out
}

function messageOf(value, limit) {
  const raw = value instanceof Error ? value.message : typeof value === 'string' ? value : undefined
  if (!raw) return undefined
  return redact(raw).slice(0, limit)
}

function codeOf(error) {
  if (error === null || typeof error !== 'object') return undefined
  const { code } = error
  return typeof code === 'string' || typeof code === 'number' ? String(code) : undefined
}

/** The HTTP status an error carries (`status`, as the provider SDKs set it, or `statusCode`). */
function httpStatusOf(error) {
  if (error === null || typeof error !== 'object') return undefined
  const value = error.status ?? error.statusCode ?? error.httpStatus
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

function isCancellation(error) {
  return error instanceof Error && (error.name === 'AbortError' || error.constructor?.name === 'APIUserAbortError')
}

/**
 * OMA's `classifyRunFailure(error, {kind?, provider?, attempt?, statusCode?})`: the `status`
 * (`{code, message?}`) and `errorInfo` (`{kind, code?, name?, message?, retryable, httpStatus?,
 * provider?, attempt?}`) that describe `error`. A spent token or cost budget is
 * `budget_exhausted`, a call timeout `timeout`, an egress refusal `rejected`, an abort
 * `cancelled`; anything else keeps `options.statusCode` (default `error`), and is of kind
 * `provider` when it carries an HTTP status or a provider is named. Messages are redacted and
 * cut to 256 (status) and 1024 (errorInfo) characters.
 */
export function classifyRunFailure(error, options = {}) {
  let code = options.statusCode ?? 'error'
  let kind = options.kind ?? 'unknown'
  const status = httpStatusOf(error)
  if (error instanceof TokenBudgetExceededError || error instanceof CostBudgetExceededError) {
    code = 'budget_exhausted'
    kind = 'budget'
  } else if (error instanceof LLMCallTimeoutError || (error instanceof Error && error.name === 'RoutingTimeoutError')) {
    code = 'timeout'
    kind = 'timeout'
  } else if (error instanceof EgressPolicyError) {
    code = 'rejected'
    kind = 'validation'
  } else if (isCancellation(error)) {
    code = 'cancelled'
    kind = 'cancellation'
  } else if (options.kind === undefined && (status !== undefined || options.provider !== undefined)) {
    kind = 'provider'
  }
  const statusMessage = messageOf(error, STATUS_MESSAGE_CHARS)
  const message = messageOf(error, ERROR_MESSAGE_CHARS)
  const errorCode = codeOf(error)
  return {
    status: { code, ...(statusMessage !== undefined ? { message: statusMessage } : {}) },
    errorInfo: {
      kind,
      ...(errorCode !== undefined ? { code: errorCode } : {}),
      ...(error instanceof Error ? { name: error.name } : {}),
      ...(message !== undefined ? { message } : {}),
      retryable: isRetryableError(error),
      ...(status !== undefined ? { httpStatus: status } : {}),
      ...(options.provider !== undefined ? { provider: options.provider } : {}),
      ...(options.attempt !== undefined ? { attempt: options.attempt } : {}),
    },
  }
}
