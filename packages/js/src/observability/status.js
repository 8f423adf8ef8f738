// OMA's `classifyRunFailure` (OMA: observability/status.ts): turns any thrown value into the
// `status` and `errorInfo` fields of an AgentRunResult, the way OMA classifies a failure (the
// package's own results are classified by the component; this is for OMA programs that classify
// their own failures). Messages are redacted with OMA's rules, the component's.

import {
  CostBudgetExceededError,
  EgressPolicyError,
  LLMCallTimeoutError,
  OMAError,
  TokenBudgetExceededError,
  isRetryableError,
} from '../errors.js'
import { redactSensitiveText } from '../utils/redaction.js'

/** How long a status message and an errorInfo message may be, as in OMA. */
const STATUS_MESSAGE_CHARS = 256
const ERROR_MESSAGE_CHARS = 1024

function messageOf(value, limit) {
  const raw = value instanceof Error ? value.message : typeof value === 'string' ? value : undefined
  if (!raw) return undefined
  return redactSensitiveText(raw).slice(0, limit)
}

function codeOf(error) {
  if (error === null || typeof error !== 'object') return undefined
  const { code } = error
  return typeof code === 'string' || typeof code === 'number' ? String(code) : undefined
}

/**
 * The HTTP status an error carries: `status` (as the provider SDKs and this package's own errors
 * set it), or `statusCode` when `status` is null or absent; only a finite number counts.
 */
function httpStatusOf(error) {
  if (error === null || typeof error !== 'object') return undefined
  const value = error.status ?? error.statusCode
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

/**
 * Whether `error` is of one of OMA's classes `names`: an instance of the class, or one of this
 * package's errors carrying that OMA name (how the component reports an error of a class the
 * package has no constructor call for, such as a routing timeout).
 */
function isOf(error, classes, names) {
  return classes.some((cls) => error instanceof cls) || (error instanceof OMAError && names.includes(error.name))
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
  if (isOf(error, [TokenBudgetExceededError, CostBudgetExceededError], ['TokenBudgetExceededError', 'CostBudgetExceededError'])) {
    code = 'budget_exhausted'
    kind = 'budget'
  } else if (isOf(error, [LLMCallTimeoutError], ['LLMCallTimeoutError', 'RoutingTimeoutError'])) {
    code = 'timeout'
    kind = 'timeout'
  } else if (isOf(error, [EgressPolicyError], ['EgressPolicyError'])) {
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
