"""Loading Harbor task directories: real files in tmp_path, checked against Harbor 0.26.0 (task
schema 1.4; older tasks load through its legacy conversions)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from palaestra.tasks import Task, TaskConfig, TaskError, load_task, load_tasks
from palaestra.tasks.errors import field_label

FULL_TASK_TOML = """\
schema_version = "1.4"
source = "my-dataset"

[task]
name = "my-org/fix-the-build"
version = "1.2.0"
description = "Fix a broken build"
authors = [{ name = "Ada", email = "ada@example.com" }]
keywords = ["build", "c"]

[metadata]
author_name = "Ada"
author_email = "ada@example.com"
difficulty = "Medium"
category = "debugging"
tags = ["c", "make"]
expert_time_estimate_min = 15.0

[verifier]
timeout_sec = 120.0
env = { OPENAI_API_KEY = "${OPENAI_API_KEY}", MODE = "strict" }
user = "root"
network_mode = "public"

[agent]
timeout_sec = 900.0
user = 1000
network_mode = "no-network"

[environment]
build_timeout_sec = 300.0
docker_image = "ghcr.io/my-org/fix-the-build:1"
os = "Linux"
cpus = 2
memory_mb = 4096
storage_mb = 20480
gpus = 0
gpu_types = ["H100"]
env = { LOG_LEVEL = "${LOG_LEVEL:-info}" }
skills_dir = "/skills"
workdir = "/work"
network_mode = "public"

[environment.healthcheck]
command = "test -f /work/ready"
interval_sec = 2.0
retries = 5

[[environment.mcp_servers]]
name = "docs"
transport = "http"
url = "http://localhost:8000/mcp"

[solution]
env = { HINT = "1" }
"""


def write_task(
    root: Path,
    name: str = "task",
    *,
    toml: str | None = "[agent]\ntimeout_sec = 600.0\n",
    instruction: str | None = "Fix the build.\n",
    dockerfile: str | None = "FROM ubuntu:24.04\nWORKDIR /app\n",
    test_sh: bool = True,
    solve_sh: bool = True,
) -> Path:
    """A task directory with the given files; None leaves a file out."""
    task = root / name
    task.mkdir(parents=True)
    if toml is not None:
        (task / "task.toml").write_text(toml)
    if instruction is not None:
        (task / "instruction.md").write_text(instruction)
    (task / "environment").mkdir()
    if dockerfile is not None:
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    (task / "tests").mkdir()
    if test_sh:
        (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    if solve_sh:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\nmake\n")
    return task


def load_error(path: Path) -> TaskError:
    with pytest.raises(TaskError) as info:
        load_task(path)
    return info.value


# --- the schema ------------------------------------------------------------------------------


def test_full_task_toml_loads_every_section(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, toml=FULL_TASK_TOML, dockerfile=None))
    config = task.config
    assert config.schema_version == "1.4" and config.source == "my-dataset"
    assert config.task is not None and config.task.name == "my-org/fix-the-build"
    assert config.task.authors[0].email == "ada@example.com"
    assert config.metadata["expert_time_estimate_min"] == 15.0
    assert config.verifier.env == {"OPENAI_API_KEY": "${OPENAI_API_KEY}", "MODE": "strict"}
    assert config.agent.user == 1000
    environment = config.environment
    assert environment.os == "linux"
    assert environment.healthcheck is not None and environment.healthcheck.retries == 5
    assert environment.healthcheck.timeout_sec == 30.0  # Harbor's default
    assert environment.mcp_servers[0].transport == "streamable-http"
    assert config.solution.env == {"HINT": "1"}
    assert (task.cpus, task.memory_mb, task.storage_mb) == (2.0, 4096, 20480)
    assert task.docker_image == "ghcr.io/my-org/fix-the-build:1"
    assert (task.agent_timeout_sec, task.verifier_timeout_sec) == (900.0, 120.0)
    assert (task.network, task.verifier_network) == ("none", "public")
    assert (task.difficulty, task.category, task.tags) == ("medium", "debugging", ["c", "make"])


def test_full_task_toml_round_trips(tmp_path: Path) -> None:
    config = load_task(write_task(tmp_path, toml=FULL_TASK_TOML, dockerfile=None)).config
    assert TaskConfig.model_validate(config.model_dump()) == config
    assert TaskConfig.model_validate(config.model_dump(mode="json", exclude_none=True)) == config


def test_task_toml_text_round_trips(tmp_path: Path) -> None:
    config = load_task(write_task(tmp_path, toml=FULL_TASK_TOML, dockerfile=None)).config
    assert TaskConfig.model_validate_toml(FULL_TASK_TOML) == config
    assert TaskConfig.model_validate_toml(config.model_dump_toml()) == config
    assert TaskConfig.model_validate_toml(TaskConfig().model_dump_toml()) == TaskConfig()
    odd = TaskConfig.model_validate(
        {
            "metadata": {"weird key": 'a"b\n', "nested": {"x": [1, 2.5, True]}, "inf": math.inf},
            "steps": [{"name": "one", "agent": {"timeout_sec": 5.0}}, {"name": "two"}],
            "artifacts": ["/logs/out.txt", {"source": "/app/x", "exclude": ["*.pyc"]}],
        }
    )
    text = odd.model_dump_toml()
    assert "[[steps]]" in text and '"weird key"' in text
    assert TaskConfig.model_validate_toml(text) == odd


def test_defaults_match_harbor(tmp_path: Path) -> None:
    config = TaskConfig()
    assert config.schema_version == "1.4"
    assert config.task is None and config.metadata == {} and config.steps is None
    assert config.verifier.timeout_sec == 600.0 and config.verifier.environment_mode is None
    assert config.agent.timeout_sec is None and config.agent.network_mode is None
    environment = config.environment
    assert environment.build_timeout_sec == 600.0
    assert environment.network_mode == "public" and environment.os == "linux"
    assert (environment.cpus, environment.memory_mb, environment.storage_mb) == (None, None, None)
    assert environment.gpus is None and environment.docker_image is None
    task = load_task(write_task(tmp_path, toml=""))  # an empty task.toml is valid
    assert task.agent_timeout_sec == math.inf  # Harbor: no agent timeout
    assert task.verifier_timeout_sec == 600.0
    assert (task.network, task.cpus, task.memory_mb) == ("public", None, None)
    assert (task.category, task.difficulty, task.tags) == (None, None, [])


def test_legacy_fields_convert_with_deprecation_warnings(tmp_path: Path) -> None:
    toml = (
        'version = "1.0"\n[environment]\nmemory = "4G"\nstorage = "512M"\nallow_internet = false\n'
    )
    with pytest.warns(DeprecationWarning) as caught:
        task = load_task(write_task(tmp_path, toml=toml))
    assert task.config.schema_version == "1.0"
    assert (task.memory_mb, task.storage_mb) == (4096, 512)
    assert task.network == "none"
    assert task.config.environment.allow_internet is None
    messages = [str(w.message) for w in caught]
    assert all(str(tmp_path / "task" / "task.toml") in m for m in messages)
    assert any("memory is deprecated; use memory_mb" in m for m in messages)
    assert "memory" not in task.config.model_dump()["environment"]


def test_allow_internet_true_and_explicit_network_mode(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning):
        open_task = load_task(
            write_task(tmp_path, "a", toml="[environment]\nallow_internet = true\n")
        )
        explicit = load_task(
            write_task(
                tmp_path,
                "b",
                toml='[environment]\nallow_internet = true\nnetwork_mode = "no-network"\n',
            )
        )
    assert open_task.network == "public"
    assert explicit.network == "none"  # network_mode wins, as in Harbor


def test_unknown_keys_are_ignored_with_a_warning(tmp_path: Path) -> None:
    toml = "timeout = 1\n[agent]\ntimout_sec = 5.0\n[metadata]\nanything = [1, 2]\n"
    with pytest.warns(
        UserWarning,
        match=r"ignoring keys Harbor does not know: timeout, "
        r"\[agent\] timout_sec$",
    ):
        task = load_task(write_task(tmp_path, toml=toml))
    assert task.agent_timeout_sec == math.inf
    assert task.config.metadata == {"anything": [1, 2]}


def test_known_keys_do_not_warn(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_task(write_task(tmp_path, toml=FULL_TASK_TOML, dockerfile=None))


# --- malformed tasks -------------------------------------------------------------------------


def assert_names(error: TaskError, file: str, field: str | None) -> None:
    """The message names the file, the field and the fix."""
    text = str(error)
    assert file in text
    if field is not None:
        assert field in text
    assert "Fix: " in text


def test_missing_task_toml(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, toml=None))
    assert error.path == tmp_path / "task" / "task.toml"
    assert_names(error, "task.toml", None)


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, toml="[agent]\ntimeout_sec = 600\nuser = root\n"))
    assert error.line == 3
    assert_names(error, "task.toml line 3", None)
    assert "invalid TOML" in error.problem


def test_wrong_type(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, toml='[verifier]\ntimeout_sec = "abc"\n'))
    assert error.field == "verifier.timeout_sec"
    assert str(error) == (
        f"{tmp_path / 'task' / 'task.toml'}: [verifier] timeout_sec: must be a positive number, "
        "got 'abc'. Fix: set timeout_sec to seconds, e.g. timeout_sec = 600.0"
    )


@pytest.mark.parametrize(
    ("toml", "field", "shown"),
    [
        ("[agent]\ntimeout_sec = -5\n", "agent.timeout_sec", "[agent] timeout_sec"),
        (
            "[environment]\nbuild_timeout_sec = 0\n",
            "environment.build_timeout_sec",
            "[environment] build_timeout_sec",
        ),
        ("[environment]\ncpus = -1\n", "environment.cpus", "[environment] cpus"),
        ("[environment]\nmemory_mb = 1.5\n", "environment.memory_mb", "[environment] memory_mb"),
        ('[environment]\nmemory = "4GB"\n', "environment.memory", "[environment] memory"),
        (
            '[environment]\nmemory = "4G"\nmemory_mb = 1024\n',
            "environment.memory",
            "[environment] memory",
        ),
        (
            '[environment]\nnetwork_mode = "offline"\n',
            "environment.network_mode",
            "[environment] network_mode",
        ),
        (
            '[agent]\nallowed_hosts = ["example.com"]\n',
            "agent.allowed_hosts",
            "[agent] allowed_hosts",
        ),
        (
            "[environment.healthcheck]\ninterval_sec = 1\n",
            "environment.healthcheck.command",
            "[environment.healthcheck] command",
        ),
        ('[task]\nname = "no-slash"\n', "task.name", "[task] name"),
        ("version = 1.0\n", "version", "version"),
        ("verifier = 5\n", "verifier", "verifier"),
    ],
)
def test_invalid_fields(tmp_path: Path, toml: str, field: str, shown: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        error = load_error(write_task(tmp_path, toml=toml))
    assert error.field == field
    assert_names(error, "task.toml", shown)


def test_missing_instruction(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, instruction=None))
    assert error.path == tmp_path / "task" / "instruction.md"
    assert_names(error, "instruction.md", None)


def test_empty_instruction(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, instruction="<!-- canary GUID 1234 -->\n\n   \n"))
    assert "is empty" in error.problem
    assert_names(error, "instruction.md", None)


def test_missing_test_script(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, test_sh=False))
    assert error.path == tmp_path / "task" / "tests" / "test.sh"
    assert_names(error, "tests/test.sh", None)


def test_missing_dockerfile_and_no_image(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, dockerfile=None))
    assert error.path == tmp_path / "task" / "environment" / "Dockerfile"
    assert_names(error, "environment/Dockerfile", "docker_image")


def test_an_image_or_a_compose_file_is_an_environment(tmp_path: Path) -> None:
    toml = '[environment]\ndocker_image = "python:3.12"\n'
    assert load_task(write_task(tmp_path, "image", toml=toml, dockerfile=None)).docker_image
    compose = write_task(tmp_path, "compose", dockerfile=None)
    (compose / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    load_task(compose)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    error = load_error(write_task(tmp_path, instruction=None, test_sh=False, dockerfile=None))
    assert [e.path.name for e in error.errors] == ["instruction.md", "test.sh", "Dockerfile"]
    assert str(error).startswith(f"{tmp_path / 'task'}: 3 problems\n  - ")


@pytest.mark.parametrize(
    ("toml", "field", "message"),
    [
        ('[environment]\nos = "windows"\n', "environment.os", "Windows tasks"),
        (
            '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n',
            "environment.network_mode",
            "network allowlists",
        ),
        ('[verifier]\nnetwork_mode = "allowlist"\n', "verifier.network_mode", "network allowlists"),
        (
            'artifacts = [{ source = "/dump", service = "db" }]\n',
            "artifacts",
            "compose service 'db'",
        ),
    ],
)
def test_features_palaestra_cannot_run_are_refused(
    tmp_path: Path, toml: str, field: str, message: str
) -> None:
    error = load_error(write_task(tmp_path, toml=toml))
    assert error.field == field
    assert message in error.problem
    assert_names(error, "task.toml", field.rpartition(".")[2])


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('[metadata]\ntags = "python"\n', "metadata.tags"),
        ("[metadata]\ndifficulty = 3\n", "metadata.difficulty"),
    ],
)
def test_conventional_metadata_must_have_the_right_type(
    tmp_path: Path, toml: str, field: str
) -> None:
    error = load_error(write_task(tmp_path, toml=toml))
    assert error.field == field
    assert_names(error, "task.toml", f"[metadata] {field.rpartition('.')[2]}")


def test_links_out_of_the_task_are_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("")
    task = write_task(tmp_path)
    (task / "tests" / "helper.py").symlink_to(tmp_path / "outside.py")
    error = load_error(task)
    assert error.path == task / "tests" / "helper.py"
    assert "links outside the task directory" in error.problem


# --- what a task tells its users -------------------------------------------------------------


def test_task_paths_and_identity(tmp_path: Path) -> None:
    task = load_task(write_task(tmp_path, "fix-build"))
    assert task.id == "fix-build" and task.path == tmp_path / "fix-build"
    assert task.test_script == task.tests_dir / "test.sh"
    assert task.solve_script == task.solution_dir / "solve.sh"
    assert task.environment_dir == task.path / "environment"
    assert load_task(task.path, task_id="custom").id == "custom"
    assert load_task(write_task(tmp_path, "no-solution", solve_sh=False)).solve_script is None


def test_instruction_loses_its_canary_lines(tmp_path: Path) -> None:
    text = "<!-- BENCHMARK DATA canary GUID 1234 -->\n# terminal-bench-canary 5678\n\nDo it.\n"
    assert load_task(write_task(tmp_path, instruction=text)).instruction == "Do it.\n"


def test_agent_network_override_and_verifier_default(tmp_path: Path) -> None:
    toml = '[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n'
    task = load_task(write_task(tmp_path, toml=toml))
    assert (task.network, task.verifier_network) == ("public", "none")


# --- load_tasks ------------------------------------------------------------------------------


def test_load_tasks_from_a_directory_of_tasks(tmp_path: Path) -> None:
    for name in ("b-task", "a-task", "c-task"):
        write_task(tmp_path / "set", name)
    (tmp_path / "set" / "docs").mkdir()  # not a task: no task.toml, no instruction.md
    tasks = load_tasks(tmp_path / "set")
    assert [t.id for t in tasks] == ["a-task", "b-task", "c-task"]
    assert all(isinstance(t, Task) for t in tasks)


def test_load_tasks_of_a_single_task(tmp_path: Path) -> None:
    assert [t.id for t in load_tasks(str(write_task(tmp_path, "only")))] == ["only"]


def test_load_tasks_reports_every_failing_task(tmp_path: Path) -> None:
    write_task(tmp_path, "good")
    write_task(tmp_path, "no-toml", toml=None)
    write_task(tmp_path, "no-test", test_sh=False)
    with pytest.raises(TaskError) as info:
        load_tasks(tmp_path)
    error = info.value
    assert error.path == tmp_path
    assert [e.path.relative_to(tmp_path).parts[0] for e in error.errors] == ["no-test", "no-toml"]
    assert "2 of 3 tasks could not be loaded" in str(error)
    assert 'errors="skip"' in str(error)


def test_load_tasks_can_skip_failing_tasks_with_a_warning(tmp_path: Path) -> None:
    write_task(tmp_path, "good")
    write_task(tmp_path, "bad", instruction="")
    with pytest.warns(UserWarning, match="skipping task bad"):
        tasks = load_tasks(tmp_path, errors="skip")
    assert [t.id for t in tasks] == ["good"]


def test_load_tasks_without_tasks(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="holds no tasks"):
        load_tasks(tmp_path)
    with pytest.raises(TaskError, match="no such directory"):
        load_tasks(tmp_path / "missing")
    with pytest.raises(ValueError, match="errors must be"):
        load_tasks(tmp_path, errors="ignore")  # type: ignore[arg-type]


STEPS_TOML = '[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n'


def test_a_multi_step_task_loads_each_steps_instruction(tmp_path: Path) -> None:
    path = write_task(tmp_path, toml=STEPS_TOML, instruction=None)
    for name in ("one", "two"):
        (path / "steps" / name).mkdir(parents=True)
        (path / "steps" / name / "instruction.md").write_text(f"<!-- canary -->\nDo {name}.\n")
    task = load_task(path)
    assert [(s.id, s.step, s.instruction) for s in task.steps] == [
        ("task/steps/one", "one", "Do one.\n"),
        ("task/steps/two", "two", "Do two.\n"),
    ]
    assert task.instruction == "Do one.\n" and task.steps[0].test_dirs == (path / "tests",)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (STEPS_TOML, "is missing"),  # steps/two/instruction.md
        (STEPS_TOML + '[steps.verifier]\nenvironment_mode = "separate"\n', "step(s) two verify"),
        ('[[steps]]\nname = "one"\n[[steps]]\nname = "a:b"\n', "not a portable directory"),
    ],
)
def test_multi_step_problems_are_named(tmp_path: Path, toml: str, message: str) -> None:
    path = write_task(tmp_path, toml=toml, instruction=None)
    (path / "steps" / "one").mkdir(parents=True)
    (path / "steps" / "one" / "instruction.md").write_text("Do one.\n")
    assert message in str(load_error(path))


# --- Harbor 0.26's checks of artifacts, collect hooks and step names --------------------------


@pytest.mark.parametrize(
    ("toml", "field", "problem"),
    [
        ('artifacts = [{ source = "/app/../etc" }]\n', "artifacts[0].source", "'..' parts"),
        (
            'artifacts = [{ source = "/a", destination = "/abs" }]\n',
            "artifacts[0].destination",
            "must be a relative path",
        ),
        (
            'artifacts = [{ source = "/a", destination = "x/../../y" }]\n',
            "artifacts[0].destination",
            "no '..' parts",
        ),
        (
            'artifacts = [{ source = "/a", destination = "a\\\\b" }]\n',
            "artifacts[0].destination",
            "'/' separators",
        ),
        (
            'artifacts = ["/b", { source = "/a", destination = "manifest.json" }]\n',
            "artifacts[1].destination",
            "reserved for the collection manifest",
        ),
        (
            'artifacts = [{ source = "/a", service = "no such" }]\n',
            "artifacts[0].service",
            "must be a Docker Compose service name",
        ),
        (
            '[[verifier.collect]]\ncommand = "true"\nservice = "-db"\n',
            "verifier.collect[0].service",
            "must be a Docker Compose service name",
        ),
        (
            '[[verifier.collect]]\ncommand = "true"\ntimeout_sec = 0\n',
            "verifier.collect[0].timeout_sec",
            "must be a positive number",
        ),
        ("[[verifier.collect]]\nuser = 0\n", "verifier.collect[0].command", "is required"),
        (
            "[[verifier.collect]]\ncommand = 5\n",
            "verifier.collect[0].command",
            "must be a shell command string",
        ),
        (
            '[[verifier.collect]]\ncommand = "pg_dump"\nservice = "db"\n',
            "verifier.collect",
            "runs in compose service 'db'",
        ),
        ("[metadata]\nprimary_reward = 1\n", "metadata.primary_reward", "must be a string"),
    ],
)
def test_artifact_and_collect_errors_name_the_field_and_the_fix(
    tmp_path: Path, toml: str, field: str, problem: str
) -> None:
    error = load_error(write_task(tmp_path, toml=toml))
    assert not error.errors, str(error)  # one problem, one line
    assert error.field == field and problem in error.problem
    assert_names(error, "task.toml", field_label(field))
    assert len(str(error).splitlines()) == 1


def test_valid_artifacts_and_hooks_load_as_written(tmp_path: Path) -> None:
    toml = (
        'artifacts = ["out.txt", { source = "/data", destination = "kept/data", exclude = ["*.tmp"] },'
        ' { source = "/logs/x", destination = "" }]\n'
        '[[verifier.collect]]\ncommand = "echo hi > /logs/artifacts/hi"\nuser = "nobody"\n'
    )
    config = load_task(write_task(tmp_path, toml=toml)).config
    first, data, logs = config.artifacts
    assert first == "out.txt" and data.destination == "kept/data" and data.exclude == ["*.tmp"]
    assert logs.destination is None  # empty: the default place, as in Harbor
    (hook,) = config.verifier.collect
    assert (hook.service, hook.timeout_sec, hook.user) == ("main", 60.0, "nobody")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["one", "One"], "step name 'One' repeats 'one'"),
        (["one", "x" * 256], "is not a portable directory name"),
        (["one", "COM¹"], "is not a portable directory name"),
    ],
)
def test_step_names_are_harbors(tmp_path: Path, names: list[str], message: str) -> None:
    toml = "".join(f'[[steps]]\nname = "{name}"\n' for name in names)
    path = write_task(tmp_path, toml=toml, instruction=None)
    (path / "steps" / "one").mkdir(parents=True)
    (path / "steps" / "one" / "instruction.md").write_text("Do one.\n")
    error = load_error(path)
    assert message in str(error) and "Fix: " in str(error)
