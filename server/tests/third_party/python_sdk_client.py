"""Drive fencepost-server with the official Python MCP SDK (a client that is not rmcp).

Not part of `cargo test` (it needs PyPI). Run by hand:

    python3 -m venv /tmp/mcp-venv && /tmp/mcp-venv/bin/pip install mcp
    cargo build -p fencepost-server
    /tmp/mcp-venv/bin/python server/tests/third_party/python_sdk_client.py target/debug/fencepost-server

It lists the tools, then claims a lock, asserts its token, writes a file through
the fence, releases, checks the released token no longer passes and cannot write,
and sends one bad argument. The SDK validates every structured result against the
tool's output schema, so a schema/result mismatch fails here too. Exits 0 on success.
"""

import asyncio
import os
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = os.path.join(scratch, "root")
        os.makedirs(root)
        params = StdioServerParameters(
            command=binary,
            args=["--root", root, "--store", os.path.join(root, ".fencepost"), "--owner", "python-sdk"],
            env={"FENCEPOST_LOG": "warn", "PATH": os.environ.get("PATH", "")},
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                print("initialize:", init.server_info.name, init.server_info.version,
                      "protocol", init.protocol_version)
                tools = await session.list_tools()
                names = sorted(t.name for t in tools.tools)
                print("tools:", names)
                assert names == ["assert", "claim", "release", "renew", "status", "write"], names

                resource = {"kind": "lock", "target": "db:migrations"}
                claim = await session.call_tool("claim", {"resource": resource, "ttl_ms": 5000})
                assert not claim.is_error, claim
                token = claim.structured_content["token"]
                print("claim:", claim.structured_content)

                check = await session.call_tool("assert", {"resource": resource, "token": token})
                assert check.structured_content == {"authorized": True}, check
                print("assert:", check.structured_content)

                wrote = await session.call_tool("write", {
                    "resource": resource, "token": token,
                    "path": "migrations/0001.sql", "content": "create table t (id int);\n",
                })
                assert not wrote.is_error, wrote
                print("write:", wrote.structured_content)
                with open(os.path.join(root, "migrations", "0001.sql")) as f:
                    assert f.read() == "create table t (id int);\n"

                released = await session.call_tool("release", {"resource": resource, "token": token})
                assert released.structured_content == {"released": True}, released
                print("release:", released.structured_content)

                check = await session.call_tool("assert", {"resource": resource, "token": token})
                assert check.structured_content == {"authorized": False}, check
                stale = await session.call_tool("write", {
                    "resource": resource, "token": token, "path": "migrations/0001.sql", "content": "stale",
                })
                assert stale.is_error, stale
                print("stale write refused:", stale.content[0].text)

                bad = await session.call_tool("claim", {"resource": {"kind": "dir", "target": "x"}})
                assert bad.is_error, bad
                print("bad argument:", bad.content[0].text)

                status = await session.call_tool("status", {})
                assert not status.is_error, status
                print("status:", status.structured_content["claims"])
    print("python-sdk client: OK")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "fencepost-server"))
