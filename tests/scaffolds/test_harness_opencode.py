"""OpenCode (the real CLI from npm, in real local sandboxes) as ``--scaffold opencode``: its
chat-completions calls, streamed with tool calls, are the observations."""

from __future__ import annotations

import tempfile

import pytest

from palaestra import CodeEnv
from palaestra.llm.types import LLMResponse
from palaestra.run import rollout
from palaestra.scaffolds import make_scaffold
from palaestra.scaffolds.harness import HARNESSES
from palaestra.scaffolds.harness.install import check_version, harness_dir
from palaestra.tasks.source import TaskSet
from tests.scaffolds.conftest import proxy_stopped
from tests.scaffolds.harness_support import ProtocolScript, call, installed, oracle_and_nop
from tests.scaffolds.test_external import our_processes

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier


@pytest.fixture(scope="module", autouse=True)
def opencode() -> None:
    installed("opencode")


async def test_starter_oracle_passes_and_nop_fails_through_opencode():
    scaffold = make_scaffold("opencode")
    oracle, nop = await oracle_and_nop(scaffold)
    assert oracle.reward == 1.0 and oracle.end_reason == "submitted", oracle.end.error
    assert nop.reward == 0.0 and nop.status == "failed", nop.end.error
    # no side request (a session title): the bash call and the answer; one for nop
    assert len(oracle.turns) == 2 and len(nop.turns) == 1
    first = oracle.turns[0].observation
    assert first.metadata["scaffold"] == "opencode" and first.metadata["api"] == "openai"
    assert {"bash", "read", "edit", "write"} <= {t["function"]["name"] for t in first.tools}
    result = oracle.turns[1].observation.messages[-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_0_bash"
    assert our_processes() == [] and await proxy_stopped(scaffold)


#: The first episode's files: in OpenCode's home, in its data directory (its sessions and
#: database) and in the sandbox's /tmp; the first command leaves them, the second looks.
MARKERS = '"$HOME/marker" "$XDG_DATA_HOME/opencode/marker" /tmp/marker'
LEAVE = f'for f in {MARKERS}; do echo x > "$f" || exit 1; done; echo left'
LOOK = f'for f in {MARKERS}; do [ -e "$f" ] && echo "SEEN $f"; done; echo looked'


async def test_nothing_of_one_episode_is_seen_by_the_next(make_task):
    """Two episodes in a row on one scaffold: the first writes into OpenCode's home, its data
    directory and /tmp; the second finds none of it (a fresh sandbox and home each)."""
    scaffold, tasks = make_scaffold("opencode"), TaskSet.from_dir(make_task().parent)
    outputs = []
    for command in (LEAVE, LOOK):
        script = ProtocolScript(
            [
                lambda r, c=command: call("bash", 0, command=c, description="Markers"),
                lambda r: LLMResponse(content="Done."),
            ]
        )
        async with CodeEnv(tasks, scaffold=scaffold) as env:
            episode = await rollout(env, script)
        assert episode.end_reason == "submitted", episode.end.error
        outputs.append(script.requests[1].messages[-1]["content"])
    assert outputs[0].strip().endswith("left"), outputs[0]
    assert "looked" in outputs[1] and "SEEN" not in outputs[1], outputs[1]
    assert our_processes() == []


async def test_it_starts_no_npm_install_of_its_plugin_package(make_task):
    """OpenCode installs ``@opencode-ai/plugin`` into its configuration directory at every
    start, in the background, with its bundled npm (which asks registry.npmjs.org; offline it
    fails and logs so). The home palaestra prepares lists the package, so no install starts:
    after the first request and a command, its log has no install failure and its home no
    npm cache."""
    look = (
        "sleep 1; ls -A $HOME; "
        'grep -h "dependency instal[l]" "$XDG_DATA_HOME"/opencode/log/*.log; echo looked'
    )
    script = ProtocolScript(
        [
            lambda r: call("bash", 0, command=look, description="Look"),
            lambda r: LLMResponse(content="Done."),
        ]
    )
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold="opencode") as env:
        episode = await rollout(env, script)
    assert episode.end_reason == "submitted", episode.end.error
    output = script.requests[1].messages[-1]["content"]
    assert "looked" in output and "dependency install" not in output, output
    assert ".npm" not in output.split(), output


def test_checking_the_install_leaves_nothing_in_the_temporary_directory(tmp_path, monkeypatch):
    """`opencode --version` makes $TMPDIR/opencode; the install check's goes with it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read $TMPDIR again
    opencode = HARNESSES["opencode"]
    check_version(opencode, harness_dir(opencode))
    assert list(tmp_path.iterdir()) == []
