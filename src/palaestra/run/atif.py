"""ATIF export: a stored episode as an Agent Trajectory Interchange Format document (v1.8).

ATIF is Harbor's trajectory format, which Harbor, NeMo Gym and trajectory viewers read. The
documents are built with the models of the ``atif`` package (``pip install
'palaestra[atif]'``), so each one is validated by them as it is made. The mapping:

* the opening messages of the conversation become ``system`` and ``user`` steps (the system
  prompt is step 1);
* each turn is one ``agent`` step: the response's text, its tool calls (arguments parsed; a
  malformed argument string is kept in the call's ``extra.raw_arguments``), the model, and
  ``metrics`` with the token counts, cost, and ``prompt_token_ids``, ``completion_token_ids``
  and ``logprobs`` when the policy returned them (``policy_version`` in ``metrics.extra``);
* the messages the environment added after a turn (tool results, command output, format-error
  guidance) are that agent step's ``observation``; a tool result names its call
  (``source_call_id``). The last turn has no next request: its observation is the output in
  the scaffold's record of executing it. That record (exit codes, durations, commands) is the
  step's ``extra.execution``;
* a conversation the scaffold rewrote (``messages_from`` 0 after turn 0: a compaction) is
  repeated as steps with ``is_copied_context``;
* the tools offered are ``agent.tool_definitions`` (a turn that offered others has them in
  its ``extra.tool_definitions``); the reward, its breakdown and how the episode ended are in
  ``final_metrics.extra``; the run's and episode's facts in the document's ``extra``.

Recorded activations are left out (their size is a model's hidden width per token).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palaestra.run.store import palaestra_version, read_episodes, read_run, read_steps

if TYPE_CHECKING:
    import atif

ATIF_VERSION = "ATIF-v1.8"
INSTALL_HINT = "ATIF export needs the atif package: pip install 'palaestra[atif]'"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: The episode columns a document's ``extra`` carries as they are.
_EPISODE_FACTS = (
    "task_id",
    "family",
    "category",
    "difficulty",
    "attempt",
    "seed",
    "steps",
    "sandbox_start_s",
    "agent_s",
    "policy_s",
    "verifier_s",
    "wall_s",
    "finished_at",
)


def _atif() -> Any:
    try:
        import atif
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return atif


def write_atif(run_dir: Path | str, out_dir: Path | str) -> int:
    """Write one ``<episode-id>.json`` ATIF document per final episode of ``run_dir`` into
    ``out_dir`` (made if missing); return how many."""
    _atif()  # the missing package is named before anything is read or written
    run = read_run(run_dir)
    episodes = read_episodes(run_dir)
    steps = read_steps(run_dir)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; ATIF export writes a directory: pass -o DIRECTORY")
    out.mkdir(parents=True, exist_ok=True)
    for episode in episodes:
        document = to_atif(run, episode, steps.get(episode["id"], []))
        name = episode["episode_id"] or ""
        name = name if _SAFE_ID.fullmatch(name) else f"episode-{episode['id']}"
        text = json.dumps(document.to_json_dict(), indent=2, ensure_ascii=False)
        (out / f"{name}.json").write_text(text + "\n", encoding="utf-8")
    return len(episodes)


def to_atif(
    run: dict[str, Any], episode: dict[str, Any], steps: list[dict[str, Any]]
) -> atif.Trajectory:
    """The ATIF document of one stored episode: ``run`` as :func:`read_run` returns it,
    ``episode`` as :func:`read_episodes` does, ``steps`` its rows from :func:`read_steps`."""
    a = _atif()
    built: list[dict[str, Any]] = []  # step fields; made into models once numbered
    tools: list[dict[str, Any]] | None = None
    previous: dict[str, Any] | None = None  # the agent step of the turn before
    executed: dict[str, Any] | None = None  # the scaffold's record of running it
    for row in steps:
        messages = row["new_messages"]
        if previous is not None and row["messages_from"] > 0:
            if messages and messages[0].get("role") == "assistant":
                messages = messages[1:]  # the previous turn's answer: its agent step
            previous["observation"] = _observation(messages, previous)
            messages = []
        elif previous is not None:  # the conversation was rewritten: repeat it as context
            previous["observation"] = _executed(executed, previous)
        built.extend(_message_step(m, copied=previous is not None) for m in messages)
        if row["tools"] is not None and tools is None:
            tools = row["tools"]
        agent = _agent_step(row["response"], row["execution"])
        if row["tools"] is not None and row["tools"] != tools:
            agent.setdefault("extra", {})["tool_definitions"] = row["tools"]
        built.append(agent)
        previous, executed = agent, row["execution"]
    if previous is not None:
        previous["observation"] = _executed(executed, previous)
    models = [
        a.Step(step_id=i, **{k: v for k, v in s.items() if k != "_call_ids"})
        for i, s in enumerate(built, start=1)
    ]
    responses = [r["response"] for r in steps]
    model = next((r["model"] for r in responses if r.get("model")), None) or run["policy"]
    return a.Trajectory(
        schema_version=ATIF_VERSION,
        session_id=run["run_id"],
        trajectory_id=episode["episode_id"],
        agent=a.Agent(
            name="palaestra",
            version=run.get("palaestra_version") or palaestra_version(),
            model_name=model,
            tool_definitions=tools or None,
            extra={"scaffold": run["scaffold"], "policy": run["policy"]},
        ),
        steps=models,
        final_metrics=_final_metrics(a, episode, len(models)),
        extra=_episode_facts(run, episode),
    )


def _text(content: Any) -> Any:
    """A message's content as ATIF holds it: a string, or content parts (text and images)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append({"type": "text", "text": str(part.get("text", ""))})
            elif isinstance(part, dict) and part.get("type") == "image_url":
                parts.append(_image(part.get("image_url")))
            else:
                parts.append({"type": "text", "text": json.dumps(part)})
        return parts
    return json.dumps(content)


def _image(image_url: Any) -> dict[str, Any]:
    url = image_url.get("url", "") if isinstance(image_url, dict) else str(image_url)
    match = re.match(r"data:(image/(?:jpeg|png|gif|webp))[;,]", url)
    media_type = match.group(1) if match else "image/png"
    return {"type": "image", "source": {"media_type": media_type, "path": url}}


def _tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls as ATIF holds them, from the stored response's (``name``, ``arguments``) or
    an OpenAI message's (``function.name``, ``function.arguments``)."""
    result = []
    for call in calls:
        function = call.get("function") or call
        raw = function.get("arguments", "{}")
        entry: dict[str, Any] = {
            "tool_call_id": str(call.get("id", "")),
            "function_name": str(function.get("name", "")),
        }
        try:
            arguments = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except (json.JSONDecodeError, RecursionError):
            arguments = None
        if isinstance(arguments, dict):
            entry["arguments"] = arguments
        else:  # the model wrote no JSON object: ATIF needs one, the text is kept beside it
            entry["arguments"] = {}
            entry["extra"] = {"raw_arguments": raw}
        result.append(entry)
    return result


def _message_step(message: dict[str, Any], *, copied: bool) -> dict[str, Any]:
    role = message.get("role")
    source = {"system": "system", "assistant": "agent"}.get(str(role), "user")
    step: dict[str, Any] = {"source": source, "message": _text(message.get("content"))}
    if source == "agent":
        step["llm_call_count"] = 0  # a message in the context, not an answer of this episode
        if message.get("tool_calls"):
            step["tool_calls"] = _tool_calls(message["tool_calls"])
    if role not in ("system", "user", "assistant"):  # a tool result in a rewritten context
        step["extra"] = {"role": role, "tool_call_id": message.get("tool_call_id")}
    if copied:
        step["is_copied_context"] = True
    return step


def _agent_step(response: dict[str, Any], execution: dict[str, Any] | None) -> dict[str, Any]:
    usage = response.get("usage", {})
    metrics: dict[str, Any] = {
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "cached_tokens": usage.get("cached_tokens", 0),
    }
    for key in ("cost_usd", "prompt_token_ids", "completion_token_ids", "logprobs"):
        if response.get(key) is not None:
            metrics[key] = response[key]
    extra_metrics = {k: v for k in ("reasoning_tokens",) if (v := usage.get(k))}
    if response.get("policy_version") is not None:
        extra_metrics["policy_version"] = response["policy_version"]
    if extra_metrics:
        metrics["extra"] = extra_metrics
    calls = _tool_calls(response.get("tool_calls", []))
    step: dict[str, Any] = {
        "source": "agent",
        "message": response.get("content") or "",
        "metrics": metrics,
        "llm_call_count": 1,
        "extra": {"finish_reason": response.get("finish_reason")},
        "_call_ids": {c["tool_call_id"] for c in calls},
    }
    if response.get("model"):
        step["model_name"] = response["model"]
    if calls:
        step["tool_calls"] = calls
    if execution is not None:
        step["extra"]["execution"] = _execution(execution)
    return step


def _execution(record: dict[str, Any]) -> dict[str, Any]:
    """The scaffold's record of a turn, less what the step already holds (the turn, the
    response's text, each call's arguments and output)."""
    kept = {k: v for k, v in record.items() if k not in ("turn", "content")}
    if isinstance(kept.get("tool_calls"), list):
        kept["tool_calls"] = [
            {k: v for k, v in c.items() if k not in ("arguments", "output")}
            if isinstance(c, dict)
            else c
            for c in kept["tool_calls"]
        ]
    return kept


def _result(content: Any, call_id: Any, step: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"content": _text(content)}
    if call_id is not None and call_id in step["_call_ids"]:
        result["source_call_id"] = call_id
    elif call_id is not None:  # names no call of this step: kept, unlinked
        result["extra"] = {"tool_call_id": call_id}
    return result


def _observation(messages: list[dict[str, Any]], step: dict[str, Any]) -> dict[str, Any] | None:
    """What the environment said after ``step``: the messages the next request added."""
    results = []
    for message in messages:
        result = _result(message.get("content"), message.get("tool_call_id"), step)
        if message.get("role") != "tool":
            result.setdefault("extra", {})["role"] = message.get("role")
        results.append(result)
    return {"results": results} if results else None


def _executed(execution: dict[str, Any] | None, step: dict[str, Any]) -> dict[str, Any] | None:
    """The observation of a turn no request followed: the output in the scaffold's record."""
    if not execution:
        return None
    calls = execution.get("tool_calls")
    if isinstance(calls, list):
        results = [_result(c["output"], c.get("id"), step) for c in calls if "output" in c]
    elif isinstance(execution.get("output"), str):
        results = [_result(execution["output"], None, step)]
    else:
        results = []
    return {"results": results} if results else None


def _final_metrics(a: Any, episode: dict[str, Any], steps: int) -> atif.FinalMetrics:
    return a.FinalMetrics(
        total_prompt_tokens=episode["prompt_tokens"],
        total_completion_tokens=episode["completion_tokens"],
        total_cached_tokens=episode["cached_tokens"],
        total_cost_usd=episode["cost_usd"],
        total_steps=steps,
        extra={
            "reward": episode["reward"],
            "rewards": episode["rewards"],
            "status": str(episode["status"]),
            "end_reason": str(episode["end_reason"]) if episode["end_reason"] else None,
            "verified": episode["verified"],
            "error_class": episode["error_class"],
            "error_message": episode["error_message"],
            "verifier_output": episode["verifier_output"],
        },
    )


def _episode_facts(run: dict[str, Any], episode: dict[str, Any]) -> dict[str, Any]:
    return {
        "producer": "palaestra",
        "run_id": run["run_id"],
        "env_id": run["env_id"],
        "sandbox": run["sandbox"],
        "episode_id": episode["episode_id"],
        **{k: episode[k] for k in _EPISODE_FACTS},
    }
