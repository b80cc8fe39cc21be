"""The external scaffold end to end: real harnesses, the real proxy, the real local sandbox."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

import pytest

from palaestra import CodeEnv, EpisodeError
from palaestra.env.registry import load_tasks
from palaestra.llm import ScriptedPolicy
from palaestra.run import rollout
from palaestra.sandbox import make_backend
from palaestra.sandbox.base import SandboxSpec
from palaestra.scaffolds import ExternalScaffold, NopPolicy, OraclePolicy, external, make_scaffold
from palaestra.scaffolds.host_process import host_python_mounts
from palaestra.scaffolds.mini_swe_agent_preset import mini_swe_agent_scaffold
from palaestra.tasks.source import TaskSet
from tests.conftest import SUBMIT_ACTION, bash_action
from tests.procs import _processes
from tests.scaffolds.conftest import proxy_stopped

pytestmark = pytest.mark.slow  # whole episodes with real verifiers: not in the fast tier

#: A minimal CLI agent, stdlib only, run by the sandbox's python3: the OpenAI chat protocol over
#: HTTP to the base URL it is given, one ```bash block per reply, submit sentinel to finish.
AGENT = r"""
import json, os, re, subprocess, sys, urllib.request
task_file, base_url = sys.argv[1], sys.argv[2]
headers = {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
models = json.load(urllib.request.urlopen(urllib.request.Request(base_url + "/models", headers=headers)))
messages = [{"role": "system", "content": "Reply with one bash block."},
            {"role": "user", "content": open(task_file).read()}]
for _ in range(10):
    body = {"model": models["data"][0]["id"], "messages": messages}
    req = urllib.request.Request(base_url + "/chat/completions", json.dumps(body).encode(), headers)
    reply = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    messages.append({"role": "assistant", "content": reply})
    command = re.findall(r"```bash\n(.*?)\n```", reply, re.S)[0]
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    if out.stdout.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"):
        print("agent submitted")
        sys.exit(0)
    messages.append({"role": "user", "content": out.stdout + out.stderr})
sys.exit(1)
"""
AGENT_COMMAND = ["python3", "-c", AGENT, "{instruction_file}", "{base_url}"]

#: The same agent on the official openai SDK, streaming: it runs in the sandbox with this
#: Python and its packages mounted read-only, configured only by OPENAI_BASE_URL/OPENAI_API_KEY.
SDK_AGENT = r"""
import re, subprocess, sys
from openai import OpenAI
client = OpenAI()
messages = [{"role": "user", "content": open(sys.argv[1]).read()}]
for _ in range(10):
    stream = client.chat.completions.create(model=sys.argv[2], messages=messages, stream=True)
    reply = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    messages.append({"role": "assistant", "content": reply})
    command = re.findall(r"```bash\n(.*?)\n```", reply, re.S)[0]
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    if out.stdout.startswith("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"):
        sys.exit(0)
    messages.append({"role": "user", "content": out.stdout + out.stderr})
sys.exit(1)
"""


def host_processes(marker: str) -> list[str]:
    return [cmd for _, cmd in _processes().values() if marker in cmd and "pytest" not in cmd]


def our_processes() -> list[str]:
    """Every process below this test process: sandboxes, harnesses, anything they started
    (other programs' sandboxes on the machine are not ours to count)."""
    procs = _processes()
    found = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return [procs[pid][1] for pid in sorted(found - {os.getpid()}) if pid in procs]


async def test_mini_swe_agent_oracle_passes_and_nop_fails(monkeypatch):
    """The real mini-swe-agent (its `mini` CLI, litellm inside) drives full episodes through
    the proxy: each of its LLM calls is an observation, each command runs in our sandbox
    (sent there by its palaestra environment class on the host, or run by itself inside)."""
    tasks = load_tasks("starter:0:1")
    scaffold = mini_swe_agent_scaffold()
    made = []  # the host runs' temporary directories (this test's, not another worker's)
    mkdtemp = tempfile.mkdtemp

    def recorded(*args, **kwargs) -> str:
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(external.tempfile, "mkdtemp", recorded)

    async def episode(policy, scaffold=scaffold):
        async with CodeEnv(tasks, scaffold=scaffold) as env:
            return await rollout(env, policy(env.tasks))

    oracle, nop, inside = await asyncio.gather(
        episode(OraclePolicy.from_tasks),
        episode(lambda _: NopPolicy()),
        # mini-swe-agent itself in the network-less sandbox, its own LocalEnvironment
        episode(OraclePolicy.from_tasks, mini_swe_agent_scaffold(where="sandbox")),
    )
    assert inside.reward == 1.0 and inside.end_reason == "submitted", inside.end.error
    assert [c["kind"] for c in inside.info["executions"]] == ["llm", "llm", "command"]
    assert oracle.reward == 1.0 and oracle.status == "passed", oracle.end.error
    assert oracle.end_reason == "submitted" and oracle.terminated
    assert nop.reward == 0.0 and nop.status == "failed"
    # the observations are mini-swe-agent's own messages, rendered from palaestra's config
    first = oracle.turns[0].observation
    assert (
        first.messages[0]["role"] == "system" and "EXACTLY ONE bash" in first.messages[0]["content"]
    )
    assert "<task>" in first.messages[1]["content"]
    assert first.metadata["scaffold"] == "external" and first.metadata["turn"] == 0
    second = oracle.turns[1].observation
    assert "<returncode>0</returncode>" in second.messages[-1]["content"]
    # its commands ran in the sandbox through the exec route, recorded in its executions
    kinds = [c["kind"] for c in oracle.info["executions"]]
    assert kinds == ["llm", "exec", "llm", "exec", "command"]
    assert oracle.info["executions"][-1]["exit_code"] == 0
    assert "solve.sh" in oracle.info["executions"][1]["command"]
    assert our_processes() == [] and host_processes("minisweagent") == []
    runs = [d for d in made if "palaestra-external-" in d]
    assert runs and not any(await asyncio.to_thread(lambda: [os.path.exists(d) for d in runs]))
    assert await proxy_stopped(scaffold)


async def test_sandbox_agent_reaches_the_proxy_without_a_network(make_task):
    task_dir = make_task()
    scaffold = make_scaffold("external", command=AGENT_COMMAND, model="my-model")
    assert isinstance(scaffold, ExternalScaffold)
    async with CodeEnv(TaskSet.from_dir(task_dir.parent), scaffold=scaffold) as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
        assert episode.reward == 1.0 and episode.end_reason == "submitted"
        end = episode.info["executions"][-1]
        assert end["kind"] == "command" and end["exit_code"] == 0
        assert "agent submitted" in end["output"]
        assert episode.turns[0].observation.metadata["requested_model"] == "my-model"
        assert episode.turns[0].observation.messages[1]["content"].startswith("Write the number 42")
        nop = await rollout(env, NopPolicy())
        assert nop.reward == 0.0 and nop.status == "failed"
    assert our_processes() == []


async def test_openai_sdk_harness_in_the_sandbox(make_task):
    scaffold = ExternalScaffold(
        command=[sys.executable, "-c", SDK_AGENT, "{instruction_file}", "{model}"],
        mounts=host_python_mounts(),
    )
    async with CodeEnv(TaskSet.from_dir(make_task().parent), scaffold=scaffold) as env:
        episode = await rollout(env, OraclePolicy.from_tasks(env.tasks))
    assert episode.reward == 1.0, episode.end.error
    assert [c["kind"] for c in episode.info["executions"]] == ["llm", "llm", "command"]
    assert our_processes() == []


async def test_concurrent_sandbox_episodes_share_one_proxy(make_task):
    tasks = TaskSet.from_dir(make_task().parent)
    scaffold = ExternalScaffold(command=AGENT_COMMAND)
    started = []

    async def episode(i: int):
        async with CodeEnv(tasks, scaffold=scaffold) as env:
            ts = await env.reset()
            started.append(scaffold._own_proxy)
            answer = bash_action(f"echo {40 + i % 3} > /app/answer.txt")
            ts = await env.step(answer)
            return await env.step(SUBMIT_ACTION) if not ts.last() else ts

    results = await asyncio.gather(*(episode(i) for i in range(6)))
    assert [ts.reward for ts in results] == [1.0 if i % 3 == 2 else 0.0 for i in range(6)]
    assert len({id(p) for p in started}) == 1 and await proxy_stopped(scaffold)
    assert our_processes() == []


async def test_command_failure_is_an_error_episode(make_task):
    tasks = TaskSet.from_dir(make_task().parent)
    scaffold = ExternalScaffold(command=AGENT_COMMAND)
    policy = ScriptedPolicy([bash_action("echo thinking")] * 10)
    async with CodeEnv(tasks, scaffold=scaffold) as env:
        episode = await rollout(env, policy)
    assert episode.status == "error" and episode.end_reason == "error"
    assert "exited with status 1" in episode.end.error and not episode.end.verified


async def watch_for(marker: str, seen: list[str]) -> None:
    while not seen:
        seen.extend(await asyncio.to_thread(host_processes, marker))
        await asyncio.sleep(0.05)


async def test_agent_timeout_kills_the_harness(make_task):
    marker = f"palaestra-test-{os.getpid()}-sleeper"
    tasks = TaskSet.from_dir(make_task().parent)
    for where in ("sandbox", "host"):
        scaffold = ExternalScaffold(
            command=["bash", "-c", f"exec -a {marker} sleep 600"], where=where
        )
        seen: list[str] = []
        watcher = asyncio.create_task(watch_for(marker, seen))
        async with CodeEnv(tasks, scaffold=scaffold, agent_timeout_sec=1.5) as env:
            with pytest.raises(EpisodeError, match="agent_timeout"):
                await env.reset()
        watcher.cancel()
        assert seen, f"the harness never ran ({where})"
        assert host_processes(marker) == []
    assert our_processes() == []


async def test_host_harness_processes_that_left_its_session_die_with_the_episode(make_task):
    """A host harness that starts a ``setsid`` grandchild (out of its process group, re-parented
    when its parent exits) and one that double-forks a daemon: both die at the agent timeout,
    and when a harness exits normally its leftovers die with it."""
    marker = f"palaestra-test-{os.getpid()}-escaped"
    tasks = TaskSet.from_dir(make_task().parent)
    escape = (
        f"setsid bash -c 'exec -a {marker}-setsid sleep 600' & "
        f"(bash -c 'exec -a {marker}-daemon sleep 600' &) ; "
    )
    for command, agent_timeout in ((escape + "sleep 600", 1.5), (escape + "sleep 0.5", 60.0)):
        scaffold = ExternalScaffold(command=["bash", "-c", command], where="host")
        seen: list[str] = []
        watcher = asyncio.create_task(watch_for(marker, seen))
        async with CodeEnv(tasks, scaffold=scaffold, agent_timeout_sec=agent_timeout) as env:
            episode = await rollout(env, ScriptedPolicy([]))  # it asks nothing: both end
        watcher.cancel()
        assert seen, "the harness never started its grandchildren"
        assert ("time limit" in (episode.end.error or "")) == (agent_timeout < 10), episode.end
        assert host_processes(marker) == [], f"escaped the episode: {host_processes(marker)}"
    assert our_processes() == []


async def test_idle_harness_is_stopped(make_task):
    tasks = TaskSet.from_dir(make_task().parent)
    command = (
        'python3 -c "import json,os,urllib.request as u; '
        "r=u.Request(os.environ['OPENAI_BASE_URL']+'/chat/completions', "
        "json.dumps({'messages':[{'role':'user','content':'hi'}]}).encode(), "
        "{'Content-Type':'application/json'}); u.urlopen(r).read()\" && sleep 600"
    )
    # The idle clock also runs before the first call, while python3 starts in the sandbox: 4 s
    # leaves room for that start on a loaded machine (at 1 s, a load of 10 ended the episode
    # before its first request).
    scaffold = ExternalScaffold(command=command, idle_timeout_s=4.0)
    async with CodeEnv(tasks, scaffold=scaffold) as env:
        episode = await rollout(env, ScriptedPolicy(["no bash block at all"]))
    assert episode.end_reason == "agent_timeout" and episode.truncated
    assert "made no call for 4 s" in episode.info["executions"][-1]["message"]
    assert our_processes() == []


def test_bad_configs_are_named():
    with pytest.raises(ValueError, match="needs a command"):
        ExternalScaffold()
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \{instructions\}"):
        ExternalScaffold(command="agent --task {instructions}")
    with pytest.raises(ValueError, match="exist only with where='host'"):
        ExternalScaffold(command="agent --exec {exec_url}")
    with pytest.raises(ValueError, match="where must be"):
        ExternalScaffold(command="x", where="cloud")
    with pytest.raises(ValueError, match="mounts are for where='sandbox'"):
        ExternalScaffold(command="x", where="host", mounts=host_python_mounts())
    # other braces are left alone
    scaffold = ExternalScaffold(command="awk '{print $1}' {instruction_file}")
    assert scaffold.config.command.startswith("awk")


async def test_a_sandbox_without_the_proxy_mount_is_refused(make_task):
    scaffold = ExternalScaffold(command=AGENT_COMMAND)
    task = TaskSet.from_dir(make_task().parent)[0]
    backend = make_backend("local")
    sandbox = await backend.create(SandboxSpec())
    try:
        with pytest.raises(RuntimeError, match="cannot reach its proxy.*sandbox_mounts"):
            await scaffold.run(task, sandbox, NopPolicy())
    finally:
        await sandbox.close()
        await backend.aclose()
    assert await proxy_stopped(scaffold)


def test_a_scaffold_used_again_from_a_new_event_loop_starts_a_new_proxy(make_task, monkeypatch):
    """The proxy lingers after an episode; an asyncio.run that returns leaves it unserved. The
    same scaffold in a second asyncio.run must not hand that dead proxy to its episode (the
    harness would wait on a socket nobody accepts on)."""
    monkeypatch.setattr(external, "PROXY_LINGER_S", 60.0)  # still lingering when the loop ends
    tasks = TaskSet.from_dir(make_task().parent)
    scaffold = ExternalScaffold(command=AGENT_COMMAND)
    proxies = []

    async def episode() -> float:
        async with CodeEnv(tasks, scaffold=scaffold) as env:
            played = await rollout(env, OraclePolicy.from_tasks(env.tasks))
        proxies.append(scaffold._own_proxy)
        return played.reward

    assert asyncio.run(episode()) == 1.0
    assert asyncio.run(asyncio.wait_for(episode(), 60)) == 1.0
    assert proxies[0] is not proxies[1] and proxies[0]._sockets == []
    asyncio.run(scaffold.aclose())
    assert scaffold._own_proxy is None
