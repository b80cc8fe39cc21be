"""A randomly initialised tiny model, written with no download, for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path

TINY_CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n# Tools\n{{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{{ m.content if m.content is string else '' }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_TINY_CORPUS = """\
You are a skilled software engineer working in a Linux shell to complete a task.
Every response must contain EXACTLY ONE bash code block with the command(s) to run.
```bash
ls -la && cat README.md | head -n 20 && python3 -m pytest -q tests/
```
def solve(values: list[int]) -> int:
    return sum(v for v in values if v % 2 == 0)
<returncode>0</returncode> <output>ok</output> echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT
"""


def write_tiny_model(
    path: str | Path,
    *,
    vocab_size: int = 320,
    hidden_size: int = 32,
    num_layers: int = 2,
    max_positions: int = 8192,
    seed: int = 0,
) -> Path:
    """Write a randomly initialised tiny Llama and a byte-level BPE tokenizer to ``path``.

    Built from a config and trained on a few lines of text, with no download: for smoke tests,
    benchmarks of the serving path and CI. Its output is noise.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    specials = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_TINY_CORPUS.splitlines(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
