// Mirrors the API surface of OMA's patterns/cross-provider-reasoning example: an OpenAI-provider
// Agent with preserveReasoningAsText and compressReasoningText, asked once through prompt().
import { Agent, ToolExecutor, ToolRegistry } from '@open-multi-agent/core'

async function main(): Promise<void> {
  if (!process.env['ANTHROPIC_API_KEY'] || !process.env['OPENAI_API_KEY']) {
    console.log('skip')
    process.exit(0)
  }
  const registry = new ToolRegistry()
  const agent = new Agent(
    {
      name: 'reasoner',
      model: 'o-test',
      provider: 'openai',
      baseURL: process.env['OPENAI_BASE_URL'],
      systemPrompt: 'Think, then answer briefly.',
      preserveReasoningAsText: true,
      compressReasoningText: { minChars: 1500 },
    },
    registry,
    new ToolExecutor(registry),
  )
  const answer = await agent.prompt('Two trains leave at 60 and 80 mph at right angles; distance after 2 h?')
  console.log(answer.output.slice(0, 500))
  console.log('history', agent.getHistory().length)
}

void main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
