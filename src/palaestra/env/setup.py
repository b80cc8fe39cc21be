"""Between a task's sandbox starting and its agent starting, as Harbor's trial does it.

1. ``[environment.healthcheck]`` runs until it passes (:mod:`palaestra.env.healthcheck`);
2. with an ``[agent] user`` (the task's or a step's), the agent's conventional directories are
   opened to that user (:func:`palaestra.env.agent_user.open_agent_dirs`);
3. a multi-step task's first step is set up (:func:`palaestra.env.steps.begin_step`).

Any failure closes the sandbox and is raised: the agent never gets it.
"""

from __future__ import annotations

from palaestra.env.agent_user import open_agent_dirs
from palaestra.env.healthcheck import run_healthcheck
from palaestra.env.steps import begin_step
from palaestra.sandbox.base import Sandbox
from palaestra.tasks import Task


async def set_up(sandbox: Sandbox, task: Task, current: Task) -> None:
    """Steps 1 to 3 for ``task`` in ``sandbox``; ``current`` is what the agent starts on (the
    task, or its first step)."""
    try:
        if task.healthcheck is not None:
            await run_healthcheck(sandbox, task.healthcheck)
        if any(unit.agent_user is not None for unit in (task, *task.steps)):
            await open_agent_dirs(sandbox)
        if current.step is not None:
            await begin_step(current, sandbox, first=True)
    except BaseException:
        await sandbox.close()
        raise
