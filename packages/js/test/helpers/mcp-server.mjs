// A local MCP server for the tests, built with the official SDK (its low-level `Server` over
// stdio): `node mcp-server.mjs [tools|duplicate|crash|github]`.
//
// `tools` (the default) lists, two per page: `echo` (text back, with the client's name and
// version), `files/read` (no description), `picture` (an image and text), `fail` (a result with
// `isError`), `slow` (sleeps `ms`), `mixed` (audio, a text resource, a blob, two resource links),
// `structured` (no content, `structuredContent`) and `env` (the value of `MCP_TEST_VALUE`).
// `duplicate` lists `a/b` and `a_b`, which normalize to one name; `crash` exits before
// answering. `github` stands in for the GitHub MCP server OMA's mcp-github example starts from
// the registry: one `list_issues` tool answering with fixed issues (and the token it was given,
// seen or not).
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const mode = process.argv[2] ?? 'tools'
if (mode === 'crash') process.exit(3)

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
const OBJECT = { type: 'object', properties: {} }
const text = (value) => ({ type: 'text', text: value })

const TOOLS = {
  duplicate: [{ name: 'a/b', inputSchema: OBJECT }, { name: 'a_b', inputSchema: OBJECT }],
  github: [{
    name: 'list_issues',
    description: 'List issues in a GitHub repository',
    inputSchema: {
      type: 'object',
      properties: { owner: { type: 'string' }, repo: { type: 'string' }, state: { type: 'string' }, perPage: { type: 'number' } },
      required: ['owner', 'repo'],
    },
  }],
  tools: [
    {
      name: 'echo',
      description: 'Echoes its text',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    },
    { name: 'files/read', inputSchema: OBJECT },
    { name: 'picture', description: 'A picture', inputSchema: OBJECT },
    { name: 'fail', description: 'Always fails', inputSchema: OBJECT },
    { name: 'slow', description: 'Sleeps', inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } },
    { name: 'mixed', description: 'Every kind of block', inputSchema: OBJECT },
    { name: 'structured', description: 'Structured only', inputSchema: OBJECT },
    { name: 'env', description: 'An environment variable', inputSchema: OBJECT },
  ],
}[mode]

const server = new Server({ name: 'oma-test-server', version: '1.0.0' }, { capabilities: { tools: {} } })

server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const start = Number(request.params?.cursor ?? 0)
  const page = TOOLS.slice(start, start + 2)
  return start + 2 < TOOLS.length ? { tools: page, nextCursor: String(start + 2) } : { tools: page }
})

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {} } = request.params
  switch (name) {
    case 'echo': {
      const info = server.getClientVersion()
      return { content: [text(`echo: ${args.text} (from ${info ? `${info.name}/${info.version}` : '?'})`)] }
    }
    case 'files/read': return { content: [text('file contents')] }
    case 'picture': return { content: [text('a red pixel'), { type: 'image', data: PNG, mimeType: 'image/png' }] }
    case 'fail': return { content: [text('it broke')], isError: true }
    case 'slow':
      await new Promise((resolve) => setTimeout(resolve, Number(args.ms ?? 0)))
      return { content: [text('done')] }
    case 'mixed': return {
      content: [
        { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
        { type: 'resource', resource: { uri: 'memo://notes/today.md', text: 'buy milk', mimeType: 'text/markdown' } },
        { type: 'resource', resource: { uri: 'file:///reports/q1%20summary.pdf', blob: 'JVBERi0=', mimeType: 'application/pdf' } },
        { type: 'resource_link', name: 'spec', uri: 'https://example.com/docs/spec.pdf', description: 'The spec', mimeType: 'application/pdf' },
        { type: 'resource_link', name: 'local', uri: 'file:///etc/hosts' },
      ],
    }
    case 'structured': return { content: [], structuredContent: { temperature: 18, unit: 'C' } }
    case 'env': return { content: [text(process.env.MCP_TEST_VALUE ?? '<unset>')] }
    case 'list_issues': {
      const token = process.env.GITHUB_TOKEN ? 'token given' : 'no token'
      const issues = [{ number: 42, title: 'Streaming stalls' }, { number: 41, title: 'Docs typo' }, { number: 40, title: 'Add MCP' }]
      return { content: [text(JSON.stringify({ repo: `${args.owner}/${args.repo}`, auth: token, issues: issues.slice(0, args.perPage ?? 3) }))] }
    }
    default: return { content: [text(`unknown tool ${name}`)], isError: true }
  }
})

await server.connect(new StdioServerTransport())
