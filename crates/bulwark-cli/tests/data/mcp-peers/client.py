"""A real third-party MCP client for Bulwark's tests: the official MCP Python
SDK's ClientSession, over stdio (stdio_client, which starts the server) or
Streamable HTTP (streamable_http_client).

It connects, lists the tools, makes the calls given in --calls, and prints
one JSON object on stdout for the Rust test to assert on:

    {"protocol_version": "...", "server": "...", "tools": [{"name", "description"}],
     "calls": [{"tool", "is_error", "text"} | {"tool", "error"}]}

A JSON-RPC error on a call is reported as "error" (the call was refused at
the protocol level); a tool result with isError as "is_error": true.

Usage:
  client.py [--era auto|legacy|modern] [--calls JSON] stdio -- COMMAND [ARGS...]
  client.py [--era auto|legacy|modern] [--calls JSON] [--token T] http URL

--era legacy uses the 2025-11-25 handshake (initialize); modern uses
2026-07-28's server/discover; auto (the default) tries discover and falls
back to initialize when the server does not know it.
"""

import argparse
import json
import sys

import anyio
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# Every wait is bounded: a hung server fails the test instead of stalling it.
TIMEOUT_SECONDS = 60
MAX_TEXT = 4000


def text_of(result):
    parts = []
    for block in result.content:
        text = getattr(block, "text", None)
        if text is not None:
            parts.append(text)
    return "\n".join(parts)[:MAX_TEXT]


async def drive(session, era, calls):
    if era == "modern":
        await session.discover()
    elif era == "legacy":
        await session.initialize()
    else:
        try:
            await session.discover()
        except mcp.MCPError:
            await session.initialize()
    listed = await session.list_tools()
    out = {
        "protocol_version": session.protocol_version,
        "server": getattr(session.server_info, "name", None),
        "tools": [
            {"name": t.name, "description": t.description or ""} for t in listed.tools
        ],
        "calls": [],
    }
    for call in calls:
        tool = call["tool"]
        try:
            result = await session.call_tool(tool, call.get("arguments", {}))
            out["calls"].append(
                {"tool": tool, "is_error": bool(result.is_error), "text": text_of(result)}
            )
        except mcp.MCPError as e:
            out["calls"].append({"tool": tool, "error": str(e)[:MAX_TEXT]})
    return out


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["auto", "legacy", "modern"], default="auto")
    parser.add_argument("--calls", default="[]", help="a JSON list of {tool, arguments}")
    parser.add_argument("--token", help="a bearer token for http")
    sub = parser.add_subparsers(dest="transport", required=True)
    stdio = sub.add_parser("stdio")
    stdio.add_argument("command", nargs=argparse.REMAINDER)
    http = sub.add_parser("http")
    http.add_argument("url")
    args = parser.parse_args()
    calls = json.loads(args.calls)

    with anyio.fail_after(TIMEOUT_SECONDS):
        if args.transport == "stdio":
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                parser.error("stdio needs a command after --")
            params = StdioServerParameters(command=command[0], args=command[1:])
            async with stdio_client(params) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    out = await drive(session, args.era, calls)
        else:
            headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
            async with create_mcp_http_client(headers=headers) as http_client:
                async with streamable_http_client(args.url, http_client=http_client) as (
                    read,
                    write,
                ):
                    async with mcp.ClientSession(read, write) as session:
                        out = await drive(session, args.era, calls)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
