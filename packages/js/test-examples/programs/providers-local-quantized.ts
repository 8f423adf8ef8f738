// Mirrors the API surface of OMA's providers/local-quantized example: an OpenAI-compatible local
// server with OMA's sampling options (temperature, maxTokens, topP, topK, minP,
// frequencyPenalty, presencePenalty, extraBody) through OpenMultiAgent.runAgent.
import { OpenMultiAgent } from '@open-multi-agent/core'
import type { AgentConfig } from '@open-multi-agent/core'

const BASE = process.env.LOCAL_BASE_URL ?? 'http://localhost:8000/v1'
const MODEL = 'local/test-model-awq'

const assistant: AgentConfig = {
  name: 'assistant',
  model: MODEL,
  provider: 'openai',
  baseURL: BASE,
  apiKey: 'local',
  temperature: 0.7,
  maxTokens: 512,
  topP: 0.9,
  topK: 20,
  minP: 0.05,
  frequencyPenalty: 0.3,
  presencePenalty: 0,
  extraBody: { repetition_penalty: 1.1 },
  systemPrompt: 'One short paragraph.',
  maxTurns: 4,
}
const orchestrator = new OpenMultiAgent({ defaultModel: MODEL, maxConcurrency: 1 })
const result = await orchestrator.runAgent(assistant, 'What does min-p sampling do?')
console.log(result.output)
console.log(`tokens: ${result.tokenUsage.input_tokens} in / ${result.tokenUsage.output_tokens} out`)
