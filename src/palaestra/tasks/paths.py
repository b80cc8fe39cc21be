"""Where a Harbor task's parts live inside its environment, as Harbor lays them out.

These paths are part of the format: the verifier uploads ``tests/`` to :data:`TESTS_DIR` and
reads the reward from :data:`VERIFIER_DIR`; an oracle unpacks ``solution/`` to
:data:`SOLUTION_DIR`; the environment makes each of :data:`HARBOR_DIRS` empty and writable
when a task's sandbox starts.
"""

LOGS_DIR = "/logs"
VERIFIER_DIR = "/logs/verifier"
AGENT_LOGS_DIR = "/logs/agent"
ARTIFACTS_DIR = "/logs/artifacts"
"""Harbor's artifact convention directory: what the agent leaves here reaches a separate
verifier (:mod:`palaestra.tasks.verifier_env`)."""
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
HARBOR_DIRS = (LOGS_DIR, VERIFIER_DIR, AGENT_LOGS_DIR, ARTIFACTS_DIR, TESTS_DIR, SOLUTION_DIR)
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
