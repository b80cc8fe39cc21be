"""The ``crm`` family: a small CRM of contacts, deals and notes.

Tiers: easy asks for one edit of a named contact; medium for every open deal of a company, or a
contact who changed company; hard for a rule over a company's accounts (their open deals'
total against a threshold) plus a new contact. The goal is the exact final state.
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
    params,
    state_scenario,
    string,
)

# Word pools: packed, they read as the lists they are.
FIRST = ("Ada", "Ben", "Cleo", "Dev", "Eva", "Finn", "Gia", "Hugo", "Iris", "Jon", "Kai", "Lena",
         "Milo", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Umar", "Vera")  # fmt: skip
LAST = ("Adams", "Brook", "Chen", "Diaz", "Evans", "Fox", "Gray", "Hale", "Ito", "Jones", "Khan",
        "Lopez", "Moss", "Novak", "Ortiz", "Park")  # fmt: skip
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wonka")
PRODUCTS = ("licences", "support plan", "onboarding", "hardware", "renewal", "training")
OPEN = ("lead", "qualified", "proposal")
STAGES = (*OPEN, "won", "lost")
CONTACTS = {"easy": 6, "medium": 12, "hard": 18}


def _contact(state: State, contact_id: str) -> dict[str, Any]:
    if contact_id not in state["contacts"]:
        raise ToolError(f"no contact {contact_id!r}; find ids with search_contacts")
    return state["contacts"][contact_id]


def _search(state: State, args: dict[str, Any]) -> str:
    q = args["query"].lower()
    hits = [
        {"id": cid, **{k: c[k] for k in ("name", "company", "email")}}
        for cid, c in sorted(state["contacts"].items())
        if q in f"{c['name']} {c['company']} {c['email']}".lower()
    ]
    return dumps(hits)


def _get(state: State, args: dict[str, Any]) -> str:
    cid = args["contact_id"]
    return dumps({"id": cid, **_contact(state, cid), "notes": state["notes"].get(cid, [])})


def _deals(state: State, args: dict[str, Any]) -> str:
    cid = args["contact_id"]
    _contact(state, cid)
    deals = [
        {"id": did, **d} for did, d in sorted(state["deals"].items()) if d["contact_id"] == cid
    ]
    return dumps(deals)


def _update_contact(state: State, args: dict[str, Any]) -> str:
    _contact(state, args["contact_id"])[args["field"]] = args["value"]
    return "Updated."


def _update_deal(state: State, args: dict[str, Any]) -> str:
    deal = state["deals"].get(args["deal_id"])
    if deal is None:
        raise ToolError(f"no deal {args['deal_id']!r}; list a contact's deals with list_deals")
    deal["stage"] = args["stage"]
    return "Updated."


def _add_note(state: State, args: dict[str, Any]) -> str:
    _contact(state, args["contact_id"])
    state["notes"].setdefault(args["contact_id"], []).append(args["text"])
    return "Note added."


def _create(state: State, args: dict[str, Any]) -> str:
    if any(c["email"] == args["email"] for c in state["contacts"].values()):
        raise ToolError(f"a contact with email {args['email']!r} exists already")
    cid = f"c{len(state['contacts']) + 1:02d}"
    state["contacts"][cid] = {
        "name": args["name"],
        "email": args["email"],
        "company": args["company"],
        "phone": "",
    }
    return dumps({"id": cid})


TOOLS = [
    Tool(
        "search_contacts",
        "Find contacts whose name, company or email contains the query (case-insensitive).",
        params(["query"], query=string("Text to look for.")),
        _search,
    ),
    Tool(
        "get_contact",
        "A contact's details and notes.",
        params(["contact_id"], contact_id=string("Contact id, e.g. c03.")),
        _get,
    ),
    Tool(
        "list_deals",
        "The deals of a contact.",
        params(["contact_id"], contact_id=string("Contact id.")),
        _deals,
    ),
    Tool(
        "update_contact",
        "Set one field of a contact.",
        params(
            ["contact_id", "field", "value"],
            contact_id=string("Contact id."),
            field=string("Field to set.", enum=["email", "phone", "company"]),
            value=string("New value."),
        ),
        _update_contact,
    ),
    Tool(
        "update_deal",
        "Move a deal to another stage.",
        params(
            ["deal_id", "stage"],
            deal_id=string("Deal id, e.g. d07."),
            stage=string("New stage.", enum=list(STAGES)),
        ),
        _update_deal,
    ),
    Tool(
        "add_note",
        "Append a note to a contact.",
        params(["contact_id", "text"], contact_id=string("Contact id."), text=string("The note.")),
        _add_note,
    ),
    Tool(
        "create_contact",
        "Create a contact; returns its id.",
        params(
            ["name", "email", "company"],
            name=string("Full name."),
            email=string("Email address."),
            company=string("Company."),
        ),
        _create,
    ),
]


def _world(rng: random.Random, tier: str) -> State:
    names = rng.sample([f"{f} {la}" for f in FIRST for la in LAST], CONTACTS[tier])
    companies = list(COMPANIES[: 3 + CONTACTS[tier] // 6])
    state: State = {"contacts": {}, "deals": {}, "notes": {}}
    for i, name in enumerate(names, 1):
        company = companies[i % len(companies)]
        handle = name.lower().replace(" ", ".")
        state["contacts"][f"c{i:02d}"] = {
            "name": name,
            "company": company,
            "email": f"{handle}@{company.lower()}.com",
            "phone": f"+1-555-{rng.randrange(1000, 10000)}",
        }
        for _ in range(rng.choice((1, 1, 2, 3))):
            state["deals"][f"d{len(state['deals']) + 1:02d}"] = {
                "contact_id": f"c{i:02d}",
                "title": f"{company} {rng.choice(PRODUCTS)}",
                "amount": rng.randrange(10, 200) * 100,
                "stage": rng.choice(STAGES),
            }
    return state


def _open_deals(state: State, cid: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (did, d)
        for did, d in sorted(state["deals"].items())
        if d["contact_id"] == cid and d["stage"] in OPEN
    ]


def _at(state: State, company: str) -> list[str]:
    return [cid for cid, c in sorted(state["contacts"].items()) if c["company"] == company]


def _task(rng: random.Random, tier: str, state: State) -> tuple[str, list[Call]]:
    contacts = state["contacts"]
    cid = rng.choice(sorted(contacts))
    c = contacts[cid]
    if tier == "easy":
        if rng.random() < 0.5:
            email = f"{c['name'].split()[0].lower()}@{rng.choice(COMPANIES).lower()}.io"
            return (
                f"Change the email address of {c['name']} to {email}.",
                [("update_contact", {"contact_id": cid, "field": "email", "value": email})],
            )
        text = f"Called on {rng.choice(['Monday', 'Tuesday', 'Friday'])}: wants a quote."
        return (
            f'Add the note "{text}" to {c["name"]}\'s record.',
            [("add_note", {"contact_id": cid, "text": text})],
        )
    company = c["company"]
    if tier == "medium":
        calls = [
            ("update_deal", {"deal_id": did, "stage": "won"})
            for other in _at(state, company)
            for did, _ in _open_deals(state, other)
        ]
        if rng.random() < 0.5 and calls:
            return (
                f"All open deals (stage lead, qualified or proposal) of contacts at {company} "
                "were won: set their stage to won.",
                calls,
            )
        new = rng.choice([x for x in COMPANIES if x != company])
        text = f"Moved from {company} to {new}."
        return (
            f'{c["name"]} now works at {new}: update their company and add the note "{text}".',
            [
                ("update_contact", {"contact_id": cid, "field": "company", "value": new}),
                ("add_note", {"contact_id": cid, "text": text}),
            ],
        )
    totals = {o: sum(d["amount"] for _, d in _open_deals(state, o)) for o in _at(state, company)}
    threshold = sorted(totals.values())[len(totals) // 2] // 100 * 100
    plan: list[Call] = []
    for other, total in totals.items():
        if total > threshold:
            did, _ = max(_open_deals(state, other), key=lambda item: (item[1]["amount"], item[0]))
            plan += [
                ("update_deal", {"deal_id": did, "stage": "won"}),
                ("add_note", {"contact_id": other, "text": "Priority account"}),
            ]
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}-{rng.randrange(10, 99)}"
    email = f"{name.split()[0].lower()}.new@{company.lower()}.com"
    plan.append(("create_contact", {"name": name, "email": email, "company": company}))
    return (
        f"For every contact at {company} whose open deals (stage lead, qualified or "
        f"proposal) total more than ${threshold}, set their largest open deal's stage to won "
        'and add the note "Priority account" to them. Then create the contact '
        f"{name} <{email}> at {company}.",
        plan,
    )


def build(rng: random.Random, tier: str) -> Scenario:
    state = _world(rng, tier)
    instruction, solution = _task(rng, tier, state)
    return state_scenario(instruction, state, TOOLS, solution)
