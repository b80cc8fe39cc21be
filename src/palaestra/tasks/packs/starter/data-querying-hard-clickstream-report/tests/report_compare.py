"""The hidden test's comparison of a report (the harness's ``function`` comparison): every
number of the reference's report, revenue within a cent, the median session within half a
second, counts exact; the report is the JSON file the program wrote."""

import json


def compare(want, got, path="report"):
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object, got {str(got)[:80]}"
        if set(want) != set(got):
            missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            return f"{path}: keys differ (missing {missing[:5]}, unexpected {extra[:5]})"
        for k in want:
            problem = compare(want[k], got[k], f"{path}.{k}")
            if problem:
                return problem
        return None
    if not isinstance(got, int | float) or isinstance(got, bool):
        return f"{path}: expected a number, got {str(got)[:80]}"
    tol = 0.011 if leaf.startswith("revenue") or "revenue_eur_by_country" in path else (
        0.5 if leaf == "median_session_seconds" else 0)
    if abs(got - want) > tol:
        return f"{path}: expected {want}, got {got}"
    return None


def check(ck, label, want, got, options):
    """One check a warehouse: the program's report.json against the reference's."""
    text = (got.get("files") or {}).get("report.json")
    if text is None:
        ck.check(label, False, "report.py wrote no regular file OUT_JSON")
        return
    try:
        report = json.loads(text)
    except ValueError as e:
        ck.check(label, False, f"the report is not JSON: {e}")
        return
    problem = compare(json.loads(want["files"]["report.json"]), report)
    ck.check(label, problem is None, problem or "")
