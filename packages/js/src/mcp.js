// `oma-component/mcp` (OMA: `@open-multi-agent/core/mcp`): an MCP server's tools as the
// package's tool definitions. Node-only (the stdio transport starts a process); needs the
// optional peer dependency `@modelcontextprotocol/sdk`.
export { connectMCPTools } from './tool/mcp.js'
