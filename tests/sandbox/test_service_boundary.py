"""No process survives the phase boundary, the image's service included (issue 28, item 3).

``kill_all()`` kills every process in the sandbox, the service too, then starts the service
again from its argv, as at creation; ``kill_all(restart_service=False)`` leaves nothing running.
The attack: the agent, root beside the service, attaches to it with ptrace and makes it fork a
root process of its own (``ptrace_inject.py``), in the service's session, which the boundary
used to spare. Played on the helper itself as pid 1 of a bubblewrap pid namespace (each
helper: the local backend runs no image service) and on Docker with an image whose
``ENTRYPOINT`` starts a service, as a sandbox and as a verified episode.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import palaestra.sandbox
from palaestra import CodeEnv
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox import SandboxSpec
from palaestra.sandbox._helper import HEADER, encode_frame
from palaestra.sandbox.docker import DEFAULT_IMAGE, DockerBackend
from palaestra.sandbox.helper_runtime import C_HELPER, helper_runtime
from palaestra.sandbox.images import build_image
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, MakeTask, bash_action
from tests.sandbox.docker_support import needs_docker

INJECTOR = Path(__file__).with_name("ptrace_inject.py")
#: The pid of the service's ``sleep``, once it runs (the service starts in its own time).
SERVICE_PID = (
    "for i in $(seq 200); do for p in /proc/[0-9]*; do "
    "[ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = \"sleep $1 \" ] && "
    "{ echo ${p#/proc/}; exit 0; }; done; sleep 0.05; done; exit 1"
)
#: Prints ``pid session`` of every live process but pid 1 (the helper: its configuration holds
#: the service's argv) whose command line holds ``$1``.
FIND = (
    "for p in /proc/[0-9]*; do [ $p = /proc/1 ] && continue; "
    "tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q -- \"$1\" && "
    "[ -e $p/stat ] && cut -d' ' -f1,6 $p/stat | grep -v \"^$$ \"; done; true"
)


class _Helper:
    """A helper (C or Python) as pid 1 of a bubblewrap pid namespace on the host's files,
    configured with a service, as the Docker backend configures it."""

    def __init__(self, kind: str, service: list[str]) -> None:
        config = json.dumps({"service": service})
        if kind == "c":
            argv = [str(helper_runtime() / C_HELPER), config]
        else:
            package = Path(palaestra.sandbox.__file__).parent
            boot = f"import sys; sys.path.insert(0, {str(package)!r}); "
            boot += "from _helper.server import main; main()"
            argv = [sys.executable, "-I", "-S", "-B", "-c", boot, config]
        isolated = ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc"]
        isolated += ["--die-with-parent", "--as-pid-1", "--chdir", "/tmp", "--"]
        env = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
        self.proc = subprocess.Popen(
            [*isolated, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self.next_id = 0
        assert self.answer() == ({"id": 0}, b"")

    def answer(self) -> tuple[dict, bytes]:
        assert self.proc.stdout is not None
        head_len, blob_len = HEADER.unpack(self.proc.stdout.read(HEADER.size))
        return json.loads(self.proc.stdout.read(head_len)), self.proc.stdout.read(blob_len)

    def run(self, head: dict) -> dict:
        assert self.proc.stdin is not None
        self.next_id += 1
        self.proc.stdin.write(encode_frame({"id": self.next_id, **head}))
        self.proc.stdin.flush()
        answer, _ = self.answer()
        assert answer["id"] == self.next_id, answer
        return answer

    def sh(self, script: str, *args: str) -> str:
        assert self.proc.stdin is not None
        self.next_id += 1
        head = {
            "op": "exec",
            "argv": ["sh", "-c", script, "sh", *args],
            "cwd": "/tmp",
            "env": {},
            "user": None,
            "timeout": 30,
            "limit": 1 << 16,
            "stdin": False,
        }
        self.proc.stdin.write(encode_frame({"id": self.next_id, **head}))
        self.proc.stdin.flush()
        answer, out = self.answer()
        assert answer.get("exit_code") == 0, (answer, out)
        return out[: answer["stdout_len"]].decode()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="bubblewrap's pid namespace needs root here")
def test_kill_all_kills_the_service_and_what_was_injected_into_it(
    helper: str, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    service = ["sh", "-c", f"echo $$ >> {starts}; exec sleep 1001"]
    driver = _Helper(helper, service)
    try:
        first = driver.sh(SERVICE_PID, "1001").strip()
        injected = f"echo $$ > {tmp_path}/injected; exec sleep 1002"
        child = driver.sh(f"python3 {INJECTOR} {first} '{injected}'").strip()
        # The attack worked: a process forked by the service, in the service's session.
        assert driver.sh(FIND, "sleep 1002").split() == [child, first]
        answer = driver.run({"op": "kill_all", "restart_service": True})
        assert answer.keys() == {"id"}, answer
        assert driver.sh(FIND, "sleep 1002") == ""
        again = driver.sh(SERVICE_PID, "1001").strip()
        assert again != first and driver.sh(FIND, "sleep 1001").split() == [again, again]
        assert starts.read_text().split() == [first, again]  # started anew, from its argv
        assert driver.run({"op": "kill_all", "restart_service": False}).keys() == {"id"}
        assert driver.sh(FIND, "sleep 100") == ""
        assert starts.read_text().split() == [first, again]
    finally:
        driver.close()


#: The image's entrypoint: notes each start, keeps a status file fresh, runs its command.
ENTRY_SH = """\
#!/bin/sh
mkdir -p /srv && echo start >> /srv/starts
( while :; do echo up > /srv/status; sleep 0.1; done ) &
exec "$@"
"""
SERVICE_DOCKERFILE = f"""\
FROM {DEFAULT_IMAGE}
COPY entry.sh /entry.sh
ENTRYPOINT ["/bin/sh", "/entry.sh"]
WORKDIR /app
"""


@needs_docker
async def test_docker_kill_all_kills_the_service_and_starts_it_again(tmp_path: Path) -> None:
    (tmp_path / "entry.sh").write_text(ENTRY_SH)
    (tmp_path / "Dockerfile").write_text(SERVICE_DOCKERFILE)
    tag = await build_image(tmp_path, timeout=300)
    backend = DockerBackend()
    try:
        async with await backend.create(SandboxSpec(image=tag)) as sandbox:
            await sandbox.upload(INJECTOR, "/tmp/inject.py")

            async def sh(script: str, *args: str) -> str:
                res = await sandbox.exec(["sh", "-c", script, "sh", *args])
                assert res.ok, res
                return res.stdout

            first = (await sh(SERVICE_PID, "infinity")).strip()
            child = (await sh(f"python3 /tmp/inject.py {first} 'exec sleep 1002'")).strip()
            session = (await sh(FIND, "sleep infinity")).split()[1]  # the service's
            assert (await sh(FIND, "sleep 1002")).split() == [child, session]  # the attack worked
            await sandbox.kill_all()
            assert await sh(FIND, "sleep 1002") == ""
            again = (await sh(SERVICE_PID, "infinity")).strip()
            assert again != first
            assert await sh("cat /srv/starts") == "start\nstart\n"
            await sandbox.kill_all(restart_service=False)
            assert await sh(FIND, "sleep") == ""
            assert await sh("cat /srv/starts") == "start\nstart\n"
    finally:
        await backend.aclose()


#: Injected into the service: rewrites the tests and the reward as fast as it can.
CHEAT = (
    "while :; do [ -f /tests/test.sh ] && "
    "printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh; "
    "echo 1 > /logs/verifier/reward.txt; done 2>/dev/null"
)
#: The tests: say whether the service is up again and whether the cheat runs; reward 0.
TEST_SH = """\
for i in $(seq 100); do [ "$(grep -c start /srv/starts)" = 2 ] && break; sleep 0.05; done
rm -f /srv/status
for i in $(seq 100); do [ -s /srv/status ] && break; sleep 0.05; done
echo "starts=$(grep -c start /srv/starts) status=$(cat /srv/status)"
cheats=0
for p in /proc/[0-9]*; do
  tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'reward.tx[t]; done' && cheats=$((cheats+1))
done
echo "cheats=$cheats"
echo 0 > /logs/verifier/reward.txt
"""


@needs_docker
async def test_docker_episode_a_process_injected_into_the_service_cannot_score(
    make_task: MakeTask,
) -> None:
    task = make_task(
        "service-injection",
        dockerfile=SERVICE_DOCKERFILE,
        files={"entry.sh": ENTRY_SH},
        test_sh=TEST_SH,
    )
    inject = INJECTOR.read_text()
    policy = ScriptedPolicy(
        [
            bash_action(f"cat > /tmp/inject.py <<'EOF_INJECT'\n{inject}EOF_INJECT"),
            bash_action(
                f"pid=$(sh -c {shlex.quote(SERVICE_PID)} sh infinity) && "
                f'python3 /tmp/inject.py "$pid" {shlex.quote(CHEAT)}'
            ),
            SUBMIT_ACTION,
        ]
    )
    backend = DockerBackend()
    try:
        async with CodeEnv(TaskSet.from_dir(task), sandbox=backend) as env:
            episode = await rollout(env, policy)
    finally:
        await backend.aclose()
    end = episode.end
    assert end.status != "error", (end.error_class, end.error_message)
    assert end.verifier is not None
    assert "starts=2 status=up\ncheats=0" in end.verifier.output, end.verifier.output
    assert episode.reward == 0.0
