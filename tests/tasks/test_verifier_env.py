"""Harbor's verifier modes resolved as Harbor 0.26 resolves them (verifier_mode.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from palaestra.tasks import TaskConfig
from palaestra.tasks.verifier_env import verifier_environment, verifier_mode


def config(**verifier: object) -> TaskConfig:
    return TaskConfig.model_validate(
        {"environment": {"docker_image": "agent:1", "cpus": 2}, "verifier": verifier}
    )


@pytest.mark.parametrize(
    ("verifier", "mode"),
    [
        ({}, "shared"),
        ({"environment_mode": "separate"}, "separate"),
        ({"environment": {"docker_image": "grader:1"}}, "separate"),  # implied
        ({"environment_mode": "shared"}, "shared"),
    ],
)
def test_mode(verifier: dict[str, object], mode: str) -> None:
    assert verifier_mode(config(**verifier)) == mode


def test_shared_mode_has_no_verifier_environment(tmp_path: Path) -> None:
    assert verifier_environment(config(), tmp_path) is None


def test_a_verifier_image_holds_its_own_tests(tmp_path: Path) -> None:
    found = verifier_environment(config(environment={"docker_image": "grader:1"}), tmp_path)
    assert found is not None and found.bundled_tests
    assert found.config.docker_image == "grader:1" and found.directory == tmp_path / "tests"


def test_tests_dockerfile_is_built_with_tests_as_its_context(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    found = verifier_environment(config(environment_mode="separate"), tmp_path)
    assert found is not None and found.bundled_tests and found.config.docker_image is None
    assert found.directory == tmp_path / "tests" and found.config.cpus == 2  # [environment]'s


def test_without_a_definition_the_agents_environment_starts_afresh(tmp_path: Path) -> None:
    found = verifier_environment(config(environment_mode="separate"), tmp_path)
    assert found is not None and not found.bundled_tests  # tests/ is uploaded
    assert found.directory == tmp_path / "environment" and found.config.docker_image == "agent:1"
