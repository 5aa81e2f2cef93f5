"""A Streamable HTTP MCP server for the client's tests (standard library
only). Prints its port on the first line of stdout, then serves POST /mcp.

Usage: mcp_http_server.py LIFECYCLE BEHAVIOUR
  LIFECYCLE: modern (server/discover) or legacy (initialize; discover gets
             HTTP 400 with a JSON-RPC error, as many servers answer it), or
             session (legacy, and `initialize` hands out an Mcp-Session-Id
             that every later POST must carry, or gets HTTP 400).
  BEHAVIOUR: normal, or big (the tools/call answer is one huge SSE event).
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIFECYCLE = sys.argv[1]
BEHAVIOUR = sys.argv[2]
SESSION = "session-7f3a"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", content_type="application/json", session=None):
        self.send_response(status)
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def result(self, msg_id, value):
        if LIFECYCLE == "modern":
            value = dict(value, resultType="complete")
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": value}).encode()
        self.reply(200, body)

    def do_GET(self):
        self.reply(405, b"")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        msg = json.loads(self.rfile.read(length))
        method = msg.get("method")
        msg_id = msg.get("id")
        if (LIFECYCLE == "session" and method not in ("initialize", "server/discover")
                and self.headers.get("Mcp-Session-Id") != SESSION):
            self.reply(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"missing session"}}')
            return
        if msg_id is None or method is None:
            self.reply(202)
            return
        if method == "server/discover":
            if LIFECYCLE in ("legacy", "session"):
                body = json.dumps({"jsonrpc": "2.0", "id": msg_id,
                                   "error": {"code": -32601, "message": "Method not found"}})
                self.reply(400, body.encode())
            else:
                self.result(msg_id, {"supportedVersions": ["2026-07-28"],
                                     "capabilities": {"tools": {}},
                                     "ttlMs": 0, "cacheScope": "private"})
        elif method == "initialize":
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "py-http", "version": "1"}}}).encode()
            self.reply(200, body, session=SESSION if LIFECYCLE == "session" else None)
        elif method == "tools/list":
            self.result(msg_id, {"tools": [{"name": "echo", "description": "Echoes text.",
                                            "inputSchema": {"type": "object"}}]})
        elif method == "tools/call":
            text = ((msg.get("params") or {}).get("arguments") or {}).get("text", "")
            if BEHAVIOUR == "big":
                text = "y" * (1536 * 1024)  # over the 1 MiB message bound, under the 2 MiB body bound
            value = {"content": [{"type": "text", "text": text}]}
            if LIFECYCLE == "modern":
                value["resultType"] = "complete"
            event = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": value})
            body = ("event: message\ndata: " + event + "\n\n").encode()
            self.reply(200, body, "text/event-stream")
        else:
            body = json.dumps({"jsonrpc": "2.0", "id": msg_id,
                               "error": {"code": -32601, "message": "Method not found"}})
            self.reply(200, body.encode())


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
