// OMA's redaction of secrets in free text, as its `bash` built-in applies it to a command's
// output: private-key blocks, `Authorization:` values, bearer tokens, `key=value` / `key: "value"`
// pairs whose key names a secret, and literal token shapes (OpenAI-style `sk-`, GitHub, AWS
// access keys, Slack) all become `[redacted]`.

const MARK = '[redacted]'

/** A key that names a secret (api keys, passwords, tokens, cookies, sessions, credentials). */
const SECRET_NAME =
  /(?:api[_-]?key|apiKey|secret|password|passwd|pwd|private[_-]?key|privateKey|access[_-]?key|accessKey|accessToken|refreshToken|idToken|githubToken|authorization|auth[_-]?token|authToken|cookie|session|credential|bearer|^token$|[_-]token$|^token[_-])/i

/** `key: "value"` or `key='value'` (the value may hold spaces). */
const QUOTED = /(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?\s*[:=]\s*)(["'])([^]*?)\4/g
/** `key=value` up to the next `,` `;` `}` `]` or line end. */
const UNQUOTED = /(["']?)([A-Za-z_][A-Za-z0-9_.-]*)(\1?\s*[:=]\s*)([^"'\s,;}\]\n\r][^,;}\]\n\r]*)/g

const LITERALS = [
  /\bsk-[A-Za-z0-9_-]{16,}\b/g,
  /\bgh[pousr]_[A-Za-z0-9_]{20,}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}\b/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bxox[baprs]-[A-Za-z0-9-]{10,}\b/g,
]

/** Whether a variable or field name names a secret. */
export function isSensitiveName(name) {
  return SECRET_NAME.test(name)
}

/** `text` with OMA's secret shapes replaced by `[redacted]`. */
export function redactSensitiveText(text) {
  if (text.length === 0) return text
  let out = text
    .replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g, MARK)
    .replace(/\b(Authorization\s*:\s*)(?:Bearer\s+)?[^\n\r,;}]+/gi, `$1${MARK}`)
    .replace(/\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/gi, `Bearer ${MARK}`)
  out = out.replace(QUOTED, (match, keyQuote, key, separator, valueQuote) =>
    isSensitiveName(key) ? `${keyQuote}${key}${separator}${valueQuote}${MARK}${valueQuote}` : match)
  out = out.replace(UNQUOTED, (match, keyQuote, key, separator, value) => {
    // A value an earlier rule already redacted stays as it is.
    if (!isSensitiveName(key) || value.startsWith('[redacted')) return match
    return `${keyQuote}${key}${separator}${MARK}`
  })
  for (const literal of LITERALS) out = out.replace(literal, MARK)
  return out
}
