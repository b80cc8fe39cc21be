"""Replay a task's Dockerfile for the local sandbox backend, without building an image.

The local backend runs a task on the host's root filesystem, so it cannot build an image. It can
do what a Dockerfile does when the Dockerfile only *places files and sets variables*: this module
reads the Dockerfile and returns a :class:`LocalEnvironmentPlan` (the working directory, the
environment variables and which files of ``environment/`` go where). Anything it cannot replay
faithfully is refused with a :class:`DockerfileError` that names the line.

What each instruction does here (Docker's semantics unless said otherwise):

* ``FROM``: recorded as :attr:`LocalEnvironmentPlan.base_image`, never pulled. A second ``FROM``
  (a multi-stage build) is refused. ``--platform`` is accepted and ignored.
* ``ARG``: declares a build variable whose value is its default (nothing passes
  ``--build-arg``). An ``ARG`` before ``FROM`` is visible to ``FROM``, and to a later ``ARG`` of
  the same name that redeclares it.
* ``ENV``: both ``ENV KEY=VALUE ...`` and the legacy ``ENV KEY VALUE``.
* ``WORKDIR``: sets the directory that relative ``COPY`` destinations resolve against, and the
  plan's working directory. Before any ``WORKDIR`` that directory is ``/`` (what common base
  images use; the real one is in the image, which is not pulled).
* ``COPY`` / ``ADD`` of files in ``environment/``: files, directories (their contents, as in
  Docker) and glob patterns; ``--chown`` and ``--link`` are accepted (ownership is not replayed:
  the local backend runs everything as one user). Refused: sources outside ``environment/``,
  ``--from`` (another stage or image), ``--chmod`` and other flags, heredocs, ``ADD`` of a URL or
  of a local tar archive (Docker would download or unpack it), and any ``COPY`` while
  ``environment/.dockerignore`` exists (it is not applied here).
* ``RUN``: refused (its effects on the filesystem cannot be replayed), except a step that only
  installs Debian packages (``apt-get update``, ``apt-get install [-y] [--no-install-recommends]
  PACKAGES``, ``apt-get clean``, ``rm -rf /var/lib/apt/lists/*``, joined by ``&&``) whose
  packages are all installed on this host: the local backend runs on the host's system
  directories, which then provide them (:func:`host_packages_missing`). Otherwise the task runs
  from its built image (see :func:`needs_image_build`).
* ``ENTRYPOINT``: refused; Harbor's Docker environment starts the container through it, so it
  may start services the task needs.
* ``USER``: ``root`` (or ``0``) is accepted; any other user is refused, since the local backend
  does not switch users.
* ``CMD`` (Harbor replaces it with ``sleep infinity``), ``LABEL``, ``EXPOSE``, ``VOLUME``,
  ``STOPSIGNAL``, ``HEALTHCHECK``, ``SHELL``, ``ONBUILD`` and ``MAINTAINER`` are ignored: none of
  them changes the files or the variables a command sees once ``RUN`` is refused.

Variables (``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``${NAME:+alt}``,
``${NAME+alt}``) are substituted in ``FROM``, ``ARG``, ``ENV``, ``WORKDIR``, ``USER``, ``COPY``
and ``ADD``, with quotes and escapes processed as Docker's shell-word rules say. The parser
directives ``# syntax=`` and ``# check=`` are ignored; ``# escape=`` other than ``\\`` (the
Windows-image backtick) is refused.
"""

from __future__ import annotations

import functools
import glob
import posixpath
import re
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from palaestra.sandbox.dockerfile import (
    VARIABLE_NAME,
    DockerfileError,
    Instruction,
    expand_word,
    json_list,
    parse_dockerfile,
    split_words,
)

#: Working directory when neither the Dockerfile nor task.toml sets one: the ``WORKDIR`` of
#: Harbor's task template (``harbor tasks init``) and of Terminal-Bench tasks.
DEFAULT_WORKDIR = "/app"

_DOCKER_BACKEND = 'run this task with sandbox="docker"'
_IGNORED = frozenset(
    {
        "CMD",
        "LABEL",
        "EXPOSE",
        "VOLUME",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
        "ONBUILD",
        "MAINTAINER",
    }
)
_APT_FLAGS = frozenset({"-y", "--yes", "-q", "-qq", "--quiet", "--no-install-recommends"})
_APT_HOUSEKEEPING = (
    ["apt-get", "update"],
    ["apt-get", "clean"],
    ["rm", "-rf", "/var/lib/apt/lists/*"],
)
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_DPKG_STATUS = Path("/var/lib/dpkg/status")
_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|git@)", re.IGNORECASE)
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class LocalEnvironmentPlan:
    """How to lay out a local sandbox so that it looks like the task's image.

    ``files`` maps absolute in-sandbox paths to host paths under ``environment/``. Entries are
    applied in order, as the ``COPY`` instructions they come from: a file is copied to its
    path; a directory's *contents* are copied into its path, merging with what earlier entries
    put there; a later entry overwrites an earlier one at the same path.
    """

    base_image: str | None
    workdir: str
    env: dict[str, str]
    files: dict[str, Path]


def plan_local_environment(
    environment_dir: Path, *, docker_image: str | None = None, workdir: str | None = None
) -> LocalEnvironmentPlan:
    """The local layout of ``environment_dir``.

    With a ``Dockerfile``, the Dockerfile is replayed. Without one, ``docker_image`` names the
    image and, as Harbor does for prebuilt images, the contents of ``environment/`` are copied
    into the working directory. ``workdir`` (task.toml's ``[environment] workdir``) overrides
    the Dockerfile's, as in Harbor.
    """
    environment_dir = Path(environment_dir).absolute()
    dockerfile = environment_dir / "Dockerfile"
    if dockerfile.is_file():
        try:
            text = dockerfile.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise DockerfileError("is not UTF-8 text", fix="save the Dockerfile as UTF-8") from e
        plan = _Replay(environment_dir).run(parse_dockerfile(text))
        if workdir is None:
            return plan
        return LocalEnvironmentPlan(plan.base_image, workdir, plan.env, plan.files)
    if docker_image is None:
        raise DockerfileError(
            "there is no environment/Dockerfile and no docker_image",
            fix='add environment/Dockerfile, or set docker_image = "..." under [environment]',
        )
    workdir = workdir or DEFAULT_WORKDIR
    has_files = environment_dir.is_dir() and any(environment_dir.iterdir())
    return LocalEnvironmentPlan(
        base_image=docker_image,
        workdir=workdir,
        env={},
        files={workdir: environment_dir} if has_files else {},
    )


def needs_image_build(environment_dir: Path) -> bool:
    """Whether ``environment_dir/Dockerfile`` has steps only an image build can do: ``RUN``
    (but an install of Debian packages this host has), or several ``FROM`` (a multi-stage
    build). Such a task runs on the local backend only from a root filesystem exported from
    the built image (see :mod:`palaestra.sandbox.images`)."""
    dockerfile = Path(environment_dir) / "Dockerfile"
    if not dockerfile.is_file():
        return False
    instructions = parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
    keywords = [i.keyword for i in instructions]
    replayable = all(
        (packages := apt_packages(i.value)) is not None and not host_packages_missing(packages)
        for i in instructions
        if i.keyword == "RUN"
    )
    return not replayable or keywords.count("FROM") > 1


def apt_packages(command: str) -> tuple[str, ...] | None:
    """The packages a ``RUN`` command installs when all it does is install Debian packages with
    apt-get (see the module's docstring), else None."""
    packages: list[str] = []
    for part in command.split("&&"):
        try:
            step = shlex.split(part)
        except ValueError:
            return None
        while step and step[0].startswith("DEBIAN_FRONTEND="):
            del step[0]
        if step in _APT_HOUSEKEEPING:
            continue
        names = [word for word in step[2:] if word not in _APT_FLAGS]
        if step[:2] != ["apt-get", "install"] or not names:
            return None
        if not all(_PACKAGE.fullmatch(name) for name in names):
            return None
        packages += names
    return tuple(packages) or None


def host_packages_missing(packages: tuple[str, ...]) -> list[str]:
    """Which of ``packages`` this host has not installed (all of them without dpkg)."""
    installed = _host_packages()
    return [p for p in packages if p not in installed]


@functools.cache
def _host_packages() -> frozenset[str]:
    """The Debian packages installed on this host, from dpkg's status file (read once)."""
    try:
        text = _DPKG_STATUS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    names = set()
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^(Package|Status): (.*)$", stanza, re.MULTILINE))
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            names.add(fields["Package"])
    return frozenset(names)


class _Replay:
    """The state of one pass over a Dockerfile's instructions."""

    def __init__(self, environment_dir: Path) -> None:
        self.context = environment_dir
        self.global_args: dict[str, str | None] = {}
        self.args: dict[str, str | None] = {}
        self.env: dict[str, str] = {}
        self.base_image: str | None = None
        self.workdir: str | None = None
        self.files: dict[str, Path] = {}
        self.directories: set[str] = set()
        self.line = 0

    def run(self, instructions: list[Instruction]) -> LocalEnvironmentPlan:
        for ins in instructions:
            self.line = ins.line
            if ins.keyword == "FROM":
                self._from(ins.value)
            elif ins.keyword == "ARG":
                self._arg(ins.value)
            elif self.base_image is None:
                self._fail(
                    f"{ins.keyword} comes before FROM",
                    fix="start the Dockerfile with FROM (only ARG may come before it)",
                )
            elif ins.keyword == "ENV":
                self._env(ins.value)
            elif ins.keyword == "WORKDIR":
                self.workdir = self._absolute(self._expand(ins.value.strip()))
                self.directories.add(self.workdir)
            elif ins.keyword in ("COPY", "ADD"):
                self._copy(ins.keyword, ins.value)
            elif ins.keyword == "USER":
                self._user(ins.value)
            elif ins.keyword == "RUN":
                self._run(ins.value)
            elif ins.keyword == "ENTRYPOINT":
                self._fail(
                    "ENTRYPOINT is not supported by the local sandbox backend (Harbor starts the "
                    "container through it; the local backend has no container to start)",
                    fix=_DOCKER_BACKEND,
                )
            elif ins.keyword not in _IGNORED:
                self._fail(f"unknown instruction {ins.keyword!r}", fix="correct the instruction")
        if self.base_image is None:
            self._fail("there is no FROM instruction", fix="start the Dockerfile with FROM <image>")
        return LocalEnvironmentPlan(
            base_image=self.base_image,
            workdir=self.workdir or DEFAULT_WORKDIR,
            env=dict(self.env),
            files=dict(self.files),
        )

    def _run(self, command: str) -> None:
        packages = apt_packages(command)
        if packages is None:
            self._fail(
                "RUN is not supported by the local sandbox backend (it runs on the host's "
                "root filesystem), except to install Debian packages the host has",
                fix=f"{_DOCKER_BACKEND}, or move the setup into files COPY'd from environment/",
            )
        if missing := host_packages_missing(packages):
            self._fail(
                f"RUN installs {', '.join(missing)}, which this host has not installed (the "
                "local backend runs on the host's system directories)",
                fix=f"install them on the host (`apt-get install {' '.join(missing)}`), or "
                f"{_DOCKER_BACKEND}",
            )

    def _fail(self, problem: str, *, fix: str) -> NoReturn:
        raise DockerfileError(problem, fix=fix, line=self.line)

    def _variables(self) -> dict[str, str | None]:
        return {**self.args, **self.env}  # ENV wins over ARG, as in Docker

    def _expand(self, word: str, variables: Mapping[str, str | None] | None = None) -> str:
        try:
            return expand_word(word, self._variables() if variables is None else variables)
        except ValueError as e:
            raise DockerfileError(
                str(e),
                fix="use $NAME, ${NAME}, ${NAME:-default} or ${NAME:+alternative}",
                line=self.line,
            ) from e

    def _from(self, value: str) -> None:
        if self.base_image is not None:
            self._fail(
                "multi-stage builds (a second FROM) are not supported by the local sandbox backend",
                fix=f"{_DOCKER_BACKEND}, or reduce the Dockerfile to one stage",
            )
        words = [w for w in value.split() if not w.startswith("--platform=")]
        if not (len(words) == 1 or (len(words) == 3 and words[1].upper() == "AS")):
            self._fail(f"cannot read FROM {value!r}", fix="write FROM <image> [AS <name>]")
        self.base_image = self._expand(words[0], self.global_args)

    def _arg(self, value: str) -> None:
        words = split_words(value)
        if not words:
            self._fail("ARG needs a name", fix="write ARG NAME or ARG NAME=default")
        in_stage = self.base_image is not None
        scope = self.args if in_stage else self.global_args
        for word in words:
            name, has_default, default = word.partition("=")
            if not VARIABLE_NAME.fullmatch(name):
                self._fail(f"invalid ARG name {name!r}", fix="use letters, digits and '_'")
            if has_default:
                scope[name] = self._expand(
                    default, self._variables() if in_stage else self.global_args
                )
            else:
                scope[name] = self.global_args.get(name) if in_stage else None

    def _env(self, value: str) -> None:
        words = split_words(value)
        if not words:
            self._fail("ENV needs a name and a value", fix="write ENV NAME=value")
        if "=" not in words[0]:
            legacy = value.strip().split(None, 1)
            if len(legacy) != 2:
                self._fail(f"ENV {legacy[0]} has no value", fix=f"write ENV {legacy[0]}=value")
            pairs = [(legacy[0], legacy[1])]
        else:
            pairs = []
            for word in words:
                name, has_value, raw = word.partition("=")
                if not has_value or not name:
                    self._fail(f"cannot read {word!r} in ENV", fix="write ENV NAME=value ...")
                pairs.append((name, raw))
        variables = self._variables()  # one ENV line sees the values from before it
        for name, raw in pairs:
            self.env[name] = self._expand(raw, variables)

    def _user(self, value: str) -> None:
        user = self._expand(value.strip()).partition(":")[0]
        if user not in ("root", "0"):
            self._fail(
                f"USER {user} is not supported by the local sandbox backend (it does not "
                "switch users)",
                fix=f"{_DOCKER_BACKEND}, or drop the USER instruction",
            )

    def _copy(self, keyword: str, value: str) -> None:
        rest = value.strip()
        while rest.startswith("--"):
            flag, *tail = rest.split(None, 1)
            rest = tail[0] if tail else ""
            name = flag[2:].partition("=")[0]
            if name == "from":
                self._fail(
                    f"{keyword} {flag} copies from another build stage or image, which the "
                    "local sandbox backend cannot do",
                    fix=_DOCKER_BACKEND,
                )
            if name not in ("chown", "link"):
                self._fail(
                    f"{keyword} {flag} is not supported by the local sandbox backend",
                    fix=f"{_DOCKER_BACKEND}, or drop {flag} (for --chmod: give the file that "
                    "mode in environment/)",
                )
        args = [self._expand(word) for word in json_list(rest) or rest.split()]
        if len(args) < 2:
            self._fail(
                f"{keyword} needs a source and a destination",
                fix=f"write {keyword} <source>... <destination>",
            )
        if (self.context / ".dockerignore").exists():
            self._fail(
                "environment/.dockerignore is not applied by the local sandbox backend",
                fix=f"{_DOCKER_BACKEND}, or delete environment/.dockerignore and keep in "
                "environment/ only what the image needs",
            )
        *patterns, destination = args
        sources = [path for pattern in patterns for path in self._sources(keyword, pattern)]
        # Docker's rule: a destination ending in "/" (or "." for the WORKDIR) is a directory.
        names_directory = destination == "." or destination.endswith(("/", "/."))
        if len(sources) > 1 and not names_directory:
            self._fail(
                f"{keyword} of several files needs a directory destination ending in '/', got "
                f"{destination!r}",
                fix=f"write the destination as {destination}/",
            )
        target = self._absolute(destination)
        into_directory = names_directory or self._is_directory(target)
        for source in sources:
            if source.is_file() and into_directory:
                placed = posixpath.join(target, source.name)
            else:
                placed = target
            _place(self.files, placed, source)
            self.directories.add(placed if source.is_dir() else posixpath.dirname(placed))

    def _is_directory(self, path: str) -> bool:
        """Whether ``path`` is a directory already, so that a file COPY'd there goes inside.

        That is a directory the Dockerfile made, or one of the host's: the host's root
        filesystem is what the local backend has for a base image.
        """
        return path in self.directories or Path(path).is_dir()

    def _sources(self, keyword: str, pattern: str) -> list[Path]:
        if pattern.startswith("<<"):
            self._fail(
                f"{keyword} heredocs are not supported by the local sandbox backend",
                fix="put the content in a file under environment/ and COPY it",
            )
        if _URL.match(pattern):
            self._fail(
                f"{keyword} {pattern} downloads at build time, which the local sandbox backend "
                "does not do",
                fix=f"{_DOCKER_BACKEND}, or save the file under environment/ and COPY it",
            )
        relative = posixpath.normpath(pattern.lstrip("/") or ".")
        if relative == ".." or relative.startswith("../"):
            self._fail(
                f"{keyword} source {pattern!r} is outside environment/ (the build context)",
                fix="move the file into environment/ and COPY it from there",
            )
        if _GLOB_CHARS.search(relative):
            names = sorted(glob.glob(relative, root_dir=self.context, include_hidden=True))
            if not names:
                self._fail(
                    f"{keyword} source {pattern!r} matches no file in environment/",
                    fix="correct the pattern or add the files to environment/",
                )
        else:
            names = [relative]
            if not (self.context / relative).exists():
                self._fail(
                    f"{keyword} source {pattern!r} does not exist in environment/",
                    fix="correct the path or add the file to environment/",
                )
        paths = [self.context / name if name != "." else self.context for name in names]
        for path in paths:
            if not path.resolve().is_relative_to(self.context.resolve()):
                self._fail(
                    f"{keyword} source {pattern!r} links outside environment/",
                    fix="replace the link with a copy of the file it points to",
                )
            if keyword == "ADD" and path.is_file() and tarfile.is_tarfile(path):
                self._fail(
                    f"ADD {pattern} unpacks a tar archive, which the local sandbox backend "
                    "does not do",
                    fix="unpack the archive into environment/ and COPY the directory",
                )
        return paths

    def _absolute(self, path: str) -> str:
        """``path`` as an absolute, normalised in-sandbox path (relative ones against WORKDIR)."""
        joined = posixpath.join(self.workdir or "/", path)
        return "/" + posixpath.normpath(joined).lstrip("/")


def _place(files: dict[str, Path], target: str, source: Path) -> None:
    """Add one COPY result, keeping :attr:`LocalEnvironmentPlan.files` in application order."""
    existing = files.get(target)
    if existing is not None and existing.is_dir() and source.is_dir():
        # Two directories into one place merge: the later one's children go after the earlier.
        for child in sorted(source.iterdir()):
            _place(files, posixpath.join(target, child.name), child)
        return
    files.pop(target, None)  # re-insert at the end: a later COPY wins
    files[target] = source
