"""From a task to its sandbox: the local plan of a task's environment (see also
tests/sandbox/test_images.py for specs that need an image build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.env.sandbox_spec import local_plan
from palaestra.sandbox.dockerfile_replay import LocalEnvironmentPlan
from palaestra.tasks import TaskError, load_task
from tests.tasks.test_harbor import write_task


def test_a_compose_file_has_no_local_plan(tmp_path: Path) -> None:
    compose = write_task(tmp_path, "compose", dockerfile=None)
    (compose / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    task = load_task(compose)
    with pytest.raises(TaskError, match="docker-compose environments are not supported"):
        local_plan(task)


def test_local_plan_of_a_task(tmp_path: Path) -> None:
    task_dir = write_task(
        tmp_path,
        toml='[environment]\nworkdir = "/srv"\n',
        dockerfile="FROM python:3.12\nWORKDIR /app\nENV MODE=test\nCOPY app.py .\n",
    )
    (task_dir / "environment" / "app.py").write_text("")
    assert local_plan(load_task(task_dir)) == LocalEnvironmentPlan(
        base_image="python:3.12",
        workdir="/srv",
        env={"MODE": "test"},
        files={"/app/app.py": task_dir / "environment" / "app.py"},
    )


def test_local_plan_errors_name_the_dockerfile_line(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, dockerfile="FROM ubuntu\nWORKDIR /app\n\nRUN make\n"))
    with pytest.raises(TaskError) as info:
        local_plan(task)
    assert info.value.line == 4
    assert str(info.value).startswith(
        f"{task.environment_dir / 'Dockerfile'} line 4: RUN is not supported by the local "
        "sandbox backend"
    )
    assert 'Fix: run this task with sandbox="docker"' in str(info.value)
