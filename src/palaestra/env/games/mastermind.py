"""The ``mastermind`` family: break a hidden code from exact/misplaced feedback.

The code is ``pegs`` letters from the first ``colors`` letters of the alphabet (repeats
allowed). ``guess(code)`` answers how many letters are right and in place (exact) and how many
more are right but elsewhere (misplaced); a malformed code is refused without costing a guess.
Tiers: longer codes over more letters. The goal: the code guessed before the guesses run out.
"""

from __future__ import annotations

import random
import string as strings
from collections import Counter
from typing import Any

from palaestra.env.tools.tool import Scenario, State, Tool, ToolError, params, string

#: (pegs, colors, guesses) per tier.
TIERS = {"easy": (3, 4, 10), "medium": (4, 6, 10), "hard": (5, 8, 10)}


def feedback(secret: str, guess: str) -> tuple[int, int]:
    """(exact, misplaced) of ``guess`` against ``secret``."""
    exact = sum(a == b for a, b in zip(secret, guess, strict=True))
    common = sum((Counter(secret) & Counter(guess)).values())
    return exact, common - exact


def _guess(state: State, args: dict[str, Any]) -> str:
    if state["solved"] or state["left"] == 0:
        raise ToolError("the game is over")
    code, pegs, letters = args["code"].strip().upper(), len(state["secret"]), state["letters"]
    if len(code) != pegs or not set(code) <= set(letters):
        raise ToolError(f"a code is {pegs} letters from {letters}, e.g. {letters[0] * pegs}")
    state["left"] -= 1
    exact, misplaced = feedback(state["secret"], code)
    if exact == pegs:
        state["solved"] = True
        return f"{code}: solved! You win."
    return f"{code}: exact {exact}, misplaced {misplaced} ({state['left']} guesses left)"


TOOLS = [
    Tool(
        "guess",
        "Try a code; returns how many letters are exact and how many misplaced.",
        params(["code"], code=string("The code, e.g. ABCA.")),
        _guess,
    ),
]


def build(rng: random.Random, tier: str) -> Scenario:
    pegs, colors, guesses = TIERS[tier]
    letters = strings.ascii_uppercase[:colors]
    secret = "".join(rng.choice(letters) for _ in range(pegs))
    state = {"secret": secret, "letters": letters, "left": guesses, "solved": False}
    instruction = (
        f"Let's play Mastermind. I hid a code of {pegs} letters, each one of {letters} "
        f"(letters may repeat). Call `guess` with a code; I answer how many letters are right "
        f"and in the right place (exact) and how many more are right but in another place "
        f"(misplaced). You have {guesses} guesses to find the code."
    )
    return Scenario(
        instruction,
        state,
        list(TOOLS),
        lambda s: s["solved"],
        [("guess", {"code": secret})],
        over=lambda s: s["solved"] or s["left"] == 0,
    )
