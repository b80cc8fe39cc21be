"""A tiny MCP server over stdio, standard library only (no SDK in the sandbox): the handshake,
``tools/list`` and ``tools/call`` of its two tools, ``write_note`` and ``fail`` (a tool error).

The tests ship it in a task's ``environment/``; it runs inside the sandbox as the agent's
commands do. Newline-delimited JSON-RPC, as MCP's stdio transport is."""

import json
import sys

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"],
}
TOOLS = [
    {"name": "write_note", "description": "Write text to a file.", "inputSchema": NOTE_SCHEMA},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
]


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "notes", "version": "1"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "write_note":
        args = params.get("arguments") or {}
        with open(args["path"], "w") as f:
            f.write(args["text"])
        return {"content": [{"type": "text", "text": "wrote " + args["path"]}], "isError": False}
    if method == "tools/call" and params.get("name") == "fail":
        return {"content": [{"type": "text", "text": "the disk is full"}], "isError": True}
    raise KeyError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    try:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
    except KeyError as e:
        error = {"code": -32601, "message": f"no method {e}"}
        reply = {"jsonrpc": "2.0", "id": request["id"], "error": error}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
