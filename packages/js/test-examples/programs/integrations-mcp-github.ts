// Mirrors the API surface of OMA's integrations/mcp-github example: connectMCPTools starting the
// GitHub MCP server with `npx --no-install` (the token and a minimal environment passed on, the
// `github` name prefix), every MCP tool registered next to the built-in tools, an Agent granted
// the MCP tools by name, the answer printed, then disconnect. The example asks Gemini; this
// program asks Anthropic, since OMA's Gemini adapter cannot be pointed at a loopback provider.
// In the harness `npx` is a stand-in that starts a local MCP server built with the official SDK.
import { Agent, ToolExecutor, ToolRegistry, registerBuiltInTools } from '@open-multi-agent/core'
import { connectMCPTools } from '@open-multi-agent/core/mcp'

if (!process.env.GITHUB_TOKEN?.trim()) {
  console.error('Missing GITHUB_TOKEN: set a GitHub personal access token in the environment.')
  process.exit(1)
}

const { tools, disconnect } = await connectMCPTools({
  command: 'npx',
  args: ['--no-install', '@modelcontextprotocol/server-github'],
  env: {
    GITHUB_TOKEN: process.env.GITHUB_TOKEN,
    HOME: process.env.HOME,
    PATH: process.env.PATH,
    TMPDIR: process.env.TMPDIR,
  },
  namePrefix: 'github',
})

const registry = new ToolRegistry()
registerBuiltInTools(registry)
for (const tool of tools) registry.register(tool)
const executor = new ToolExecutor(registry)

const agent = new Agent(
  {
    name: 'github-agent',
    model: 'claude-sonnet-4-6',
    provider: 'anthropic',
    tools: tools.map((tool) => tool.name),
    systemPrompt: 'Use GitHub MCP tools to answer repository questions.',
  },
  registry,
  executor,
)

try {
  const result = await agent.run('List the last 3 open issues in acme/widgets with title and number.')
  console.log(result.output)
} finally {
  await disconnect()
}
