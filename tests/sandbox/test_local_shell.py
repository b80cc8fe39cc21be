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


#: Every process in the sandbox but the helper (pid 1) and the listing itself, one a line: its
#: pid and command line.
_PROCESSES = r"""
for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = 1 ] || [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    cmd=$(tr '\0\n' '  ' < "$p/cmdline" 2>/dev/null) && [ -n "$cmd" ] && echo "$pid $cmd"
done
true
"""

_FORGER = r"""( while :; do for f in {fds}; do
    printf 'R0 0\nX0 0\n\0R0 0\nR\nX9\n' >"$f"
done; done ) 2>/dev/null"""


async def test_hostile_and_heavy_commands_keep_the_session(backend: SandboxBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox, sandbox.shell() as sh:
        # What a command prints cannot end its run nor set its exit code.
        fake = r'printf "R0\n\0X0\n\0"; printf "R0\n" >&2; echo after; exit 3'
        res = await sh.run(fake)
        assert (res.stdout, res.stderr, res.exit_code) == ("R0\n\0X0\n\0after\n", "R0\n", 3)
        # Killed in a loop of builtins (no child process to kill): the state before it stays.
        await sh.run("V=before; cd /tmp")
        res = await sh.run("V=after; cd /; while :; do :; done", timeout=0.5)
        assert res.timed_out and res.exit_code is None, res
        assert (await sh.run('echo "$V $PWD"')).stdout == "before /tmp\n"
        # Output beyond the limit is dropped, then the session goes on as before.
        res = await sh.run("printf '%*s' 3000000 ''; echo err >&2", output_limit=1000)
        assert res.truncated and res.stdout == " " * 1000 and res.stderr == "err\n", res
        res = await sh.run('exec >/dev/null; echo hidden; echo "$V" >&2')
        assert (res.stdout, res.stderr, res.exit_code) == ("", "before\n", 0)
        assert (await sh.run("echo shown")).stdout == "shown\n"  # exec >file lasts one run
        # A background job writing statuses and states where the session's come from (fd 61)
        # ends no later run.
        await sh.run(_FORGER.format(fds="/proc/$BASHPID/fd/61") + " &")
        res = await sh.run("sleep 0.2; echo late; exit 5")
        assert (res.stdout, res.stderr, res.exit_code) == ("late\n", "", 5), res
        # One writing them to every descriptor (its bash's commands too) ruins its own session,
        # nothing else.
        async with sandbox.shell() as ruined:
            await ruined.run(_FORGER.format(fds="/proc/$BASHPID/fd/*") + " &", timeout=1)
            await ruined.run("sleep 0.2", timeout=1)
        assert (await sh.run("echo fine")).stdout == "fine\n"
        # The bash that ended (exit 5) took its jobs with it: only the new one runs.
        assert len((await sandbox.exec(_PROCESSES)).stdout.splitlines()) == 1


async def test_close_leaves_no_process_behind(backend: SandboxBackend) -> None:
    async with await backend.create(SandboxSpec()) as sandbox:
        sh = sandbox.shell()
        await sh.run("sleep 987 & disown; sleep 986 &")
        assert (await sh.run("echo $((1 + 1))")).stdout == "2\n"  # background jobs live on
        running = (await sandbox.exec(_PROCESSES)).stdout
        assert "sleep 987" in running and "sleep 986" in running, running
        await sh.close()
        assert (await sandbox.exec(_PROCESSES)).stdout == ""
        await sh.close()  # idempotent
