"""Persistent shell sessions (Sandbox.shell), on every backend of the conftest ``backend``."""

from __future__ import annotations

from palaestra.sandbox import SandboxBackend, SandboxSpec


async def test_state_carries_over_between_runs(backend: SandboxBackend) -> None:
    spec = SandboxSpec(workdir="/app")
    async with await backend.create(spec) as sandbox, sandbox.shell() as sh:
        first = await sh.run(
            'mkdir -p /tmp/w && cd /tmp/w; export A=1; B="two words"; greet() { echo "hi $1"; }'
        )
        assert first.ok, first
        res = await sh.run('pwd; echo "$A|$B"; greet you; printenv A; printenv B || echo unset')
        assert res.stdout == "/tmp/w\n1|two words\nhi you\n1\nunset\n", res
        # Another session, and plain exec, are not affected.
        async with sandbox.shell() as other:
            assert (await other.run('pwd; echo "[$A]"')).stdout == "/app\n[]\n"
        assert (await sandbox.exec('echo "[$A]"')).stdout == "[]\n"


async def test_exit_codes_streams_and_exit(backend: SandboxBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox, sandbox.shell() as sh:
        res = await sh.run("echo out; echo err >&2; false")
        assert (res.stdout, res.stderr, res.exit_code) == ("out\n", "err\n", 1)
        res = await sh.run("cd /tmp; X=kept; exit 7")
        assert res.exit_code == 7
        assert (await sh.run('pwd; echo "$X"')).stdout == "/tmp\nkept\n"
        await sh.run("set -e")
        res = await sh.run("false; echo not reached")
        assert res.exit_code == 1 and res.stdout == ""


async def test_timeout_kills_and_keeps_the_previous_state(backend: SandboxBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox, sandbox.shell() as sh:
        await sh.run("cd /tmp; V=before")
        res = await sh.run("V=after; cd /; echo partial; sleep 30", timeout=1)
        assert res.timed_out and res.exit_code is None and res.stdout == "partial\n", res
        assert (await sh.run('pwd; echo "$V"')).stdout == "/tmp\nbefore\n"


async def test_session_options_and_close(backend: SandboxBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox:
        sh = sandbox.shell(cwd="/tmp", env={"GREETING": "hello"})
        assert (await sh.run('pwd; echo "$GREETING"')).stdout == "/tmp\nhello\n"
        await sh.run("cd /")
        await sh.close()
        assert (await sandbox.exec("ls -A /tmp")).stdout == ""
