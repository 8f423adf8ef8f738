"""A local MCP server for the tests, built with the official SDK (its low-level ``Server`` over
stdio): ``python mcp_server.py [tools|duplicate|crash]``.

``tools`` (the default) lists, two per page: ``echo`` (text back, with the client's name and
version), ``files/read`` (no description), ``picture`` (an image and text), ``fail`` (a result
with ``isError``), ``slow`` (sleeps ``ms``), ``mixed`` (audio, a text resource, a blob, two
resource links), ``structured`` (no content, ``structuredContent``) and ``env`` (the value of
``MCP_TEST_VALUE``). ``duplicate`` lists ``a/b`` and ``a_b``, which normalize to one name.
``crash`` exits before answering anything.
"""

import asyncio
import os
import sys

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1] if len(sys.argv) > 1 else "tools"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
OBJECT = {"type": "object", "properties": {}}

if MODE == "duplicate":
    TOOLS = [types.Tool(name="a/b", input_schema=OBJECT), types.Tool(name="a_b", input_schema=OBJECT)]
else:
    TOOLS = [
        types.Tool(name="echo", description="Echoes its text",
                   input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        types.Tool(name="files/read", input_schema=OBJECT),
        types.Tool(name="picture", description="A picture", input_schema=OBJECT),
        types.Tool(name="fail", description="Always fails", input_schema=OBJECT),
        types.Tool(name="slow", description="Sleeps", input_schema={"type": "object", "properties": {"ms": {"type": "number"}}}),
        types.Tool(name="mixed", description="Every kind of block", input_schema=OBJECT),
        types.Tool(name="structured", description="Structured only", input_schema=OBJECT),
        types.Tool(name="env", description="An environment variable", input_schema=OBJECT),
    ]


async def list_tools(ctx, params):
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = TOOLS[start:start + 2]
    following = str(start + 2) if start + 2 < len(TOOLS) else None
    return types.ListToolsResult(tools=page, next_cursor=following)


def text(value):
    return types.TextContent(type="text", text=value)


async def call_tool(ctx, params):
    name, args = params.name, params.arguments or {}
    if name == "echo":
        info = ctx.session.client_params.client_info if ctx.session.client_params else None
        who = f"{info.name}/{info.version}" if info else "?"
        return types.CallToolResult(content=[text(f"echo: {args.get('text')} (from {who})")])
    if name == "files/read":
        return types.CallToolResult(content=[text("file contents")])
    if name == "picture":
        return types.CallToolResult(content=[text("a red pixel"),
                                             types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "fail":
        return types.CallToolResult(content=[text("it broke")], is_error=True)
    if name == "slow":
        await asyncio.sleep(float(args.get("ms", 0)) / 1000)
        return types.CallToolResult(content=[text("done")])
    if name == "mixed":
        return types.CallToolResult(content=[
            types.AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav"),
            types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                uri="memo://notes/today.md", text="buy milk", mime_type="text/markdown")),
            types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
                uri="file:///reports/q1%20summary.pdf", blob="JVBERi0=", mime_type="application/pdf")),
            types.ResourceLink(type="resource_link", name="spec", uri="https://example.com/docs/spec.pdf",
                               description="The spec", mime_type="application/pdf"),
            types.ResourceLink(type="resource_link", name="local", uri="file:///etc/hosts"),
        ])
    if name == "structured":
        return types.CallToolResult(content=[], structured_content={"temperature": 18, "unit": "C"})
    if name == "env":
        return types.CallToolResult(content=[text(os.environ.get("MCP_TEST_VALUE", "<unset>"))])
    return types.CallToolResult(content=[text(f"unknown tool {name}")], is_error=True)


async def main():
    if MODE == "crash":
        sys.exit(3)
    server = Server("oma-test-server", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
