"""Self-play proposals whose tests run agent code outside the shipped checker's jail are refused
with the reason (issue 29, item 5): statically, per line, and through the whole validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palaestra.run.validate import validate_proposal
from palaestra.sandbox import default_backend
from palaestra.tasks.proposal import forbidden, parse_proposal, write_proposal
from palaestra.tasks.proposal_jail import RUNTIME, outside_the_jail

REWARD = "echo $r > /logs/verifier/reward.txt\n"


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("test.sh", "python3 /app/solve.py > /tmp/o\n", "hands a file of /app to an interpreter"),
        ("test.sh", "out=$(bash /app/run.sh)\n", "hands a file of /app to an interpreter"),
        ("test.sh", "if /app/prog --x; then r=1; fi\n", "executes a path under /app"),
        ("test.sh", "r=0; timeout 5 /app/prog && r=1\n", "executes a path under /app"),
        ("test.sh", "source /app/env.sh\n", "sources a file of /app"),
        ("test.sh", "PYTHONPATH=/app python3 -c 'import sol'\n", "puts /app on PYTHONPATH"),
        ("test.sh", "cd /app\npython3 -m pkg > /tmp/o\n", "imports code of /app (after cd /app)"),
        ("test.sh", "cd /app && ./build.sh\n", "executes a program of /app (after cd /app)"),
        ("test.sh", "cd /app; node main.js\n", "runs a file of /app (after cd /app)"),
        ("t.py", "import subprocess\n", "starts a process outside palaestra_check"),
        ("t.py", "os.system('x')\n", "starts a process outside palaestra_check"),
        ("t.py", "sys.path.insert(0, '/app')\n", "puts /app on sys.path"),
        ("t.py", "mod = importlib.import_module('sol')\n", "loads code outside palaestra_check"),
        ("t.py", "exec(open('/app/sol.py').read())\n", "loads code outside palaestra_check"),
    ],
)
def test_agent_code_run_outside_the_jail_is_refused_with_the_line(name, text, why) -> None:
    (problem,) = outside_the_jail({name: "# a test\n" + text})
    line = 1 + len(text.splitlines())  # the last one
    assert problem.startswith(f"tests/{name} line {line} {why}"), problem
    assert "palaestra_check.run_command / run_python" in problem


@pytest.mark.parametrize(
    "text",
    [
        'test "$(cat /app/sum.txt)" = 17 && r=1 || r=0\n',
        "grep -q banana /app/out.txt && r=1 || r=0\ncmp -s /app/a /tests/b\n",
        "[ -e /app/out.txt ] && r=1\nsort /app/x | head -1\n",
        "python3 -E -s -S -B /tests/palaestra_launch.py /tests/test_x.py\n",
        "cd /app && python3 -E -s -S -B /tests/palaestra_launch.py /tests/test_x.py\n",
    ],
)
def test_reading_what_the_solver_wrote_or_the_checker_is_fine(text: str) -> None:
    assert outside_the_jail({"test.sh": text}) == []


def test_a_python_test_through_palaestra_check_is_fine() -> None:
    test = (
        "import re\nfrom palaestra_check import Checker, run_command\n"
        "ck = Checker()\nres = run_command(['python3', '/app/sum.py'], cwd='/app')\n"
        "ck.equal('sum', re.compile(r'\\d+').findall(res.stdout), ['17'])\nck.finish()\n"
    )
    assert outside_the_jail({"test_sum.py": test}) == []


SUM_BY_PROGRAM = {
    "id": "sum-program",
    "instruction": "Write /app/sum.py: it prints the sum of the integers of /app/numbers.txt.",
    "files": {"numbers.txt": "3\n4\n10\n"},
    "solution": "#!/bin/bash\ncat > /app/sum.py <<'E'\n"
    "print(sum(int(x) for x in open('/app/numbers.txt')))\nE\n",
    "outputs": ["sum.py"],
}
JAILED_TESTS = {
    "test.sh": "#!/bin/bash\nexec python3 -E -s -S -B /tests/palaestra_launch.py "
    "/tests/test_sum.py\n",
    "test_sum.py": "from palaestra_check import Checker, run_command\nck = Checker()\n"
    "res = run_command(['python3', '/app/sum.py'], cwd='/app', timeout=20)\n"
    "ck.equal('the sum', res.stdout.strip(), '17')\nck.finish()\n"
    "# writes /logs/verifier/reward.json\n",
}
OPEN_TESTS = {
    "test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
    '[ "$(python3 /app/sum.py)" = 17 ] && r=1 || r=0\n' + REWARD
}


def test_the_runtime_is_shipped_with_every_proposal_that_uses_it(tmp_path: Path) -> None:
    proposal = parse_proposal(json.dumps({**SUM_BY_PROGRAM, "tests": JAILED_TESTS}))
    assert forbidden(proposal) == []
    task = write_proposal(proposal, tmp_path / "t")
    assert {p.name for p in (task / "tests").iterdir()} >= RUNTIME | {"test_sum.py"}
    reading = {"test.sh": "grep -q 17 /app/sum.txt && r=1 || r=0\n" + REWARD}
    plain = parse_proposal(json.dumps({**SUM_BY_PROGRAM, "tests": reading}))
    task = write_proposal(plain, tmp_path / "u")
    assert {p.name for p in (task / "tests").iterdir()} == {"test.sh"}


@pytest.mark.slow
async def test_validation_refuses_the_open_tests_and_accepts_the_jailed_ones(tmp_path) -> None:
    backend = default_backend("local")
    answer = "```json\n" + json.dumps({**SUM_BY_PROGRAM, "tests": OPEN_TESTS}) + "\n```"
    refused = await validate_proposal(answer, tmp_path / "open", backend)
    assert refused.reason == "forbidden" and not refused.accepted
    assert "hands a file of /app to an interpreter" in refused.detail, refused.detail
    answer = "```json\n" + json.dumps({**SUM_BY_PROGRAM, "tests": JAILED_TESTS}) + "\n```"
    accepted = await validate_proposal(answer, tmp_path / "jailed", backend)
    assert accepted.accepted, (accepted.reason, accepted.detail)
