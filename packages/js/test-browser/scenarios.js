// The runs every host of test-browser/ makes with `oma-component` against the loopback provider
// (provider.js): the page bundled by esbuild and by Vite, in Chromium, and the same module under
// Deno. Each scenario's outcome goes back as plain JSON; browser.test.js checks it.

/**
 * Runs the scenarios with the package's exports `oma` against the provider at `baseURL`; resolves
 * with `{name: outcome}` (an outcome that threw is `{threw: message}`).
 */
export async function runScenarios(oma, baseURL) {
  const { Agent, InvalidMessageError } = oma
  const config = (extra = {}) => ({
    name: 'browser', model: 'claude-test', provider: 'anthropic', baseURL, apiKey: 'sk-browser-test', ...extra,
  })
  const scenarios = {
    async run() {
      const result = await new Agent(config()).run('a run')
      return { success: result.success, output: result.output, status: result.status }
    },
    async stream() {
      const events = []
      for await (const event of new Agent(config({ textDeltas: true })).stream('a stream')) {
        events.push(event.type === 'done' ? { type: 'done', output: event.data.output } : { type: event.type, data: event.data })
      }
      return events
    },
    async tool() {
      const seen = []
      const add = {
        name: 'add',
        description: 'adds two numbers',
        inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
        execute: async ({ a, b }, context) => {
          seen.push(context.toolUseId)
          return String(a + b)
        },
      }
      const result = await new Agent(config({ tools: [add] })).run('a tool')
      return { output: result.output, turns: result.turns, tools: result.toolCalls.map((c) => c.toolName), seen }
    },
    async validation() {
      try {
        await new Agent(config()).run([{ role: 'user', content: 'not blocks' }])
        return { rejected: false }
      } catch (error) {
        return { rejected: true, invalidMessage: error instanceof InvalidMessageError, message: error.message }
      }
    },
    async cancel() {
      const controller = new AbortController()
      const started = Date.now()
      setTimeout(() => controller.abort(), 150)
      const result = await new Agent(config()).run('a hang', { abortSignal: controller.signal })
      return { success: result.success, status: result.status, withinMs: Date.now() - started < 2000 }
    },
    // The limits hold in a browser too: a body past `maxResponseBytes` (counted as decoded: the
    // provider gzips it to about 1 KB for a browser), a redirect (not followed), an origin the
    // egress policy does not list (nothing sent).
    async limit() {
      const result = await new Agent(config({ call: { maxResponseBytes: 4096, maxRetries: 0 } })).run('a big answer')
      return { success: result.success, overLimit: result.output.includes('response body exceeds the limit of 4096 bytes') }
    },
    async redirect() {
      const result = await new Agent(config({ call: { maxRetries: 0 } })).run('a redirect')
      return { success: result.success }
    },
    async egress() {
      const result = await new Agent(config({ call: { egress: ['https://elsewhere.invalid'] } })).run('an egress')
      return { success: result.success, refused: /egress/i.test(result.output) }
    },
  }
  const outcomes = {}
  for (const [name, scenario] of Object.entries(scenarios)) {
    try {
      outcomes[name] = await scenario()
    } catch (error) {
      outcomes[name] = { threw: String(error?.stack ?? error) }
    }
  }
  return outcomes
}
