#!/bin/sh
# Hidden verifier: palaestra_harness.py runs the agent's code in child processes and writes
# /logs/verifier/reward.json ({"reward": 0|1, "partial": fraction of checks passed}).
# The agent's code runs as nobody: it can neither read /tests (the reference) nor
# write /logs/verifier (palaestra_check makes both root's, and removes an old reward,
# when imported). The checker's interpreter is named by its path, not found on PATH;
# it needs nothing but the standard library (-S: no site-packages, no .pth files).
# palaestra_launch runs it after forking the server of its children (palaestra_fork),
# and ends it after 110 s (an alarm: no timeout process to start).
cd /tests
for python in /usr/local/bin/python3 /usr/bin/python3; do [ -x "$python" ] && break; done
"$python" -E -s -S -B /tests/palaestra_launch.py --alarm 110 /tests/palaestra_harness.py
status=$?
if [ "$status" -eq 142 ]; then echo "the checker ran out of its 110 s (SIGALRM)"; fi
if [ "$status" -ne 0 ] || [ ! -s /logs/verifier/reward.json ]; then
  echo "checker exited with status $status before writing a reward: reward 0"
  mkdir -p /logs/verifier
  echo '{"reward": 0.0, "partial": 0.0}' > /logs/verifier/reward.json
fi
exit 0
