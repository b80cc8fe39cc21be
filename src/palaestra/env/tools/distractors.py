"""Distractor tools: realistic tools no task needs, declared beside a scenario's own tools.

They test context confusion: with more tools declared, does the policy still pick the right
ones? Each answers deterministically from its arguments (a checksum picks the canned value) and
never touches the episode's state, so calling one costs a step but cannot spoil the goal.
:func:`distractors` picks ``n`` of them for a task, the same ones every time.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

from palaestra.env.tools.tool import Tool, dumps, integer, params, string


def _pick(args: dict[str, Any], options: list[Any]) -> Any:
    return options[zlib.crc32(dumps(args).encode()) % len(options)]


def _canned(key: str, options: list[Any]) -> Callable[[Any, dict[str, Any]], str]:
    return lambda state, args: dumps({key: _pick(args, options), "request": args})


POOL: tuple[Tool, ...] = (
    Tool(
        "get_weather",
        "Current weather for a city.",
        params(["city"], city=string("City name.")),
        _canned("weather", ["sunny, 21C", "rain, 12C", "cloudy, 16C", "snow, -2C"]),
    ),
    Tool(
        "convert_currency",
        "Convert an amount between currencies at today's rate.",
        params(
            ["amount", "from_currency", "to_currency"],
            amount=integer("Amount."),
            from_currency=string("ISO code, e.g. USD."),
            to_currency=string("ISO code, e.g. EUR."),
        ),
        _canned("rate", [0.92, 1.08, 0.79, 151.3]),
    ),
    Tool(
        "send_sms",
        "Send a text message to a phone number.",
        params(["phone", "text"], phone=string("E.164 number."), text=string("Message.")),
        _canned("status", ["queued", "sent"]),
    ),
    Tool(
        "translate_text",
        "Translate text into another language.",
        params(["text", "language"], text=string("Text."), language=string("Target, e.g. fr.")),
        _canned("translation", ["(translated text)"]),
    ),
    Tool(
        "search_web",
        "Search the web and return the top result's title.",
        params(["query"], query=string("Search terms.")),
        _canned("top_result", ["Wikipedia", "A news article", "A forum thread"]),
    ),
    Tool(
        "get_stock_price",
        "Latest price of a stock ticker.",
        params(["ticker"], ticker=string("Ticker symbol.")),
        _canned("price", [101.2, 87.5, 342.0, 12.9]),
    ),
    Tool(
        "create_ticket",
        "Open a support ticket in the helpdesk.",
        params(
            ["title"],
            title=string("Ticket title."),
            priority=string("Priority.", enum=["low", "normal", "high"]),
        ),
        _canned("ticket", ["T-1042", "T-2210", "T-3001"]),
    ),
    Tool(
        "lookup_postcode",
        "The city of a postcode.",
        params(["postcode"], postcode=string("Postcode.")),
        _canned("city", ["Leeds", "Lyon", "Porto", "Graz"]),
    ),
    Tool(
        "set_reminder",
        "Set a personal reminder (not a calendar event).",
        params(
            ["text", "minutes"], text=string("Reminder text."), minutes=integer("Minutes from now.")
        ),
        _canned("reminder", ["set"]),
    ),
    Tool(
        "get_time_zone",
        "The time zone of a city.",
        params(["city"], city=string("City name.")),
        _canned("time_zone", ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo"]),
    ),
    Tool(
        "summarize_text",
        "Summarize a text in one sentence.",
        params(["text"], text=string("Text to summarize.")),
        _canned("summary", ["(a one-sentence summary)"]),
    ),
    Tool(
        "check_spelling",
        "Spell-check a text and list misspelled words.",
        params(["text"], text=string("Text.")),
        _canned("misspelled", [[], ["recieve"], ["seperate", "occured"]]),
    ),
)

#: The most distractor tools a task can declare.
MAX_DISTRACTORS = len(POOL)


def distractors(task_id: str, n: int, taken: set[str]) -> list[Tool]:
    """``n`` distractor tools for ``task_id`` (the same ones every time), none named in
    ``taken``; a ValueError when ``n`` is out of range."""
    pool = [t for t in POOL if t.name not in taken]
    if not 0 <= n <= len(pool):
        raise ValueError(f"distractors={n}: choose 0 to {len(pool)} distractor tools")
    return random.Random(f"{task_id}/distractors").sample(pool, n)
