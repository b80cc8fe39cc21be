"""The ``calendar`` family: a team's week of one-hour-grid events.

Events run on whole hours between 9 and 18, Monday to Friday; a person cannot be in two events
at once (``create_event`` and ``move_event`` refuse a clash). Tiers: easy cancels a named
event; medium moves one to a free slot it names; hard books the earliest slot two people both
have free. The goal is the exact final set of events.
"""

from __future__ import annotations

import random
from typing import Any

from palaestra.env.tools.tool import (
    Call,
    Scenario,
    State,
    Tool,
    ToolError,
    dumps,
    integer,
    params,
    state_scenario,
    string,
)

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
OPENS, CLOSES = 9, 18
PEOPLE = ("ana", "bo", "cy", "dee", "eli", "fay", "gus", "hal")
# Word pools: packed, they read as the lists they are.
TITLES = ("Standup", "Design review", "1:1", "Planning", "Retro", "Interview", "Demo",
          "Budget sync", "Customer call", "Hiring panel", "Roadmap", "Lunch and learn")  # fmt: skip
EVENTS = {"easy": 8, "medium": 16, "hard": 26}


def _busy(state: State, person: str, day: str, hour: int, skip: str = "") -> bool:
    return any(
        eid != skip
        and e["day"] == day
        and e["start"] <= hour < e["end"]
        and person in e["attendees"]
        for eid, e in state["events"].items()
    )


def _check_slot(state: State, event: dict[str, Any], skip: str = "") -> None:
    if not (OPENS <= event["start"] < event["end"] <= CLOSES):
        raise ToolError(f"events run between {OPENS}:00 and {CLOSES}:00 and end after they start")
    for person in event["attendees"]:
        for hour in range(event["start"], event["end"]):
            if _busy(state, person, event["day"], hour, skip):
                raise ToolError(f"{person} is busy on {event['day']} at {hour}:00")


def _event(state: State, event_id: str) -> dict[str, Any]:
    if event_id not in state["events"]:
        raise ToolError(f"no event {event_id!r}; see list_events")
    return state["events"][event_id]


def _list(state: State, args: dict[str, Any]) -> str:
    day, person = args.get("day"), args.get("person")
    return dumps(
        [
            {"id": eid, **e}
            for eid, e in sorted(state["events"].items())
            if day in (None, e["day"]) and person in (None, *e["attendees"])
        ]
    )


def _create(state: State, args: dict[str, Any]) -> str:
    event = {
        "title": args["title"],
        "day": args["day"],
        "start": args["start"],
        "end": args["start"] + args.get("hours", 1),
        "attendees": sorted(set(args["attendees"])),
    }
    _check_slot(state, event)
    eid = f"e{len(state['events']) + 1:02d}"
    while eid in state["events"]:  # ids of cancelled events are never reused
        eid = f"{eid}x"
    state["events"][eid] = event
    return dumps({"id": eid})


def _cancel(state: State, args: dict[str, Any]) -> str:
    _event(state, args["event_id"])
    del state["events"][args["event_id"]]
    return "Cancelled."


def _move(state: State, args: dict[str, Any]) -> str:
    event = _event(state, args["event_id"])
    moved = {
        **event,
        "day": args["day"],
        "start": args["start"],
        "end": args["start"] + event["end"] - event["start"],
    }
    _check_slot(state, moved, skip=args["event_id"])
    event.update(moved)
    return "Moved."


DAY = string("Day of the week.", enum=list(DAYS))
START = integer(f"Start hour, {OPENS} to {CLOSES - 1}.")
TOOLS = [
    Tool(
        "list_events",
        "List events, optionally of one day and/or one person.",
        params([], day=DAY, person=string("Attendee name.")),
        _list,
    ),
    Tool(
        "create_event",
        "Book an event; refused when an attendee is busy.",
        params(
            ["title", "day", "start", "attendees"],
            title=string("Title."),
            day=DAY,
            start=START,
            hours=integer("Length in hours (default 1)."),
            attendees={
                "type": "array",
                "items": {"type": "string"},
                "description": "Attendee names.",
            },
        ),
        _create,
    ),
    Tool(
        "cancel_event",
        "Cancel an event.",
        params(["event_id"], event_id=string("Event id, e.g. e04.")),
        _cancel,
    ),
    Tool(
        "move_event",
        "Move an event to another day and start hour (same length).",
        params(["event_id", "day", "start"], event_id=string("Event id."), day=DAY, start=START),
        _move,
    ),
]


def _world(rng: random.Random, tier: str) -> State:
    state: State = {"events": {}}
    titles_days: set[tuple[str, str]] = set()
    while len(state["events"]) < EVENTS[tier]:
        title, day = rng.choice(TITLES), rng.choice(DAYS)
        start = rng.randrange(OPENS, CLOSES - 1)
        event = {
            "title": title,
            "day": day,
            "start": start,
            "end": start + rng.choice((1, 1, 2)),
            "attendees": sorted(rng.sample(PEOPLE, rng.randrange(1, 4))),
        }
        if (title, day) in titles_days or event["end"] > CLOSES:
            continue
        try:
            _check_slot(state, event)
        except ToolError:
            continue
        titles_days.add((title, day))
        state["events"][f"e{len(state['events']) + 1:02d}"] = event
    return state


def _free(state: State, people: list[str], day: str, hours: int = 1, skip: str = "") -> list[int]:
    return [
        h
        for h in range(OPENS, CLOSES - hours + 1)
        if not any(_busy(state, p, day, x, skip) for p in people for x in range(h, h + hours))
    ]


def _task(rng: random.Random, tier: str, state: State) -> tuple[str, list[Call]] | None:
    events = state["events"]
    eid = rng.choice(sorted(events))
    e = events[eid]
    when = f'"{e["title"]}" on {e["day"]}'
    if tier == "easy":
        return f"Cancel {when}.", [("cancel_event", {"event_id": eid})]
    if tier == "medium":
        length = e["end"] - e["start"]
        day = rng.choice([d for d in DAYS if d != e["day"]])
        slots = _free(state, e["attendees"], day, length, skip=eid)
        if not slots:
            return None
        start = rng.choice(slots)
        return (
            f"Move {when} to {day} at {start}:00 (keep its length).",
            [("move_event", {"event_id": eid, "day": day, "start": start})],
        )
    a, b = sorted(rng.sample(PEOPLE, 2))
    day = rng.choice(DAYS)
    slots = _free(state, [a, b], day)
    if not slots:
        return None
    title = f"{a.title()}/{b.title()} sync"
    return (
        f'Book a one-hour event titled "{title}" for {a} and {b} on {day}, at the '
        f"earliest whole hour ({OPENS}:00 to {CLOSES - 1}:00) when neither has an event.",
        [("create_event", {"title": title, "day": day, "start": slots[0], "attendees": [a, b]})],
    )


def build(rng: random.Random, tier: str) -> Scenario:
    while True:  # a draw with no free slot is redrawn (rarely), from the same generator
        state = _world(rng, tier)
        if (task := _task(rng, tier, state)) is not None:
            break
    instruction, solution = task
    return state_scenario(instruction, state, TOOLS, solution)
