"""Tasks in the Harbor format: the ``task.toml`` schema, the loaded task, and the loader.

* :mod:`palaestra.tasks.config`: the schema (pydantic models; TOML in and out);
* :mod:`palaestra.tasks.task`: :class:`Task`, a loaded task directory;
* :mod:`palaestra.tasks.loader`: :func:`load_task`, :func:`load_tasks` and their checks;
* :mod:`palaestra.tasks.errors`: :class:`TaskError`, one clear line per problem.
"""

from palaestra.tasks.config import TaskConfig
from palaestra.tasks.errors import TaskError
from palaestra.tasks.loader import load_task, load_tasks
from palaestra.tasks.task import Task

__all__ = ["Task", "TaskConfig", "TaskError", "load_task", "load_tasks"]
