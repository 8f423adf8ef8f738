// A Worker that runs the oma-component package as a Worker's code calls it: `import { Agent }
// from 'oma-component'` resolves, through the package's `workerd` export condition, to its
// Workers build (core modules imported statically). It is what test/workerd.test.js serves
// under `workerd serve`; it is not the gateway (see README.md).
//
// POST /run with OMA run input (a prompt string or an OMA message list) runs one Anthropic
// agent, configured by the Worker's bindings ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, and
// answers OMA's AgentRunResult; input the package refuses answers 422 with the error's name,
// code and message.
import { Agent } from 'oma-component'

export default {
  async fetch(request, env) {
    const url = new URL(request.url)
    if (request.method !== 'POST' || url.pathname !== '/run') {
      return Response.json({ error: { name: 'Error', code: 'NOT_FOUND', message: 'POST /run' } }, { status: 404 })
    }
    let input
    try {
      input = await request.json()
    } catch {
      return Response.json({ error: { name: 'Error', code: 'MALFORMED_JSON', message: 'the body is not JSON' } }, { status: 400 })
    }
    try {
      const agent = new Agent({
        name: 'worker',
        model: 'claude-sonnet-4-6',
        provider: 'anthropic',
        apiKey: env.ANTHROPIC_API_KEY,
        baseURL: env.ANTHROPIC_BASE_URL,
      })
      return Response.json(await agent.run(input))
    } catch (e) {
      return Response.json({ error: { name: e.name, code: e.code, message: e.message } }, { status: 422 })
    }
  },
}
