"""The ``twenty-questions`` family: find the hidden object by yes/no questions.

The instruction lists the candidates and the properties the other side knows; the policy calls
``ask(question)`` and ``guess(name)``, each costing one question of the budget. The other side
is scripted from a hidden object table: it answers a question naming exactly one property
(word-bounded, case-insensitive) with yes or no, and any other question with "I can't answer
that" (which still costs the question). With a ``simulator`` and ``simulate="all"``
(:class:`~palaestra.env.tools.env.ToolEnv`), an LLM plays the other side instead, from the
hidden object and its row of the table; the table still decides the guesses. Tiers: more
candidates and fewer questions. The goal: the object guessed before the questions run out.
"""

from __future__ import annotations

import random
import re
from typing import Any

from palaestra.env.tools.tool import Scenario, State, Tool, ToolError, dumps, params, string

#: Each property's phrase (what a question must contain) and the objects that have it.
PROPERTIES = {
    "plant": {"apple", "carrot", "oak tree", "rose", "coconut"},
    "animal": {
        "dog",
        "horse",
        "whale",
        "eagle",
        "penguin",
        "goldfish",
        "shark",
        "bee",
        "ant",
        "parrot",
    },
    "mammal": {"dog", "horse", "whale"},
    "insect": {"bee", "ant"},
    "fly": {"eagle", "bee", "parrot", "airplane", "drone"},
    "water": {"whale", "penguin", "goldfish", "shark", "submarine", "sailboat"},
    "bigger than a person": {
        "horse",
        "whale",
        "shark",
        "oak tree",
        "refrigerator",
        "car",
        "airplane",
        "submarine",
        "sailboat",
    },
    "edible": {"apple", "carrot", "bread", "ice cream", "coconut"},
    "electronic": {"toaster", "refrigerator", "smartphone", "laptop", "drone"},
    "wheels": {"bicycle", "car", "skateboard", "airplane"},
    "metal": {
        "toaster",
        "refrigerator",
        "laptop",
        "bicycle",
        "car",
        "spoon",
        "airplane",
        "submarine",
    },
    "kitchen": {"apple", "carrot", "bread", "toaster", "refrigerator", "spoon"},
    "pet": {"dog", "goldfish", "parrot"},
    "grows on trees": {"apple", "coconut"},
}
OBJECTS = sorted({"chair", "ice cream", "smartphone", "skateboard"}.union(*PROPERTIES.values()))
#: Candidates listed and questions allowed, per tier.
TIERS = {"easy": (6, 12), "medium": (12, 10), "hard": (24, 8)}
_PATTERNS = {p: re.compile(rf"\b{re.escape(p)}", re.IGNORECASE) for p in PROPERTIES}


def row(name: str) -> dict[str, bool]:
    """The hidden table's row of ``name``: each property, yes or no."""
    return {p: name in objects for p, objects in PROPERTIES.items()}


def _turn(state: State) -> None:
    if state["solved"] or state["left"] == 0:
        raise ToolError("the game is over")
    state["left"] -= 1


def _ask(state: State, args: dict[str, Any]) -> str:
    _turn(state)
    named = [p for p, pattern in _PATTERNS.items() if pattern.search(args["question"])]
    if len(named) != 1:
        answer = "I can't answer that: ask about exactly one of the listed properties."
    else:
        answer = "Yes." if state["secret"] in PROPERTIES[named[0]] else "No."
    return f"{answer} ({state['left']} questions left)"


def _guess(state: State, args: dict[str, Any]) -> str:
    _turn(state)
    if args["name"].strip().lower() == state["secret"]:
        state["solved"] = True
        return f"Yes! It is {state['secret']}. You win."
    return f"No, it is not {args['name']}. ({state['left']} questions left)"


TOOLS = [
    Tool(
        "ask",
        "Ask the other side a yes/no question (costs one question).",
        params(["question"], question=string("A yes/no question about the object.")),
        _ask,
    ),
    Tool(
        "guess",
        "Guess the object (costs one question; a right guess wins).",
        params(["name"], name=string("One of the candidates.")),
        _guess,
    ),
]


def build(rng: random.Random, tier: str) -> Scenario:
    n, questions = TIERS[tier]
    candidates = sorted(rng.sample(OBJECTS, n))
    secret = rng.choice(candidates)
    state = {"secret": secret, "left": questions, "solved": False}
    instruction = (
        f"Let's play twenty questions. I am thinking of one of these objects: "
        f"{', '.join(candidates)}. Find it by calling `ask` with yes/no questions and `guess` "
        f"with its name. You have {questions} questions in all, guesses included. I understand "
        f"questions containing exactly one of these phrases: {'; '.join(PROPERTIES)} (for "
        'example: "Is it an animal?", "Is it bigger than a person?", "Can it fly?").'
    )
    sample = dumps(
        {
            "secret_object": secret,
            "properties": row(secret),
            "rule": "answer yes or no, and how many questions are left",
        }
    )
    return Scenario(
        instruction,
        state,
        list(TOOLS),
        lambda s: s["solved"],
        [("guess", {"name": secret})],
        sample,
        over=lambda s: s["solved"] or s["left"] == 0,
    )
