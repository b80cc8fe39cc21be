"""The reward of a synthesised task, from the pytest plugin's report (standard library only).

``python palaestra_synth_verdict.py REPORT TESTS_JSON``: reward 1 when every test of
``fail_to_pass`` and ``pass_to_pass`` passed, else 0; ``partial`` is the fraction that passed.
Writes ``/logs/verifier/reward.json`` and prints the tests that did not pass.
"""

import json
import os
import sys


def main(report_path: str, tests_path: str, out: str = "/logs/verifier/reward.json") -> None:
    with open(tests_path, encoding="utf-8") as f:
        tests = json.load(f)
    wanted = tests["fail_to_pass"] + tests["pass_to_pass"]
    try:
        with open(report_path, encoding="utf-8") as f:
            outcomes = json.load(f)["outcomes"]
    except (OSError, ValueError, KeyError) as e:
        print(f"no pytest report ({e}): reward 0")
        outcomes = {}
    passed = [t for t in wanted if outcomes.get(t) == "passed"]
    for test in wanted:
        if outcomes.get(test) != "passed":
            print(f"{outcomes.get(test, 'not run')}: {test}")
    reward = 1.0 if wanted and len(passed) == len(wanted) else 0.0
    print(f"{len(passed)} of {len(wanted)} checked tests passed: reward {reward:g}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"reward": reward, "partial": len(passed) / max(1, len(wanted))}, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
