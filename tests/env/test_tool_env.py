"""ToolEnv end to end: the generated tool-use and game packs, their oracle and nop, malformed
calls, the distractor knob, determinism, LLM-simulated tools, eval and the CLI."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import warnings
from collections.abc import Callable

import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from typer.testing import CliRunner

from palaestra.cli import app
from palaestra.env.checker import check_env
from palaestra.env.games import mastermind, twenty_questions
from palaestra.env.gym import GymAdapter
from palaestra.env.registry import load_tasks, make, make_policy
from palaestra.env.tools import ToolEnv
from palaestra.env.tools import pack as tool_pack
from palaestra.env.tools.distractors import POOL
from palaestra.env.tools.env import NO_TOOL_CALL
from palaestra.env.types import EpisodeError
from palaestra.llm import LLMRequest, LLMResponse, ScriptedPolicy
from palaestra.llm.types import ToolCall, Usage
from palaestra.run.evaluate import evaluate
from palaestra.run.rollout import rollout
from palaestra.scaffolds.base import EndReason


def calls(*made: tuple[str, dict | str]) -> LLMResponse:
    """A response making these calls; a str argument is sent as the raw arguments text."""
    return LLMResponse(
        tool_calls=[
            ToolCall(id=f"c{i}", name=name, arguments=a if isinstance(a, str) else json.dumps(a))
            for i, (name, a) in enumerate(made)
        ],
        finish_reason="tool_calls",
    )


SUBMIT = calls(("submit", {}))


def tool_messages(request: LLMRequest) -> list[str]:
    """The tool messages answering the latest response."""
    out = []
    for m in reversed(request.messages):
        if m["role"] != "tool":
            break
        out.append(m["content"])
    return out[::-1]


def names(request: LLMRequest) -> set[str]:
    return {t["function"]["name"] for t in request.tools or ()}


def a_distractor_call(request: LLMRequest) -> tuple[str, dict]:
    """A well-formed call of the first distractor tool ``request`` declares."""
    pool = {t.name for t in POOL}
    fn = next(t["function"] for t in request.tools or () if t["function"]["name"] in pool)
    args = {
        k: (1 if v["type"] == "integer" else v.get("enum", ["x"])[0])
        for k, v in fn["parameters"]["properties"].items()
    }
    return fn["name"], args


@pytest.mark.parametrize("preset", ["tools", "games"])
async def test_oracle_solves_and_nop_fails_every_family_and_tier(preset):
    tasks = load_tasks(preset).select("@0/25")  # 2 seeds of every tier of every family
    assert {t.family for t in tasks} == set(tool_pack.families(preset))
    assert {t.difficulty for t in tasks} == {"easy", "medium", "hard"}
    oracle, nop = make_policy("oracle", tasks), make_policy("nop")
    async with make(preset, tasks=tasks) as env:
        for task in tasks:
            won = await rollout(env, oracle, options={"task_id": task.id})
            lost = await rollout(env, nop, options={"task_id": task.id})
            assert (won.reward, won.status, won.end.verified) == (1.0, "passed", True), task.id
            assert (lost.reward, lost.status) == (0.0, "failed"), task.id
            assert won.info["category"] == preset and won.info["family"] == task.family


async def test_conforms_to_check_env_and_gymnasium():
    await check_env(make("tools/crm:0:4"))
    tasks = load_tasks("games/mastermind:0:3")
    await check_env(make("games/mastermind:0:3", tasks=tasks), make_policy("oracle", tasks))
    env = GymAdapter(make("tools/files:0:2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gymnasium_check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["end"].reason == EndReason.SUBMITTED
    env.close()


def _crm_solver(request: LLMRequest) -> LLMResponse:
    """Solves crm-easy-1 ("Add the note ... to Lena Moss's record") by looking the contact up."""
    turn = request.metadata["turn"]
    note = request.messages[1]["content"].split('"')[1]
    if turn == 0:
        return calls(("search_contacts", {"query": "Lena Moss"}))
    if turn == 1:
        (hit,) = json.loads(tool_messages(request)[0])
        return calls(("add_note", {"contact_id": hit["id"], "text": note}), ("submit", {}))
    raise AssertionError("one lookup, one edit")


async def test_a_scripted_policy_solves_by_using_the_tools_and_a_wrong_edit_fails():
    env = make("tools/crm")
    won = await rollout(env, ScriptedPolicy(_crm_solver), options={"task_id": "crm-easy-1"})
    assert won.reward == 1.0 and len(won.turns) == 2
    record = won.info["executions"][1]["tool_calls"][0]
    assert record["tool"] == "add_note" and record["output"] == "Note added."
    wrong = ScriptedPolicy(
        [calls(("add_note", {"contact_id": "c02", "text": "x"}), ("submit", {}))]
    )
    lost = await rollout(env, wrong, options={"task_id": "crm-easy-1"})
    assert (lost.reward, lost.status, lost.end_reason) == (0.0, "failed", "submitted")


async def test_malformed_calls_are_answered_and_the_format_error_limit_ends_the_episode():
    env = make("tools/crm", max_consecutive_format_errors=3)
    ts = await env.reset(options={"task_id": "crm-easy-1"})
    ts = await env.step(
        calls(
            ("search_contacts", "{not json"),
            ("nope", {}),
            ("get_contact", {"contact_id": 7}),
            ("update_deal", {"deal_id": "d01"}),
            ("list_deals", "[" * 100_000),
            ("update_deal", {"deal_id": "d01", "stage": "sold"}),
        )
    )
    answers = tool_messages(ts.observation)
    assert "not valid JSON" in answers[0] and "no tool named 'nope'" in answers[1]
    assert (
        "'contact_id' must be string" in answers[2] and "missing argument(s): stage" in answers[3]
    )
    assert "nested too deeply" in answers[4] and "one of: lead" in answers[5]
    assert ts.mid() and ts.info["step"] == 1
    ts = await env.step(calls(("get_contact", {"contact_id": "c99"})))  # refused, well formed
    assert tool_messages(ts.observation) == [
        "Error: no contact 'c99'; find ids with search_contacts"
    ]
    assert ts.mid() and not ts.info.get("end")
    ts = await env.step("I refuse to call tools.")
    assert ts.observation.messages[-1] == {"role": "user", "content": NO_TOOL_CALL}
    ts = await env.step(calls(("nope", {})))
    assert ts.mid()  # two in a row so far: the refused call reset the count
    ts = await env.step(LLMResponse(content=""))
    assert ts.last() and ts.terminated and ts.end.reason == EndReason.FORMAT_ERROR_LIMIT
    assert ts.reward == 0.0 and ts.end.verified
    with pytest.raises(EpisodeError):
        await env.step(SUBMIT)


async def test_the_step_limit_truncates_and_still_scores_the_state():
    env = make("tools/files", step_limit=2)
    ts = await env.reset(options={"task_id": "files-easy-0"})
    ((name, args),) = tool_pack.task("files-easy-0").scenario().solution
    ts = await env.step(calls(("list_files", {})))
    ts = await env.step(calls((name, args)))
    assert ts.last() and ts.truncated and ts.discount == 1.0
    assert ts.end.reason == EndReason.STEP_LIMIT and ts.reward == 1.0 and ts.end.verified


async def test_the_distractor_knob_changes_the_declared_tools():
    crm = {
        "search_contacts",
        "get_contact",
        "list_deals",
        "update_contact",
        "update_deal",
        "add_note",
        "create_contact",
        "submit",
    }
    pool = {t.name for t in POOL}
    none = await make("tools/crm", distractors=0).reset(options={"task_id": "crm-hard-2"})
    assert names(none.observation) == crm
    default = await make("tools/crm").reset(options={"task_id": "crm-hard-2"})
    assert len(names(default.observation) - crm) == 8 and names(default.observation) - crm <= pool
    env = make("tools/crm", distractors=5)
    a = await env.reset(options={"task_id": "crm-hard-2"})
    b = await env.reset(options={"task_id": "crm-hard-2"})
    assert len(names(a.observation) - crm) == 5 and a.observation.tools == b.observation.tools
    easy = await make("tools/crm").reset(options={"task_id": "crm-easy-2"})
    assert names(easy.observation) == crm  # the easy tier declares none by default
    with pytest.raises(ValueError, match="distractors=99: choose 0 to 12"):
        make("tools/crm", distractors=99)
    # a distractor answers without touching the state: calling one does not spoil the goal
    ts = await env.reset(options={"task_id": "crm-easy-0"})
    name, args = a_distractor_call(ts.observation)
    ts = await env.step(calls((name, args)))
    assert json.loads(tool_messages(ts.observation)[0])["request"] == args
    ts = await env.step(calls(*tool_pack.task("crm-easy-0").scenario().solution, ("submit", {})))
    assert ts.reward == 1.0


async def test_tasks_are_deterministic_by_seed_and_id():
    env = make("tools")
    first = [await env.reset(seed=7) for _ in range(2)]
    assert first[0].info["task_id"] == first[1].info["task_id"]
    assert first[0].observation == first[1].observation
    for task_id in (
        "crm-hard-3",
        "files-medium-9",
        "calendar-hard-4",
        "mastermind-hard-1",
        "twenty-questions-hard-5",
    ):
        a, b = tool_pack.task(task_id).scenario(), tool_pack.task(task_id).scenario()
        assert (a.instruction, a.state, a.solution) == (b.instruction, b.state, b.solution)
    secrets = {
        tool_pack.task(f"mastermind-medium-{s}").scenario().state["secret"] for s in range(8)
    }
    assert len(secrets) > 4  # seeds differ
    # the presets are open: any seed's id resets, a malformed one is refused by name
    ts = await make("games/mastermind:0:2").reset(options={"task_id": "mastermind-easy-5000"})
    assert ts.info["task_id"] == "mastermind-easy-5000"
    with pytest.raises(KeyError, match="no task 'crm-easy-1'"):
        await make("games/mastermind").reset(options={"task_id": "crm-easy-1"})


async def test_simulated_tools_answer_from_the_simulator_and_are_logged():
    simulator = ScriptedPolicy(
        lambda request: LLMResponse(
            content='{"simulated": true}', usage=Usage(prompt_tokens=50), cost_usd=0.001
        )
    )
    env = make("tools/crm", simulator=simulator, simulate="all", distractors=2)
    tasks = load_tasks("tools/crm")
    episode = await rollout(env, make_policy("oracle", tasks), options={"task_id": "crm-medium-3"})
    assert episode.reward == 1.0  # the goal is checked on the Python state
    records = [r for t in episode.info["executions"] for r in t["tool_calls"]]
    assert all(r["simulated"] and r["output"] == '{"simulated": true}' for r in records[:-1])
    assert records[0]["python_output"] == "Updated." and "simulated" not in records[-1]  # submit
    assert records[0]["simulator_usage"]["prompt_tokens"] == 50
    assert (
        records[0]["simulator_cost_usd"] == 0.001 and episode.cost_usd == 0.0
    )  # not the policy's: the oracle costs nothing
    asked = simulator.requests[0]
    assert asked.metadata["role"] == "tool_simulator" and "Sample data" in asked.system_prompt
    assert asked.messages[-1]["content"].startswith("update_deal(")
    # simulate="distractors": only the distractors go to the simulator
    env = make("tools/crm", simulator=simulator, distractors=3)
    ts = await env.reset(options={"task_id": "crm-easy-0"})
    ts = await env.step(
        calls(a_distractor_call(ts.observation), ("search_contacts", {"query": "a"}))
    )
    simulated, real = tool_messages(ts.observation)
    assert simulated == '{"simulated": true}'
    assert real.startswith('[{"company"')  # a real tool answers from the Python state


async def test_twenty_questions_scripted_or_played_by_an_llm():
    task_id = "twenty-questions-easy-0"
    secret = tool_pack.task(task_id).scenario().state["secret"]
    is_animal = twenty_questions.row(secret)["animal"]
    env = make("games/twenty-questions")
    ts = await env.reset(options={"task_id": task_id})
    assert names(ts.observation) == {"ask", "guess", "submit"}
    ts = await env.step(
        calls(
            ("ask", {"question": "Is it an ANIMAL?"}),
            ("ask", {"question": "Is it a metal animal?"}),
        )
    )
    yes_no, unclear = tool_messages(ts.observation)
    assert yes_no.startswith("Yes." if is_animal else "No.") and "11 questions left" in yes_no
    assert unclear.startswith("I can't answer that") and "10 questions left" in unclear
    wrong = next(o for o in twenty_questions.OBJECTS if o != secret)
    ts = await env.step(calls(*[("guess", {"name": wrong})] * 11))  # one more than left
    assert ts.last() and ts.reward == 0.0 and ts.end.reason == EndReason.SUBMITTED
    assert tool_messages(ts.observation)[-1] == "Error: the game is over"
    # an LLM plays the other side: it sees the hidden object, the table still decides a guess
    answerer = ScriptedPolicy(lambda request: "Yes.")
    env = make("games/twenty-questions", simulator=answerer, simulate="all")
    policy = ScriptedPolicy(
        [
            calls(("ask", {"question": "Would it fit in a shoebox?"})),
            calls(("guess", {"name": secret})),
        ]
    )
    episode = await rollout(env, policy, options={"task_id": task_id})
    assert episode.reward == 1.0 and secret in answerer.requests[0].system_prompt
    assert tool_messages(policy.requests[1]) == ["Yes."]


async def test_mastermind_feedback_and_malformed_codes():
    assert mastermind.feedback("AABC", "ABCA") == (1, 3)
    assert mastermind.feedback("ABCD", "DCBA") == (0, 4)
    env = make("games/mastermind")
    ts = await env.reset(options={"task_id": "mastermind-medium-0"})
    ts = await env.step(calls(("guess", {"code": "ZZZZ"}), ("guess", {"code": "AB"})))
    refused = tool_messages(ts.observation)
    assert all(r.startswith("Error: a code is 4 letters from ABCDEF") for r in refused)
    ts = await env.step(calls(("guess", {"code": "aaaa"})))
    assert "(9 guesses left)" in tool_messages(ts.observation)[0]  # refusals cost no guess


async def test_evaluate_reports_tool_envs_by_category_and_tier():
    summary = await evaluate("games@0/30", "nop", concurrency=2)
    assert summary["episodes"] == 10 and summary["pass_rate"] == 0.0
    assert set(summary["by_category"]) == {"games"}
    assert set(summary["by_difficulty"]) == {"easy", "medium", "hard"}
    assert set(summary["by_family"]) == {"mastermind", "twenty-questions"}
    assert summary["scaffold"] == "toolenv" and summary["sandbox"] == "none"


@pytest.mark.slow
def test_cli_eval_runs_a_tool_env_id(tmp_path):
    cli = [sys.executable, "-m", "palaestra.cli", "eval"]
    proc = subprocess.run(
        [*cli, "tools/calendar:0:6", "-p", "oracle", "--json", "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["episodes"], summary["pass_rate"]) == (6, 1.0)
    refused = subprocess.run(
        [*cli, "tools/calendar:0:6", "--sandbox", "docker"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "runs no scaffold and no sandbox" in refused.stderr


def test_a_tool_env_refuses_a_scaffold_or_sandbox():
    with pytest.raises(ValueError, match="runs no scaffold and no sandbox"):
        ToolEnv(load_tasks("tools:0:1"), sandbox="docker")
    assert isinstance(make("games:0:1"), ToolEnv)


def test_the_tasks_subcommands_refuse_tool_ids_by_name():
    for command in (["list", "tools/crm:0:3"], ["check", "games:0:1"]):
        res = CliRunner().invoke(app, ["tasks", *command])
        said = " ".join(res.output.replace("│", " ").split())  # rich boxes and wraps it
        assert res.exit_code == 2 and "not Harbor tasks: run them with `palaestra eval" in said


def mastermind_solver() -> Callable[[LLMRequest], LLMResponse]:
    """Guesses the first code consistent with every answer so far: reads only the conversation
    (one solver an episode: it narrows its candidates answer by answer)."""
    left: list[str] = []

    def solve(request: LLMRequest) -> LLMResponse:
        text = request.messages[1]["content"]
        if not left:
            pegs = int(re.search(r"code of (\d+) letters", text)[1])
            letters = re.search(r"one of ([A-Z]+)", text)[1]
            left.extend(map("".join, itertools.product(letters, repeat=pegs)))
        if m := re.match(r"([A-Z]+): exact (\d+), misplaced (\d+)", request.last_user_text):
            answer = (int(m[2]), int(m[3]))
            left[:] = [c for c in left if mastermind.feedback(c, m[1]) == answer]
        return calls(("guess", {"code": left[0]}))

    return solve


def twenty_questions_solver() -> Callable[[LLMRequest], LLMResponse]:
    return ask_the_best_split


def ask_the_best_split(request: LLMRequest) -> LLMResponse:
    """Asks about the property splitting the candidates left most evenly (from the public
    table of the module, not the hidden object), then guesses the last one."""
    candidates = request.messages[1]["content"].split("objects: ")[1].split(". Find")[0].split(", ")
    asked = [
        json.loads(c["function"]["arguments"])["question"]
        for m in request.messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls", [])
    ]
    answers = [m["content"] for m in request.messages if m["role"] == "tool"]
    for question, answer in zip(asked, answers, strict=True):
        having = twenty_questions.PROPERTIES[question.removeprefix("Is it ").removesuffix("?")]
        candidates = [c for c in candidates if (c in having) == answer.startswith("Yes")]
    if len(candidates) == 1:
        return calls(("guess", {"name": candidates[0]}))
    split = min(
        twenty_questions.PROPERTIES,
        key=lambda p: abs(
            2 * len(twenty_questions.PROPERTIES[p].intersection(candidates)) - len(candidates)
        ),
    )
    return calls(("ask", {"question": f"Is it {split}?"}))


@pytest.mark.parametrize(
    ("preset", "solver"),
    [
        ("games/twenty-questions", twenty_questions_solver),
        ("games/mastermind@0/25", mastermind_solver),
    ],
)
async def test_the_games_are_won_within_budget_from_the_observations_alone(preset, solver):
    """Every tier's budget suffices for a plain strategy that knows no hidden state."""
    tasks = load_tasks(preset)
    async with make(preset, tasks=tasks) as env:
        for task in tasks:
            episode = await rollout(env, ScriptedPolicy(solver()), options={"task_id": task.id})
            assert episode.reward == 1.0 and episode.end.reason == "submitted", task.id
