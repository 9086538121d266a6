"""The official MCP Python SDK (`mcp`) through the gate: its Client over Streamable HTTP, whose
httpx2 client reads HTTP_PROXY / HTTPS_PROXY and SSL_CERT_FILE, calling one tool as an agent does.

  mcp_client.py URL TOOL SUBJECT N   call TOOL with { subject: SUBJECT } N times, one line per call

A JSON-RPC error (the gate's verdict, for a tool classified `verdict: { protocol: jsonrpc }`) is
raised by the SDK as MCPError: its message and data are what the agent sees.
"""
import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError

from report import usage

url, tool, subject, n = usage(sys.argv, ["URL", "TOOL", "SUBJECT", "N"])


async def main():
    async with Client(url) as client:
        for _ in range(int(n)):
            try:
                result = await client.call_tool(tool, {"subject": subject})
                text = " ".join(c.text for c in result.content if getattr(c, "type", None) == "text")
                line = {"error": None, "is_error": bool(result.is_error), "text": text}
            except MCPError as e:
                data = e.error.data if isinstance(e.error.data, dict) else {}
                line = {"error": type(e).__name__, "code": e.error.code, "surfaced": str(e), "data": data}
            print(json.dumps(line), flush=True)


asyncio.run(main())
