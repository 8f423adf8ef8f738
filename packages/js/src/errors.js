// OMA's error classes, with OMA's constructors and fields (`TokenBudgetExceededError.agent`,
// `.tokensUsed`, `.budget`; `LLMCallTimeoutError.timeoutMs`; `EgressPolicyError.reason`, ...).
// Every error this package throws or reports is an `Error` subclass with OMA's `name`, `code`
// and message, plus `retryable`, and `httpStatus` / `provider` when known. They all extend
// `OMAError`, the package's own base class (OMA's classes extend `Error` directly).

export class OMAError extends Error {
  /**
   * `options`: `{name, code, type, retryable, httpStatus, provider, kind}`. A provider failure's
   * `code` is the provider's own code when it sent one, and its `type` the provider's error type
   * when its body has one (the names the OpenAI SDK's errors use).
   */
  constructor(message, options = {}) {
    super(message)
    Object.defineProperty(this, 'name', {
      value: options.name ?? new.target.defaultName ?? 'Error',
      writable: true,
      configurable: true,
      enumerable: false,
    })
    this.code = options.code ?? new.target.defaultCode
    this.retryable = options.retryable ?? new.target.defaultRetryable ?? false
    if (options.httpStatus !== undefined) {
      this.httpStatus = options.httpStatus
      // OMA's users read a provider failure's HTTP status as `status` (its SDKs' errors carry it
      // there, and OMA's own classification reads it there too).
      this.status = options.httpStatus
    }
    if (options.provider !== undefined) this.provider = options.provider
    if (options.type !== undefined) this.type = options.type
    if (options.kind !== undefined) this.kind = options.kind
  }
}

export class InvalidMessageError extends OMAError {
  static defaultName = 'InvalidMessageError'
  static defaultCode = 'INVALID_MESSAGE'
  constructor(message, options = {}) {
    super(message, options)
  }
}

/**
 * OMA's: an adapter with no wire mapping for a whole content block (`video` on Anthropic, say);
 * terminal. `provider` is the adapter that refused the block (`'Anthropic Messages'`), `blockType`
 * the block's type.
 */
export class UnsupportedContentBlockError extends OMAError {
  static defaultName = 'UnsupportedContentBlockError'
  static defaultCode = 'UNSUPPORTED_CONTENT_BLOCK'
  constructor(provider, blockType, detail) {
    super(`${provider} cannot represent the "${blockType}" content block${detail ? `: ${detail}` : ''}`)
    this.provider = provider
    this.blockType = blockType
  }
}

export class UnsupportedToolResultContentError extends OMAError {
  static defaultName = 'UnsupportedToolResultContentError'
  static defaultCode = 'UNSUPPORTED_TOOL_RESULT_CONTENT'
  constructor(provider, contentType, detail) {
    super(`${provider} cannot represent tool-result content type "${contentType}"${detail ? `: ${detail}` : ''}`)
    this.provider = provider
    this.contentType = contentType
  }
}

export class UnsupportedToolCallError extends OMAError {
  static defaultName = 'UnsupportedToolCallError'
  static defaultCode = 'UNSUPPORTED_TOOL_CALL'
  constructor(provider, toolType) {
    super(`${provider} returned unsupported tool-call type "${toolType}"`)
    this.provider = provider
    this.toolType = toolType
  }
}

export class TokenBudgetExceededError extends OMAError {
  static defaultName = 'TokenBudgetExceededError'
  static defaultCode = 'TOKEN_BUDGET_EXCEEDED'
  constructor(agent, tokensUsed, budget) {
    super(`Agent "${agent}" exceeded token budget: ${tokensUsed} tokens used (budget: ${budget})`)
    this.agent = agent
    this.tokensUsed = tokensUsed
    this.budget = budget
  }
}

/** OMA's cost budget error; exported for type compatibility (the package has no cost budget). */
export class CostBudgetExceededError extends OMAError {
  static defaultName = 'CostBudgetExceededError'
  static defaultCode = 'COST_BUDGET_EXCEEDED'
  constructor(agent, costUsed, budget) {
    super(`Agent "${agent}" exceeded cost budget: ${costUsed} estimated cost used (budget: ${budget})`)
    this.agent = agent
    this.costUsed = costUsed
    this.budget = budget
  }
}

export class LLMCallTimeoutError extends OMAError {
  static defaultName = 'LLMCallTimeoutError'
  static defaultCode = 'LLM_CALL_TIMEOUT'
  static defaultRetryable = true
  constructor(timeoutMs, agent) {
    super(
      agent !== undefined
        ? `Agent "${agent}" LLM call exceeded per-call timeout of ${timeoutMs}ms`
        : `LLM call exceeded per-call timeout of ${timeoutMs}ms`,
    )
    this.timeoutMs = timeoutMs
    if (agent !== undefined) this.agent = agent
  }
}

const EGRESS_CODES = {
  'invalid-policy': 'INVALID_EGRESS_POLICY',
  denied: 'EGRESS_POLICY_DENIED',
  'unresolved-target': 'EGRESS_POLICY_TARGET_UNRESOLVED',
  unsupported: 'EGRESS_POLICY_UNSUPPORTED',
}

export class EgressPolicyError extends OMAError {
  static defaultName = 'EgressPolicyError'
  static defaultCode = 'EGRESS_POLICY_DENIED'
  constructor(reason, message, provider, origin) {
    super(message, { code: EGRESS_CODES[reason] ?? 'EGRESS_POLICY_DENIED' })
    this.reason = reason
    if (provider !== undefined) this.provider = provider
    if (origin !== undefined) this.origin = origin
  }
}

export class StructuredOutputValidationError extends OMAError {
  static defaultName = 'StructuredOutputValidationError'
  static defaultCode = 'STRUCTURED_OUTPUT_VALIDATION_FAILED'
  constructor(cause) {
    super('Structured output validation failed after retry.')
    if (cause !== undefined) this.cause = cause
  }
}

/** The package's: the provider answered with an error, or could not be reached. */
export class ProviderError extends OMAError {
  static defaultName = 'ProviderError'
  static defaultRetryable = true
  constructor(message, options = {}) {
    super(message, options)
  }
}

/** The package's: a driver session was given an answer it did not ask for. */
export class SessionStateError extends OMAError {
  static defaultName = 'SessionStateError'
  static defaultCode = 'SESSION_STATE'
  constructor(message, options = {}) {
    super(message, options)
  }
}

/** OMA's `isRetryableError`, for the errors this package reports and for any other. */
export function isRetryableError(error) {
  if (error instanceof OMAError) return Boolean(error.retryable)
  if (!(error instanceof Error)) return true
  if (error.name === 'AbortError' || error.constructor?.name === 'APIUserAbortError') return false
  const status = error.status ?? error.statusCode
  if (typeof status !== 'number' || !Number.isFinite(status)) return true
  if (status === 408 || status === 409 || status === 429) return true
  return !(status >= 400 && status < 500)
}

// ---------------------------------------------------------------------------------------------
// Errors from the component's descriptions

/** Builds each class from the component's message, reading its fields back from the text. */
const FROM_MESSAGE = {
  InvalidMessageError: (m) => new InvalidMessageError(m),
  UnsupportedContentBlockError: (m, info) => {
    const [, provider = '', type = ''] = /^(.*) cannot represent the "([^"]*)" content block/s.exec(m) ?? []
    return new UnsupportedContentBlockError(provider, info.blockType ?? type)
  },
  UnsupportedToolResultContentError: (m) => {
    const [, provider = '', type = ''] = /^(.*) cannot represent tool-result content type "([^"]*)"/s.exec(m) ?? []
    return new UnsupportedToolResultContentError(provider, type)
  },
  UnsupportedToolCallError: (m) => {
    const [, provider = '', type = ''] = /^(.*) returned unsupported tool-call type "([^"]*)"/s.exec(m) ?? []
    return new UnsupportedToolCallError(provider, type)
  },
  StructuredOutputValidationError: () => new StructuredOutputValidationError(),
  TokenBudgetExceededError: (m) => {
    const [, agent = '', used = '0', budget = '0'] =
      /^Agent "(.*)" exceeded token budget: (\d+) tokens used \(budget: (\d+)\)/s.exec(m) ?? []
    return new TokenBudgetExceededError(agent, Number(used), Number(budget))
  },
  LLMCallTimeoutError: (m) => {
    const [, agent, ms = '0'] = /^(?:Agent "(.*)" )?LLM call exceeded per-call timeout of (\d+)ms/s.exec(m) ?? []
    return new LLMCallTimeoutError(Number(ms), agent)
  },
  EgressPolicyError: (m, info) => {
    const reason = Object.entries(EGRESS_CODES).find(([, code]) => code === info.code)?.[0] ?? 'denied'
    const [, origin] = /^egress denied for (\S+?):/.exec(m) ?? []
    return new EgressPolicyError(reason, m, info.provider ?? undefined, origin)
  },
  ProviderError: (m) => new ProviderError(m),
  SessionStateError: (m) => new SessionStateError(m),
}

/** An error from its OMA description ({name, code, type, message, retryable, httpStatus, provider, blockType}). */
export function errorFrom(info) {
  const message = String(info.message ?? '')
  const make = FROM_MESSAGE[info.name]
  const error = make ? make(message, info) : new OMAError(message, { name: info.name || 'Error' })
  // The component's text is the message, whatever the class would have written.
  error.message = message
  error.retryable = Boolean(info.retryable)
  if (info.code != null) error.code = info.code
  else if (!make) error.code = undefined
  if (info.httpStatus != null) {
    error.httpStatus = Number(info.httpStatus)
    error.status = error.httpStatus
  }
  // A run's `errorInfo.provider` is the configured provider; the class's own `provider` is the
  // adapter that refused the block, read from the message (or given as `blockType`'s sibling).
  if (info.provider != null && !(error instanceof UnsupportedContentBlockError && info.blockType == null)) {
    error.provider = info.provider
  }
  // `type` in JSON, `errorType` in the component's `error` record.
  const type = info.type ?? info.errorType
  if (type != null) error.type = type
  if (info.kind != null) error.kind = info.kind
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

/** The message of any thrown value: an Error's `message`, anything else as a string. */
export function errorMessage(error) {
  if (error instanceof Error) return error.message
  return String(error)
}
