// OMA's error classes. Every error this package throws is an `Error` subclass with OMA's
// `name`, `code` and message, plus `retryable`, and `httpStatus` / `provider` when known. A
// provider failure's `code` is the provider's own code when it sent one, and its `type` the
// provider's error type when its body has one (the names the OpenAI SDK's errors use).

export class OMAError extends Error {
  constructor(message, options = {}) {
    super(message)
    Object.defineProperty(this, 'name', {
      value: options.name ?? new.target.defaultName ?? 'Error',
      writable: true,
      configurable: true,
      enumerable: false,
    })
    this.code = options.code ?? new.target.defaultCode
    this.retryable = options.retryable ?? false
    if (options.httpStatus !== undefined) this.httpStatus = options.httpStatus
    if (options.provider !== undefined) this.provider = options.provider
    if (options.type !== undefined) this.type = options.type
    if (options.kind !== undefined) this.kind = options.kind
  }
}

function define(name, code, retryable = false) {
  const cls = {
    [name]: class extends OMAError {
      static defaultName = name
      static defaultCode = code
      constructor(message, options = {}) {
        super(message, { retryable, ...options, name, code: options.code ?? code })
      }
    },
  }[name]
  return cls
}

export const InvalidMessageError = define('InvalidMessageError', 'INVALID_MESSAGE')
export const UnsupportedContentBlockError = define('UnsupportedContentBlockError', 'UNSUPPORTED_CONTENT_BLOCK')
export const UnsupportedToolResultContentError = define('UnsupportedToolResultContentError', 'UNSUPPORTED_TOOL_RESULT_CONTENT')
export const UnsupportedToolCallError = define('UnsupportedToolCallError', 'UNSUPPORTED_TOOL_CALL')
export const TokenBudgetExceededError = define('TokenBudgetExceededError', 'TOKEN_BUDGET_EXCEEDED')
export const LLMCallTimeoutError = define('LLMCallTimeoutError', 'LLM_CALL_TIMEOUT', true)
export const EgressPolicyError = define('EgressPolicyError', 'EGRESS_POLICY_DENIED')
export const ProviderError = define('ProviderError', undefined, true)
export const SessionStateError = define('SessionStateError', 'SESSION_STATE')

const CLASSES = {
  InvalidMessageError,
  UnsupportedContentBlockError,
  UnsupportedToolResultContentError,
  UnsupportedToolCallError,
  TokenBudgetExceededError,
  LLMCallTimeoutError,
  EgressPolicyError,
  ProviderError,
  SessionStateError,
}

/** An error from its OMA description ({name, code, type, message, retryable, httpStatus, provider}). */
export function errorFrom(info) {
  const cls = CLASSES[info.name] ?? OMAError
  const options = {
    name: info.name || 'Error',
    retryable: Boolean(info.retryable),
  }
  if (info.code != null) options.code = info.code
  if (info.httpStatus != null) options.httpStatus = Number(info.httpStatus)
  if (info.provider != null) options.provider = info.provider
  // `type` in JSON, `errorType` in the component's `error` record.
  const type = info.type ?? info.errorType
  if (type != null) options.type = type
  if (info.kind != null) options.kind = info.kind
  const error = new cls(String(info.message ?? ''), options)
  if (info.code == null && cls === OMAError) error.code = undefined
  return error
}

/** The component's `error` record (a jco ComponentError payload) as an OMA error. */
export function fromComponent(e) {
  const payload = e && typeof e === 'object' && 'payload' in e ? e.payload : undefined
  if (payload && typeof payload === 'object' && typeof payload.message === 'string') {
    return errorFrom(payload)
  }
  return e
}
