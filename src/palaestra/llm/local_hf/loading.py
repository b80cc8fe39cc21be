"""Loading a local Hugging Face checkpoint: the ``local`` extra, the model directory, the device
and dtype, the tokenizer's chat template and the end-of-sequence and padding ids.

torch and transformers are imported by the functions that need them, never at import time.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def require_local_extra() -> None:
    """Fail clearly when torch or transformers (the ``local`` extra) is not installed."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"HFLocalPolicy needs {' and '.join(missing)}: pip install 'palaestra[local]' "
            "(on a CPU-only machine install torch's CPU wheel first)"
        )


def model_directory(model_dir: str | Path) -> Path:
    """``model_dir`` as a path, checked to be a saved model (it holds ``config.json``)."""
    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise ValueError(
            f"{path} is not a model directory (no config.json); point hf:<dir> at "
            "a directory saved with save_pretrained (weights, config and tokenizer)"
        )
    return path


def default_device() -> str:
    """``cuda`` when available, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(source: Path, *, dtype: str | None, device: str | None) -> Any:
    """The causal LM saved in ``source``, cast to ``dtype`` (default: the checkpoint's), on
    ``device``, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source)
    if dtype is not None:
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise ValueError(f"dtype={dtype!r} is not a torch dtype; use e.g. float32 or bfloat16")
        model = model.to(torch_dtype)
    return model.to(device).eval()


@dataclass
class Checkpoint:
    """A loaded tokenizer and model, with the token ids generation needs."""

    tokenizer: Any
    model: Any
    eos_ids: set[int]  # every id that ends a completion
    pad_id: int
    context: int | None  # the model's maximum positions, when its config names them


def load_checkpoint(
    model_dir: Path, *, device: str, dtype: str | None, chat_template: str | None
) -> Checkpoint:
    """The tokenizer (with ``chat_template`` when given; it must have one) and the model."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if not tokenizer.chat_template:
        raise ValueError(
            f"the tokenizer in {model_dir} has no chat template; add `chat_template` to "
            "its tokenizer_config.json or pass HFLocalPolicy(chat_template=...)"
        )
    model = load_model(model_dir, dtype=dtype, device=device)
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    if tokenizer.eos_token_id is not None:
        eos_ids.add(tokenizer.eos_token_id)
    if not eos_ids:
        raise ValueError(f"{model_dir} names no eos token; set eos_token in its tokenizer")
    return Checkpoint(
        tokenizer=tokenizer,
        model=model,
        eos_ids=eos_ids,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids),
        context=getattr(model.config, "max_position_embeddings", None),
    )
