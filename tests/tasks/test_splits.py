"""Training and evaluation tasks held out by construction: the two splits of ``shell-warmup``
and ``shell-lookup`` share no instruction and no word of their vocabularies, some kinds occur
only in evaluation, the check a benchmark runs finds an overlap when there is one, and a
``shell-lookup`` task never states in its prompt the value its checker wants."""

from __future__ import annotations

import re

import pytest

from palaestra.tasks import generators as g
from palaestra.tasks.generators.file_operations import shell_lookup, shell_warmup
from palaestra.tasks.generators.splits import (
    HELD_OUT_FIRST_SEED,
    kinds,
    overlapping_instructions,
    split_of,
    vocabulary,
)

FAMILIES = ("shell-warmup", "shell-lookup")
TRAIN = range(0, 150)
EVAL = range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + 150)


def instructions(family: str, seeds: range, tier: str) -> list[str]:
    return [g.generate(family, s, g.tier_difficulty(tier, s)).instruction for s in seeds]


def told(family: str, seeds: range, tier: str) -> list[str]:
    """What a task tells the agent: its instruction, and the notes of its workspace that
    quote something (``shell-lookup`` writes the task itself in one)."""
    out = []
    for s in seeds:
        task = g.generate(family, s, g.tier_difficulty(tier, s))
        out += [task.instruction, *(str(v) for v in task.workspace.values() if "`" in str(v))]
    return out


def quoted(text: str) -> set[str]:
    """The words of the instruction's quoted parts (paths split at / and .)."""
    return {w for part in re.findall(r"`([^`]*)`", text) for w in re.split(r"[/.\s,!()]+", part)}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tier", g.TIERS)
def test_no_evaluation_instruction_or_word_occurs_in_training(family, tier):
    assert not set(instructions(family, TRAIN, tier)) & set(instructions(family, EVAL, tier))
    train, held_out = told(family, TRAIN, tier), told(family, EVAL, tier)
    # Quoted words shared by both splits are the task's fixed frame only (the same in every
    # task of a kind), never a word drawn from a vocabulary.
    frame = {
        "",
        "app",
        "txt",
        "bash",
        "cat",
        "mkdir",
        "-p",
        "echo",
        "rm",
        ">",
        "count",
        "found",
        "answer",
        "settings",
        "ini",
    }
    frame |= {
        "log",
        "py",
        "greet",
        "sh",
        "Hello",
        "a",
        "b",
        "the",
        "sum",
        "of",
        "minus",
        "product",
        "and",
    }
    shared = set.union(*map(quoted, train)) & set.union(*map(quoted, held_out))
    assert shared <= frame, shared - frame


def test_the_vocabularies_of_the_splits_are_disjoint():
    for field in ("words", "names", "dirs", "exts", "tags", "ops"):
        train = set(getattr(shell_warmup._TRAIN, field))
        held_out = set(getattr(shell_warmup._HELD_OUT, field))
        assert not train & held_out, field
    for lists in (shell_lookup._POINTERS, shell_lookup._VALUES, shell_lookup._WORDS):
        assert not set(lists[0]) & set(lists[1])
    with pytest.raises(ValueError, match=r"split vocabularies overlap: \['b'\]"):
        vocabulary(0, ["a", "b"], ["b", "c"])


@pytest.mark.parametrize(
    ("family", "held_out_kind"),
    [("shell-warmup", "Move (rename) the file"), ("shell-lookup", "Delete the file")],
)
def test_a_kind_of_task_occurs_only_in_evaluation(family, held_out_kind):
    train, held_out = told(family, TRAIN, "easy"), told(family, EVAL, "easy")
    assert not any(held_out_kind in text for text in train)
    assert sum(held_out_kind in text for text in held_out) > len(held_out) // 8


def test_splits_by_seed():
    assert split_of(HELD_OUT_FIRST_SEED - 1) == "train" and split_of(HELD_OUT_FIRST_SEED) == "eval"
    assert kinds(0, ["a"], ["b"]) == ["a"] and kinds(HELD_OUT_FIRST_SEED, ["a"], ["b"]) == [
        "a",
        "b",
    ]


@pytest.mark.slow
def test_the_benchmark_check_finds_an_overlap():
    train = g.pack(families_=["shell-lookup"], tiers=("easy",), seeds=range(0, 20))
    held_out = g.pack(families_=["shell-lookup"], tiers=("easy",), seeds=EVAL[:20])
    assert overlapping_instructions(train, held_out) == []
    again = g.pack(families_=["shell-lookup"], tiers=("easy",), seeds=range(15, 25))
    overlap = overlapping_instructions(train, again)
    assert overlap and all(o in {t.instruction.strip() for t in train} for o in overlap)


#: The value each kind's reference command uses that the agent must read in the sandbox.
VALUE = re.compile(
    r"mkdir -p /app/(\w+)$|> /app/(\w+)\.txt$|^rm /app/(\w+)\.txt$|^cp /app/\w+/(\w+)\.txt|"
    r"^echo (\d+) > /app/answer\.txt$"
)


@pytest.mark.parametrize("seeds", [TRAIN[:60], EVAL[:60]], ids=["train", "eval"])
def test_a_lookup_prompt_never_holds_the_value_to_read(seeds):
    for seed in seeds:
        for tier in g.TIERS:
            task = g.generate("shell-lookup", seed, g.tier_difficulty(tier, seed))
            command = task.solution["solve.sh"].strip().splitlines()[-1]
            match = VALUE.search(command)
            assert match, command
            value = next(v for v in match.groups() if v)
            assert value not in re.findall(r"\w+", task.instruction), (seed, tier, value)
