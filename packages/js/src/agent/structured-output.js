// OMA's `outputSchema` on the package's side (OMA: agent/structured-output.ts): a zod schema is
// shown to the model as JSON Schema and validates each final answer here, with zod, as OMA does;
// a JSON Schema is the component's to check (docs/agent.md#structured-output).

import { errorMessage } from '../errors.js'
import { zodToJsonSchema } from '../tool/framework.js'
import { isObject } from '../utils/options.js'

/**
 * OMA's `outputSchema` into the component's configuration (docs/agent.md#structured-output). A
 * zod schema is shown to the model as OMA shows it (OMA's `zodToJsonSchema`) and validates each
 * final answer on this side, with zod, as OMA does: the zod schema is returned for the host.
 * A plain JSON Schema object (or a boolean) is the component's to check. Anything else is a
 * TypeError naming the option, before any request.
 */
export function structuredOutput(config, json) {
  const schema = config.outputSchema
  if (schema === undefined || schema === null) return null
  if (typeof schema?.safeParse === 'function') {
    json.outputSchema = zodToJsonSchema(schema)
    json.outputValidation = 'host'
    return schema
  }
  if (typeof schema === 'boolean' || isObject(schema)) {
    json.outputSchema = schema
    return null
  }
  throw new TypeError('outputSchema must be a zod schema or a JSON Schema object')
}

/** OMA's `validateOutput` message: one `  - <path>: <message>` line per zod issue. */
export function zodIssues(error) {
  const issues = (error?.issues ?? [])
    .map((issue) => `  - ${issue.path.length > 0 ? issue.path.join('.') : '(root)'}: ${issue.message}`)
    .join('\n')
  return `Output validation failed:\n${issues}`
}

/**
 * The answer to a `validate-output` step: the host's zod schema parses the value read from the
 * final answer. A value that passes is kept (`run.structured`, zod's output, transforms and
 * all) and goes back as JSON; one that fails goes back as OMA's message, which the retry's
 * feedback quotes.
 */
export function validateOutput(host, run, text) {
  try {
    const parsed = host.outputSchema.safeParse(JSON.parse(text))
    if (!parsed.success) return { tag: 'err', val: zodIssues(parsed.error) }
    run.structured = parsed.data
    let back
    try {
      back = JSON.stringify(parsed.data)
    } catch {
      back = undefined
    }
    return { tag: 'ok', val: back ?? text }
  } catch (error) {
    return { tag: 'err', val: errorMessage(error) }
  }
}
