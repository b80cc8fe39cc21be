"""Tasks in the Harbor format: load them, check them, and lay out their environments."""

from palaestra.sandbox.dockerfile_replay import LocalEnvironmentPlan
from palaestra.tasks.harbor import Task, TaskConfig, TaskError, load_task, load_tasks

__all__ = ["LocalEnvironmentPlan", "Task", "TaskConfig", "TaskError", "load_task", "load_tasks"]
