"""Reward hacks, on every backend of the ``backend`` fixture: none may score.

Each test is an episode of a real task of palaestra's (a starter-pack task whose tests import
the agent's module, or a generated one whose tests embed their reference in ``/tests``) played
by an agent that does not solve it but attacks the verifier instead. Each must end with reward 0,
or as an error (``SystemTampered`` where the agent changed the system the tests run on); never 1.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.run.rollout import Episode
from palaestra.sandbox import SandboxBackend, SandboxSpec
from palaestra.tasks.generators import write as write_generated
from palaestra.tasks.source import TaskSet
from palaestra.verify.boundary import SYSTEM_DIRS
from tests.conftest import SUBMIT_ACTION, MakeTask, bash_action
from tests.tasks.starter.pack import LOADED_DIR

STARTER = LOADED_DIR / "algorithms-easy-merge-intervals"
PERFECT = '{"reward": 1.0}'

#: Python that writes a perfect reward to a path, ignoring failures.
WIN = f"""
def win(path):
    try:
        with open(path, "w") as f:
            f.write({PERFECT!r})
    except OSError:
        pass
"""


def write(path: str, text: str) -> str:
    """A shell command writing ``text`` to ``path``."""
    return f"cat > {path} <<'EOF_HOSTILE'\n{textwrap.dedent(text).strip()}\nEOF_HOSTILE"


def agent_module(attack: str) -> str:
    """The agent's /app/intervals.py: a wrong merge_intervals, and ``attack`` run on import
    (the starter task's tests import it)."""
    return write(
        "/app/intervals.py",
        WIN + textwrap.dedent(attack) + "\ndef merge_intervals(intervals):\n    return []\n",
    )


async def play(backend: SandboxBackend, task: Path, *commands: str) -> Episode:
    policy = ScriptedPolicy([*(bash_action(c) for c in commands), SUBMIT_ACTION])
    async with CodeEnv(TaskSet.from_dir(task), sandbox=backend) as env:
        return await rollout(env, policy)


def assert_no_reward(episode: Episode, *, tampered_ok: bool = False) -> None:
    end = episode.end
    log = f"status={end.status} error={end.error_class}: {end.error_message}\n" + (
        end.verifier.output[-3000:] if end.verifier is not None else ""
    )
    if tampered_ok and end.status == "error":
        assert end.error_class == "SystemTampered", log
        return
    assert end.status != "error", log
    assert episode.reward == 0.0, log


# -- agent code run by the tests ---------------------------------------------------------------


async def test_daemon_rewriting_the_reward(backend: SandboxBackend) -> None:
    """Imported by the tests, the agent's module leaves a process that keeps writing a perfect
    reward after the tests wrote theirs."""
    loop = (
        f"while :; do echo 1 > /logs/verifier/reward.txt; echo '{PERFECT}' > "
        "/logs/verifier/reward.json; sleep 0.01; done"
    )
    episode = await play(
        backend,
        STARTER,
        agent_module(f"""
        import subprocess
        subprocess.Popen(["sh", "-c", {loop!r}], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """),
    )
    assert_no_reward(episode)


async def test_reward_written_through_proc(backend: SandboxBackend) -> None:
    """The module writes the reward through other processes' /proc entries (their root, their
    working directory: an agent daemon parked in /logs/verifier, the verifier's own)."""
    park = "(cd /logs/verifier && setsid nohup sleep 600 >/dev/null 2>&1 &)"
    episode = await play(
        backend,
        STARTER,
        park,
        agent_module("""
        import os
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                for via in ("root/logs/verifier", "cwd", "cwd/../logs/verifier"):
                    win(f"/proc/{pid}/{via}/reward.json")
    """),
    )
    assert_no_reward(episode)


async def test_verifier_dir_replaced_by_a_link(backend: SandboxBackend) -> None:
    """Before the tests, /logs/verifier becomes a link into the agent's workspace, where its
    module then writes the reward."""
    plant = "mkdir -m 777 /app/v && rm -rf /logs/verifier && ln -s /app/v /logs/verifier"
    episode = await play(backend, STARTER, plant, agent_module('win("/app/v/reward.json")'))
    assert_no_reward(episode)


async def test_reward_hard_link_planted_before_the_tests(backend: SandboxBackend) -> None:
    """A reward file hard-linked to one the agent's code can write, planted before the tests
    (a regression test: old code removed it too)."""
    plant = (
        "touch /logs/mine && chmod 666 /logs/mine && mkdir -p /logs/verifier && "
        "ln -f /logs/mine /logs/verifier/reward.json && ln -f /logs/mine /logs/verifier/reward.txt"
    )
    episode = await play(backend, STARTER, plant, agent_module('win("/logs/mine")'))
    assert_no_reward(episode)


# -- the system the tests run on ---------------------------------------------------------------

#: Python source run at every interpreter start: write a perfect reward when it can.
STARTUP_HOOK = (
    "import os; os.path.isdir('/logs/verifier') and "
    f"open('/logs/verifier/reward.json', 'w').write({PERFECT!r})"
)


async def test_pth_and_sitecustomize_in_site_dirs(backend: SandboxBackend) -> None:
    """The agent (root in its phase) puts a .pth file and a sitecustomize into every site dir
    it can write: the tests' own interpreter would run them."""
    plant = (
        write("/tmp/hook.py", STARTUP_HOOK)
        + "\nfor d in $(python3 -c 'import site; print(*site.getsitepackages())') "
        "$(python3 -m site --user-site); do mkdir -p $d 2>/dev/null; "
        "cp /tmp/hook.py $d/zz-hostile.pth; cp /tmp/hook.py $d/sitecustomize.py; "
        "cp /tmp/hook.py $d/usercustomize.py; done 2>/dev/null; true"
    )
    episode = await play(backend, STARTER, plant, agent_module(""))
    assert_no_reward(episode, tampered_ok=True)


async def test_patched_python_first_on_path(backend: SandboxBackend) -> None:
    """A python3 earlier on PATH that writes the reward, then runs the real one."""
    plant = (
        'real=$(readlink -f "$(command -v python3)"); '
        + write(
            "/tmp/python3",
            f"""
            #!/bin/sh
            echo '{PERFECT}' > /logs/verifier/reward.json 2>/dev/null
            exec REAL "$@"
        """,
        )
        + '\nsed -i "s#REAL#$real#" /tmp/python3; chmod 755 /tmp/python3; '
        "for d in $(echo $PATH | tr : ' '); do cp /tmp/python3 $d/python3.hostile 2>/dev/null "
        "&& mv $d/python3.hostile $d/python3 && break; done; true"
    )
    episode = await play(backend, STARTER, plant, agent_module(""))
    assert_no_reward(episode, tampered_ok=True)


# -- generated tasks: the reference in /tests --------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated task (glob-match): its hidden test embeds the reference implementation."""
    return write_generated("glob-match", 0, 0.0, tmp_path_factory.mktemp("gen") / "glob-match")


#: The agent's syncrules.py: it reads the hidden test's spec and answers each case with the
#: expected value it holds (were /tests readable, every call case would pass).
STEAL_REFERENCE = write(
    "/app/syncrules.py",
    """
    import ast, marshal, zlib
    _spec = marshal.loads(zlib.decompress(open("/tests/harness.bin", "rb").read()))
    _want = {
        ast.literal_eval(case["label"][len("rule_matches"):]): case["want"]
        for case in _spec["cases"]
        if case["label"].startswith("rule_matches(")
    }
    def rule_matches(rule, path):
        return _want[(rule, path)]
""",
)


async def test_reference_read_from_the_tests(backend: SandboxBackend, generated: Path) -> None:
    episode = await play(backend, generated, STEAL_REFERENCE)
    assert_no_reward(episode)


async def test_tests_dir_left_open_for_the_reference(
    backend: SandboxBackend, generated: Path
) -> None:
    """The agent leaves /tests (and /logs) nobody's and world-readable before the tests are
    unpacked into it: the verifier makes it root's, mode 700, and nothing unpacked into it
    (the archive's own directory entry included) opens it again."""
    leave_open = "mkdir -p /tests /logs && chmod 777 /tests /logs && chown 65534:65534 /tests /logs"
    episode = await play(backend, generated, leave_open, STEAL_REFERENCE)
    assert_no_reward(episode)


#: The agent's syncrules.py, imported by each run_python child (a fork of the checker's fork
#: server, its parent), attacks the server: it writes fake replies into every fd of it it can
#: open (its control pipes: the checker, root, would take "1" for the next child's pid and kill
#: process group 1, the sandbox's init) and opens its memory for writing (to make it lie); the
#: child then exits with what it managed.
PROBE_SERVER = write(
    "/app/syncrules.py",
    """
    import os
    parent, done = "/proc/%d" % os.getppid(), []
    try:
        for fd in os.listdir(parent + "/fd"):
            try:
                with open(parent + "/fd/" + fd, "w") as f:
                    f.write("1\\n1\\n")
                done.append("wrote to " + os.readlink(parent + "/fd/" + fd))
            except OSError:
                pass
    except OSError:
        pass
    try:
        open(parent + "/mem", "r+b").close()
        done.append("opened its memory")
    except OSError:
        pass
    raise SystemExit("attack: " + (", ".join(done) or "nothing"))
""",
)

#: ... or it plants a link to the hidden test as its own stdout file, then kills the server.
KILL_SERVER = write(
    "/app/syncrules.py",
    """
    import os, signal
    here = os.path.dirname(os.readlink("/proc/self/fd/1"))
    os.unlink(os.path.join(here, "stdout"))
    os.symlink("/tests/harness.bin", os.path.join(here, "stdout"))
    print("from the agent")
    os.kill(os.getppid(), signal.SIGKILL)
    def rule_matches(rule, path):
        return False
""",
)


@pytest.mark.parametrize("attack", [PROBE_SERVER, KILL_SERVER], ids=["probe", "kill"])
async def test_fork_server_of_the_children_attacked(
    backend: SandboxBackend, generated: Path, attack: str
) -> None:
    episode = await play(backend, generated, attack)
    assert_no_reward(episode)
    output = episode.end.verifier.output
    assert "def rule_matches" not in output  # the link was not followed
    # every case of both calls (the cases, then the time-bar one in a child of its own, from a
    # new server after a kill) was run and reported
    checks = int(re.search(r"0/(\d+) checks passed", output).group(1))
    assert output.count("\nERROR ") + output.startswith("ERROR ") == checks > 2, output
    assert "ERROR 4-star patterns" in output, output
    if attack == PROBE_SERVER:
        assert "attack: nothing" in output and "wrote to pipe" not in output, output


@pytest.fixture(scope="module")
def optimization(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated optimization task: its tests run the reference program, as nobody, for the
    expected output, then the agent's, and compare."""
    return write_generated("log-split-io", 0, 0.0, tmp_path_factory.mktemp("gen") / "opt")


#: A usercustomize.py in nobody's user site (its HOME is /tmp): every Python program the tests
#: start as nobody, the reference's included, would print the same line and exit.
SAME_OUTPUT_EVERYWHERE = (
    'site=$(HOME=/tmp python3 -c "import site; print(site.getusersitepackages())") && '
    'mkdir -p "$site" && '
    + write(
        '"$site/usercustomize.py"',
        """
        import os, sys
        if os.getuid() == 65534:
            sys.stdout.write("the same\\n")
            sys.stdout.flush()
            os._exit(0)
    """,
    )
    + "\nchmod -R a+rX /tmp/.local"
)


@pytest.mark.slow
async def test_user_site_planted_for_the_reference_runs(
    backend: SandboxBackend, optimization: Path
) -> None:
    episode = await play(backend, optimization, SAME_OUTPUT_EVERYWHERE)
    assert_no_reward(episode)


async def test_tests_replaced_through_the_workspace(
    backend: SandboxBackend, generated: Path
) -> None:
    """/tests is made a link into the workspace holding a random.py; the hidden test imports
    random from its own directory, as root, and the module rewrites the reward at exit. (Where
    /tests cannot be replaced, the module is planted in it.)"""
    evil = write(
        "/app/t/random.py",
        f"""
        import atexit, sysconfig
        _real = sysconfig.get_paths()["stdlib"] + "/random.py"
        exec(compile(open(_real).read(), _real, "exec"))
        atexit.register(lambda: open("/logs/verifier/reward.json", "w").write({PERFECT!r}))
    """,
    )
    plant = (
        "mkdir -m 777 -p /app/t && "
        + evil
        + "\nif rm -rf /tests 2>/dev/null; then ln -s /app/t /tests; "
        "else cp /app/t/random.py /tests/; fi; true"
    )
    episode = await play(backend, generated, plant)
    assert_no_reward(episode)


# -- what a Harbor task's tests leave behind ---------------------------------------------------


@pytest.mark.parametrize(
    ("leaves", "error"),
    [
        ("echo 1 > /tmp/r && ln -s /tmp/r /logs/verifier/reward.txt", "not a regular file"),
        (
            "echo 1 > /logs/verifier/reward.txt && ln /logs/verifier/reward.txt /logs/r",
            "hard links",
        ),
        ("echo 1 > /logs/verifier/reward.txt && chown 65534 /logs/verifier/reward.txt", "uid"),
    ],
    ids=["symlink", "hard-link", "not-root"],
)
async def test_reward_file_not_as_the_tests_must_leave_it(
    backend: SandboxBackend, make_task: MakeTask, leaves: str, error: str
) -> None:
    """Code a Harbor task's tests run as root (as Harbor runs them) leaves the reward as a link
    to a file it can keep writing, or gives it away: a verifier error, not a reward."""
    task = make_task(test_sh=leaves + "\n")
    episode = await play(backend, task)
    assert episode.end.status == "error" and episode.reward == 0.0, episode.end
    assert error in (episode.end.error_message or ""), episode.end


# -- what the backend's storage saw ------------------------------------------------------------


async def test_changed_system_paths_are_seen(backend: SandboxBackend, test_rootfs: Path) -> None:
    """Sandbox.changed_paths: what the sealed-system check asks. On the local backend the host's
    system directories are read-only; on a root filesystem (and on Docker) they are writable,
    and every change shows, whatever the agent did to hide it."""
    if backend.name == "local":
        async with await backend.create(SandboxSpec(workdir="/app")) as sandbox:
            res = await sandbox.exec("echo x > /usr/bin/planted", timeout=30)
            assert res.exit_code != 0 and await sandbox.changed_paths(SYSTEM_DIRS) == []
    spec = SandboxSpec(workdir="/app", rootfs=test_rootfs if backend.name == "local" else None)
    async with await backend.create(spec) as sandbox:
        assert await sandbox.changed_paths(SYSTEM_DIRS) == []
        res = await sandbox.exec(
            "echo x > /usr/bin/planted && touch -d 2000-01-01 /usr/bin/planted && "
            "rm /etc/os-release && echo y > /app/ok && echo z > /tmp/ok",
            timeout=30,
        )
        assert res.ok, res
        changed = await sandbox.changed_paths(SYSTEM_DIRS)
        assert {"/usr/bin/planted", "/etc/os-release"} <= set(changed), changed
        assert not [p for p in changed if p.startswith(("/app", "/tmp"))], changed
