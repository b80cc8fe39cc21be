"""The Dockerfile reader behind the local sandbox backend: real files in tmp_path."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from palaestra.sandbox import dockerfile_replay
from palaestra.sandbox.dockerfile import DockerfileError, Instruction, parse_dockerfile
from palaestra.sandbox.dockerfile_replay import (
    DEFAULT_WORKDIR,
    LocalEnvironmentPlan,
    needs_image_build,
    plan_local_environment,
)


def context(tmp_path: Path, dockerfile: str | None, files: dict[str, str] | None = None) -> Path:
    """An environment/ directory holding ``dockerfile`` and ``files`` (relative path: text)."""
    env = tmp_path / "environment"
    env.mkdir(parents=True)
    if dockerfile is not None:
        (env / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_text(text)
    return env


def plan(
    tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None, **kwargs: str
) -> LocalEnvironmentPlan:
    return plan_local_environment(context(tmp_path, dockerfile, files), **kwargs)


def refused(
    tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None
) -> DockerfileError:
    with pytest.raises(DockerfileError) as info:
        plan(tmp_path, dockerfile, files)
    return info.value


# --- parsing ---------------------------------------------------------------------------------


def test_parse_joins_continuations_and_drops_comments() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "FROM python:3.12 AS base\n"
        "\n"
        "# a comment\n"
        "ENV A=1 \\\n"
        "    # a comment between continuation lines\n"
        "\n"
        "    B=2\n"
        "copy a.txt \\\n"
        "  /app/\n"
    )
    assert parse_dockerfile(text) == [
        Instruction(2, "FROM", "python:3.12 AS base"),
        Instruction(5, "ENV", "A=1     B=2"),
        Instruction(9, "COPY", "a.txt   /app/"),
    ]


def test_parse_directives_only_at_the_top() -> None:
    text = "FROM alpine\n# escape=`\nWORKDIR /x\n"
    assert [i.keyword for i in parse_dockerfile(text)] == ["FROM", "WORKDIR"]


def test_parse_refuses_the_backtick_escape_directive() -> None:
    with pytest.raises(DockerfileError) as info:
        parse_dockerfile("# escape=`\nFROM alpine\n")
    assert info.value.line == 1
    assert "escape" in str(info.value) and "Fix:" in str(info.value)


# --- FROM, ARG, ENV, WORKDIR -----------------------------------------------------------------


def test_from_is_recorded_with_global_args(tmp_path: Path) -> None:
    result = plan(tmp_path, "ARG TAG=3.12\nFROM --platform=linux/amd64 python:${TAG}-slim AS app\n")
    assert result == LocalEnvironmentPlan("python:3.12-slim", DEFAULT_WORKDIR, {}, {})


def test_arg_defaults_substitute_into_later_instructions(tmp_path: Path) -> None:
    dockerfile = (
        "ARG BASE=debian\n"
        "FROM $BASE\n"
        "ARG BASE\n"  # redeclared in the stage: takes the global value
        "ARG DIR=/srv\n"
        "ARG SUB=$DIR/data UNSET\n"
        "ENV FROM_ARG=${BASE} WHERE=${SUB} EMPTY=x${UNSET}y FALLBACK=${UNSET:-dflt} "
        "ALT=${DIR:+yes} NO_ALT=${UNSET:+yes}\n"
        "WORKDIR $DIR\n"
    )
    result = plan(tmp_path, dockerfile)
    assert result.base_image == "debian"
    assert result.workdir == "/srv"
    assert result.env == {
        "FROM_ARG": "debian",
        "WHERE": "/srv/data",
        "EMPTY": "xy",
        "FALLBACK": "dflt",
        "ALT": "yes",
        "NO_ALT": "",
    }


def test_args_are_not_runtime_environment(tmp_path: Path) -> None:
    assert plan(tmp_path, "FROM alpine\nARG SECRET=1\n").env == {}


def test_env_forms_quotes_and_escapes(tmp_path: Path) -> None:
    dockerfile = (
        "FROM alpine\n"
        "ENV LEGACY hello   big world\n"
        "ENV QUOTED=\"a b\" SINGLE='$NOPE' ESCAPED=\\$HOME SPACE=one\\ two\n"
        'ENV LEGACY_QUOTED "quoted value"\n'
        "ENV PATH=/opt/bin:$PATH\n"
    )
    assert plan(tmp_path, dockerfile).env == {
        "LEGACY": "hello   big world",
        "QUOTED": "a b",
        "SINGLE": "$NOPE",
        "ESCAPED": "$HOME",
        "SPACE": "one two",
        "LEGACY_QUOTED": "quoted value",
        "PATH": "/opt/bin:",  # the base image's PATH is not known: unset variables are empty
    }


def test_env_wins_over_arg_and_double_quotes_keep_other_backslashes(tmp_path: Path) -> None:
    dockerfile = 'FROM alpine\nARG X=arg\nENV X=env\nENV Y=$X WIN="C:\\dir\\$X" Q="say \\"hi\\""\n'
    assert plan(tmp_path, dockerfile).env == {
        "X": "env",
        "Y": "env",
        "WIN": "C:\\dir$X",
        "Q": 'say "hi"',
    }


def test_one_env_line_sees_the_values_from_before_it(tmp_path: Path) -> None:
    env = plan(tmp_path, "FROM alpine\nENV A=old\nENV A=new B=$A\nENV C=$A\n").env
    assert env == {"A": "new", "B": "old", "C": "new"}


def test_workdir_relative_to_the_previous_one(tmp_path: Path) -> None:
    assert plan(tmp_path, "FROM alpine\nWORKDIR /srv\nWORKDIR app/../code\n").workdir == "/srv/code"


def test_workdir_defaults_to_app_and_task_toml_overrides(tmp_path: Path) -> None:
    assert plan(tmp_path / "a", "FROM alpine\n").workdir == "/app"
    overridden = plan(tmp_path / "b", "FROM alpine\nWORKDIR /srv\n", workdir="/work")
    assert overridden.workdir == "/work"


# --- COPY and ADD ----------------------------------------------------------------------------


def test_copy_file_to_file_and_into_directories(tmp_path: Path) -> None:
    dockerfile = (
        "FROM alpine\n"
        "WORKDIR /app\n"
        "COPY a.txt /etc/conf/renamed.txt\n"
        "COPY a.txt /opt/dir/\n"
        "COPY b.txt .\n"
        "COPY c.txt sub/c-copy.txt\n"
    )
    env = tmp_path / "environment"
    result = plan(tmp_path, dockerfile, {"a.txt": "a", "b.txt": "b", "c.txt": "c"})
    assert result.files == {
        "/etc/conf/renamed.txt": env / "a.txt",
        "/opt/dir/a.txt": env / "a.txt",
        "/app/b.txt": env / "b.txt",
        "/app/sub/c-copy.txt": env / "c.txt",
    }


def test_copy_of_a_file_onto_an_existing_directory_goes_inside(tmp_path: Path) -> None:
    dockerfile = "FROM alpine\nWORKDIR /app\nCOPY a.txt /app\nCOPY a.txt /usr\nCOPY a.txt /new\n"
    env = tmp_path / "environment"
    assert plan(tmp_path, dockerfile, {"a.txt": ""}).files == {
        "/app/a.txt": env / "a.txt",  # WORKDIR made /app
        "/usr/a.txt": env / "a.txt",  # the host's /usr: the local backend's base image
        "/new": env / "a.txt",
    }


def test_copy_directory_copies_its_contents(tmp_path: Path) -> None:
    files = {"src/main.py": "", "src/pkg/mod.py": ""}
    result = plan(tmp_path, "FROM alpine\nWORKDIR /app\nCOPY src/ ./code\nCOPY . .\n", files)
    env = tmp_path / "environment"
    assert result.files == {"/app/code": env / "src", "/app": env}


def test_copy_glob_into_a_directory(tmp_path: Path) -> None:
    files = {"a.py": "", "b.py": "", ".hidden.py": "", "c.txt": ""}
    result = plan(tmp_path, "FROM alpine\nCOPY *.py /app/\n", files)
    env = tmp_path / "environment"
    assert result.files == {
        "/app/.hidden.py": env / ".hidden.py",
        "/app/a.py": env / "a.py",
        "/app/b.py": env / "b.py",
    }


def test_copy_several_files_needs_a_directory_destination(tmp_path: Path) -> None:
    error = refused(tmp_path, "FROM alpine\nCOPY a.py b.py /app\n", {"a.py": "", "b.py": ""})
    assert error.line == 2
    assert "ending in '/'" in str(error) and "Fix: write the destination as /app/" in str(error)


def test_copy_json_form_flags_and_variables(tmp_path: Path) -> None:
    dockerfile = (
        "FROM alpine\n"
        'ARG DEST="/opt/my  dir"\n'
        'COPY --chown=app:app --link ["my  file.txt", "${DEST}/"]\n'
    )
    result = plan(tmp_path, dockerfile, {"my  file.txt": "x"})
    assert result.files == {"/opt/my  dir/my  file.txt": tmp_path / "environment" / "my  file.txt"}


def test_two_directories_into_one_place_merge_in_order(tmp_path: Path) -> None:
    files = {"one/a": "1", "one/shared": "1", "two/shared": "2", "two/b": "2"}
    result = plan(
        tmp_path,
        "FROM alpine\nCOPY one /app\nCOPY a.txt /app/x\nCOPY two /app\n",
        {**files, "a.txt": ""},
    )
    env = tmp_path / "environment"
    assert list(result.files.items()) == [
        ("/app", env / "one"),
        ("/app/x", env / "a.txt"),
        ("/app/b", env / "two" / "b"),
        ("/app/shared", env / "two" / "shared"),
    ]


def test_a_later_copy_to_the_same_path_wins(tmp_path: Path) -> None:
    result = plan(tmp_path, "FROM alpine\nCOPY a /f\nCOPY b /g\nCOPY b /f\n", {"a": "", "b": ""})
    env = tmp_path / "environment"
    assert list(result.files.items()) == [("/g", env / "b"), ("/f", env / "b")]


def test_add_of_a_local_file_is_a_copy(tmp_path: Path) -> None:
    result = plan(tmp_path, "FROM alpine\nADD notes.txt /srv/\n", {"notes.txt": "n"})
    assert result.files == {"/srv/notes.txt": tmp_path / "environment" / "notes.txt"}


def test_copy_source_outside_the_context_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    error = refused(tmp_path, "FROM alpine\nCOPY ../secret.txt /app/\n")
    assert error.line == 2 and "is outside environment/ (the build context)" in error.problem


def test_copy_through_a_link_leaving_the_context_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    env = context(tmp_path, "FROM alpine\nCOPY link.txt /app/\n")
    (env / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(DockerfileError, match="links outside environment/"):
        plan_local_environment(env)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("instruction", "files", "message"),
    [
        ("COPY missing.txt /app/", {}, "does not exist in environment/"),
        ("COPY *.nothing /app/", {}, "matches no file"),
        ("COPY --from=builder /out /app/", {}, "another build stage or image"),
        ("COPY --chmod=755 a.sh /app/", {"a.sh": ""}, "--chmod=755 is not supported"),
        ("COPY <<EOF /app/x", {}, "heredocs are not supported"),
        ("ADD https://example.com/x.tgz /app/", {}, "downloads at build time"),
        ("COPY only-source", {"only-source": ""}, "needs a source and a destination"),
    ],
)
def test_copy_refusals(
    tmp_path: Path, instruction: str, files: dict[str, str], message: str
) -> None:
    error = refused(tmp_path, f"FROM alpine\n{instruction}\n", files)
    assert error.line == 2
    assert message in error.problem
    assert error.fix


def test_add_of_a_tar_archive_is_refused(tmp_path: Path) -> None:
    env = context(tmp_path, "FROM alpine\nADD data.tar.gz /srv/\n")
    with tarfile.open(env / "data.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("x.txt")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(DockerfileError, match="unpacks a tar archive"):
        plan_local_environment(env)


def test_dockerignore_is_refused(tmp_path: Path) -> None:
    error = refused(tmp_path, "FROM alpine\nCOPY . /app\n", {".dockerignore": "*.pyc\n"})
    assert ".dockerignore" in error.problem


# --- instructions the local backend refuses or ignores ---------------------------------------


def test_run_is_refused_naming_the_line_and_the_docker_backend(tmp_path: Path) -> None:
    dockerfile = (
        "FROM ubuntu:24.04\nWORKDIR /app\n# install\nRUN apt-get update && \\\n"
        "  apt-get install -y git && pip install requests\n"
    )
    error = refused(tmp_path, dockerfile)
    assert error.line == 4
    assert str(error) == (
        "line 4: RUN is not supported by the local sandbox backend (it runs on the host's root "
        "filesystem), except to install Debian packages the host has. Fix: run this task with "
        'sandbox="docker", or move the setup into files COPY\'d from environment/'
    )


@pytest.fixture
def host_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This host's dpkg status, as the test writes it."""
    status = tmp_path / "dpkg-status"
    monkeypatch.setattr(dockerfile_replay, "_DPKG_STATUS", status)
    dockerfile_replay._host_packages.cache_clear()
    yield status
    dockerfile_replay._host_packages.cache_clear()


APT_RUN = (
    "FROM debian:bookworm-slim\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get "
    "install -y --no-install-recommends {} \\\n    && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n"
)


def test_installing_debian_packages_the_host_has_is_replayed(
    tmp_path: Path, host_packages: Path
) -> None:
    """The local backend runs on the host's system directories: they provide the packages."""
    host_packages.write_text(
        "Package: python3\nStatus: install ok installed\nVersion: 3.11\n\n"
        "Package: jq\nStatus: deinstall ok config-files\n"
    )
    env = context(tmp_path / "has", APT_RUN.format("python3"))
    assert plan_local_environment(env).workdir == "/app"
    assert not needs_image_build(env)
    env = context(tmp_path / "lacks", APT_RUN.format("python3 jq"))
    assert needs_image_build(env)  # so the task runs from its built image
    with pytest.raises(DockerfileError) as info:
        plan_local_environment(env)
    assert info.value.problem.startswith("RUN installs jq, which this host has not installed")
    assert "`apt-get install jq`" in info.value.fix


def test_without_dpkg_every_run_needs_an_image_build(tmp_path: Path, host_packages: Path) -> None:
    assert needs_image_build(context(tmp_path, APT_RUN.format("python3")))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dockerfile", "line", "message"),
    [
        ("FROM golang AS build\nFROM alpine\n", 2, "multi-stage builds"),
        ('FROM alpine\nENTRYPOINT ["/start.sh"]\n', 2, "ENTRYPOINT is not supported"),
        ("FROM alpine\nUSER app\n", 2, "USER app is not supported"),
        ("FROM alpine\nFROBNICATE x\n", 2, "unknown instruction 'FROBNICATE'"),
        ("ENV A=1\nFROM alpine\n", 1, "ENV comes before FROM"),
        ("# nothing\nARG A=1\n", 2, "there is no FROM instruction"),
        ("FROM alpine\nENV A\n", 2, "ENV A has no value"),
    ],
)
def test_refused_instructions(tmp_path: Path, dockerfile: str, line: int, message: str) -> None:
    error = refused(tmp_path, dockerfile)
    assert error.line == line
    assert message in error.problem
    assert "Fix: " in str(error)


def test_harmless_instructions_are_ignored(tmp_path: Path) -> None:
    dockerfile = (
        "FROM alpine\n"
        "LABEL maintainer=x\n"
        "EXPOSE 8080\n"
        "USER root:root\n"
        "VOLUME /data\n"
        'SHELL ["/bin/bash", "-c"]\n'
        "HEALTHCHECK CMD true\n"
        "STOPSIGNAL SIGTERM\n"
        'CMD ["sleep", "infinity"]\n'
        "ENV KEPT=1\n"
    )
    assert plan(tmp_path, dockerfile) == LocalEnvironmentPlan("alpine", "/app", {"KEPT": "1"}, {})


# --- prebuilt images -------------------------------------------------------------------------


def test_prebuilt_image_without_dockerfile_uploads_environment_to_workdir(tmp_path: Path) -> None:
    env = context(tmp_path, None, {"data.csv": "1,2"})
    assert plan_local_environment(env, docker_image="ghcr.io/x/y:1") == LocalEnvironmentPlan(
        "ghcr.io/x/y:1", "/app", {}, {"/app": env}
    )
    (env / "data.csv").unlink()
    assert plan_local_environment(env, docker_image="img", workdir="/w").files == {}


def test_no_dockerfile_and_no_image(tmp_path: Path) -> None:
    with pytest.raises(DockerfileError, match="no environment/Dockerfile and no docker_image"):
        plan_local_environment(context(tmp_path, None))
