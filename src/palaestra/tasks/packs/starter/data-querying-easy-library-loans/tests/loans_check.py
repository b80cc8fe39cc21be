"""Scores /app/answers.json (what the harness's ``state`` answer read of it, without following
links, a regular file only, capped) key by key against the answers the spec fixed from
``library_data`` when it was built: one check a question, the reward their fraction."""

import json
import math


def same(key, want, got):
    if key == "avg_loan_days":
        return (isinstance(got, (int, float)) and not isinstance(got, bool)
                and math.isfinite(got) and abs(got - want) <= 0.006)
    if isinstance(want, int):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and got == want
    if isinstance(want, dict):
        return (isinstance(got, dict) and set(got) == set(want)
                and all(same("", want[k], got[k]) for k in want))
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            same("", w, g) for w, g in zip(want, got))
    return got == want


def answers(got):
    """The JSON object in the file, or a reason why there is none."""
    if got["type"] != "file" or got["text"] is None:
        return None, "/app/answers.json is not a regular file (found: %s)" % got["type"]
    try:
        value = json.loads(got["text"])
    except ValueError as e:
        return None, "cannot read /app/answers.json: %s" % e
    if not isinstance(value, dict):
        return None, "answers.json is not a JSON object"
    return value, ""


def check(ck, label, want, got, opts):
    """One check a key of ``want`` (the expected answers): a missing, linked, non-regular or
    malformed file fails them all."""
    value, why = answers(got)
    for key, expected in want.items():
        if value is None:
            ck.check(key, False, why)
            continue
        ok = key in value and same(key, expected, value[key])
        ck.check(key, ok, "" if ok else "got " + str(value.get(key, "<missing>"))[:200])
