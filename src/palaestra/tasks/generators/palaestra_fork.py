"""The fork server of the children of generated tasks' hidden tests (stdlib only, Python 3.8+;
shipped in ``tests/`` beside ``palaestra_check.py``, which uses it).

A child used to be a new interpreter: ~15 ms of CPU to start, several a verification. The
server is one clean interpreter (never the verifier's own once it read its tests: a fork of it
would hold the reference and the expected values), running as nobody: a fork that
``palaestra_launch`` makes before the checker reads its script (:func:`prefork_server`), else
one started on first use as ``python -I -B``; each request
forks a child that runs a script, a module or code as ``python`` would (a new session,
``__main__``, ``sys.argv``, the environment, the exit status, the traceback), so a child costs a
fork. The server is not dumpable (other nobody
processes, agent code, can neither trace it nor write its memory), its control pipes are root's
(requests in marshal form, from the checker alone), and the children close them, and become
dumpable again (ordinary nobody processes), before running anything. A child's stdout, stderr
and files come back through a directory of its own, read through a directory fd without
following links.

A program that is not Python is forked from the checker straight into exec (see
:func:`_run_exec`). The checker's side imports no json, subprocess, ctypes, tempfile or shutil
(with ``re`` and ``enum`` behind them, ~20 ms at every verification): :data:`json_dumps` /
:data:`json_loads` are json's own C code, :func:`make_private_dir` and :func:`remove_tree` do
what ``mkdtemp`` and ``rmtree`` did. The server imports json once: most of its children
import it, and inherit it; it keeps the other standard library modules its children import,
for the next ones (see ``palaestra_zygote``, the server's code).
"""

import os
import sys
import time

from palaestra_jail import MAX_PROCS, Tree, nproc_limit, read_fd, remove_leftovers  # noqa: F401
from palaestra_jail import watch as tree_watch
from palaestra_zygote import SOURCE as _ZYGOTE  # the server's own code

NOBODY = 65534
_SIGKILL = 9  # Linux's; importing signal costs ~3 ms (enum)
_MAX_OUTPUT = 8 * 1024 * 1024

# No user site-packages in any child: /tmp/.local (nobody's HOME is /tmp) is the agent's to
# plant a usercustomize.py in, which would run in the reference's runs too.
CHILD_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
              "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}  # fmt: skip

#: An argument starting with this names a file of the child's own directory (see run_forked);
#: NUL never occurs in a real argument.
IN_CHILD_DIR = "\0child-dir\0/"


def _json_codec():
    """``(dumps, loads)`` as ``json.dumps`` and ``json.loads`` with their defaults do it (the
    same C code); json's own where ``_json`` is missing."""
    try:
        from _json import encode_basestring_ascii, make_encoder, make_scanner
    except ImportError:
        import json

        return json.dumps, json.loads

    def default(o):
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    class Context:  # what json.JSONDecoder() gives the scanner
        strict, object_hook, object_pairs_hook = True, None, None
        parse_float, parse_int = float, int
        parse_constant = {
            "-Infinity": float("-inf"),
            "Infinity": float("inf"),
            "NaN": float("nan"),
        }.__getitem__

    scan, ws = make_scanner(Context()), " \t\n\r"

    def dumps(value):
        if isinstance(value, str):
            return encode_basestring_ascii(value)
        encode = make_encoder(
            {}, default, encode_basestring_ascii, None, ": ", ", ", False, False, True
        )
        return "".join(encode(value, 0))

    def loads(text):
        if not isinstance(text, str):
            text = bytes(text).decode("utf-8")
        start = len(text) - len(text.lstrip(ws))
        try:
            value, end = scan(text, start)
        except StopIteration as e:
            raise ValueError(f"Expecting value: char {e.value}") from None
        if text[end:].strip(ws):
            raise ValueError(f"Extra data: char {end}")
        return value

    return dumps, loads


json_dumps, json_loads = _json_codec()


class _Zygote:
    """The checker's end of the fork server: started on first use, again when it died."""

    def __init__(self):
        self.pid = None

    def start(self, forked=False):
        """A new interpreter runs ``_ZYGOTE``; or, ``forked``, this process's fork does, which
        saves the interpreter's start but holds what this process holds (see prefork_server)."""
        sys.stdout.flush()
        sys.stderr.flush()
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # becomes the zygote: nobody, stdin/stdout the control pipes
            code = 127
            try:
                os.dup2(to_r, 0)
                os.dup2(from_w, 1)
                os.closerange(3, 1 << 16)
                os.setsid()
                os.chdir("/")
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                if not forked:
                    os.execve(sys.executable, [sys.executable, "-I", "-B", "-c", _ZYGOTE],
                              CHILD_ENV)  # fmt: skip
                code = _serve_here()
            except SystemExit as e:  # the checker is done (its end of the pipe closed)
                code = 0 if e.code in (None, 0) else 1
            finally:
                os._exit(code)
        os.close(to_r)
        os.close(from_w)
        self.pid, self.to, self.replies, self.buffer = pid, to_w, from_r, b""

    def stop(self):
        if self.pid is not None:
            for fd in (self.to, self.replies):
                os.close(fd)
            try:
                os.killpg(self.pid, _SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            os.waitpid(self.pid, 0)
            self.pid = None

    def _line(self, deadline, watch=None):
        """The next reply line's numbers; ``"timeout"`` when the deadline passed first,
        ``"cpu"`` / ``"memory"`` / ``"procs"`` when ``watch`` (called every ``watch.tick``
        seconds meanwhile) said the run is over its CPU or memory bar / has too many
        processes, or ``"gone"`` when the zygote died (agent code may kill it: it is nobody
        too)."""
        import select

        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            wait = left if watch is None else min(left, watch.tick)
            if left <= 0:
                return "timeout"
            if not select.select([self.replies], [], [], wait)[0]:
                over = watch and watch()
                if over:
                    return over
                continue
            chunk = os.read(self.replies, 64)
            if not chunk:
                return "gone"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return [int(x) for x in line.split()]

    def run(self, request, timeout, watch=None, kill=None):
        """``(status, cpu_us, maxrss_kb)``: the child's wait status, the CPU it and the
        descendants it waited for used (microseconds) and the largest one's high-water mark;
        or ``("timeout", 0, 0)`` / ``("cpu", 0, 0)``... (then it was killed: ``kill()`` ends
        its tree first), or ``("gone", 0, 0)`` when its end was not learned (the zygote died;
        the next request starts another)."""
        import marshal

        data = marshal.dumps(request)
        line = len(data).to_bytes(4, "little") + data
        if self.pid is None:
            self.start()
        try:
            os.write(self.to, line)
        except OSError:  # it died since the last request
            self.stop()
            self.start()
            os.write(self.to, line)
        child = self._line(time.monotonic() + 30)
        if isinstance(child, str):
            self.stop()
            return "gone", 0, 0
        status = self._line(time.monotonic() + timeout, watch)
        try:
            os.killpg(child[0], _SIGKILL)  # on a timeout, or what it left in its session
        except (ProcessLookupError, PermissionError):
            pass
        if isinstance(status, str) and kill is not None:
            kill()  # before waiting for the server's reply: a fork bomb takes every CPU
        if (
            status in ("timeout", "cpu", "memory", "procs")
            and self._line(time.monotonic() + 10) == "timeout"
        ):
            self.stop()  # it did not reap the killed child: start afresh next time
        if status == "gone":
            self.stop()
        return (status, 0, 0) if isinstance(status, str) else (status[0], status[1], status[2])


_zygote = _Zygote()


def _serve_here():
    """In a fork of a fresh interpreter (started ``-E -s -S -B`` on palaestra_launch), become
    the server ``-I -B -c _ZYGOTE`` would be: the environment its children start from, no
    script directory on sys.path (-I), site-packages (no user site: -s), which the server
    adds at its first request (``SITE_MAIN``: a verification without Python children never
    reads a ``.pth`` file)."""
    import builtins

    def site_main():
        import site

        site.main()

    os.environ.clear()
    os.environ.update(CHILD_ENV)
    if sys.path and not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)):
        del sys.path[0]  # the script's directory (the launcher's): -I would not add it
    exec(compile(_ZYGOTE, "<fork server>", "exec"), {"__name__": "__main__",
                                                      "__builtins__": builtins,
                                                      "SITE_MAIN": site_main})  # fmt: skip
    return 0


def prefork_server():
    """Start the fork server as a fork of this process, which saves an interpreter's start
    (~8 ms of CPU) at every verification: for palaestra_launch alone, before it reads the
    hidden tests, so that the server (and every child) holds nothing of them. A server that
    dies later is started afresh: by then a fork of the checker would hold the reference."""
    if _zygote.pid is None:
        _zygote.start(forked=True)


def stop_server():
    """Kill the fork server, if one runs (the next child starts another): after every nobody
    process was killed, so that the next request does not go to a dying one."""
    _zygote.stop()


def _read_child_file(dir_fd, name):
    """A file the child wrote in its directory, never through a link, at most _MAX_OUTPUT + 1
    bytes; None when it is missing or not a regular file."""
    import stat

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return read_fd(fd, _MAX_OUTPUT + 1)


def forkable(argv, environ):
    """``(kind, target, args)`` when ``argv`` runs this interpreter on a script (``path``), a
    module (``module``) or code (``code``) in a way the fork server reproduces; else None."""
    if any(k.startswith("PYTHON") and k not in CHILD_ENV for k in environ) or len(argv) < 2:
        return None
    exe = argv[0]
    if "/" not in exe:
        found = [os.path.join(d, exe) for d in environ.get("PATH", "").split(":") if d]
        exe = next((f for f in found if os.access(f, os.X_OK)), "")
    if not exe or os.path.realpath(exe) != os.path.realpath(sys.executable):
        return None
    rest = list(argv[1:])
    while rest and rest[0] in ("-B", "-I", "-E", "-s"):
        rest.pop(0)
    if len(rest) >= 2 and rest[0] in ("-c", "-m"):
        return ("code" if rest[0] == "-c" else "module"), rest[1], rest[2:]
    if rest and not rest[0].startswith("-"):
        return "path", rest[0], rest[1:]
    return None


def run_forked(
    how,
    environ,
    *,
    cwd,
    timeout,
    stdin,
    cpu_seconds,
    files=None,
    read=(),
    service=False,
    memory_mb=None,
):
    """Run ``how`` (see ``forkable``) in a child of the fork server, in a jail
    (``palaestra_jail``): its whole process tree is accounted, bounded by ``cpu_seconds`` and
    ``memory_mb`` and killed when it ends. The child gets a fresh directory of its own, its
    ``HOME`` and ``TMPDIR`` unless ``environ`` names others (an argument ``IN_CHILD_DIR +
    name`` names a file in it), holding ``files`` (name -> text, for it to read): they are
    written while the directory is still root's (no link planted by agent code can redirect
    them), then it is given to nobody. Returns the child's wait status (or ``"timeout"`` /
    ``"cpu"`` / ``"memory"`` / ``"procs"`` / ``"gone"``), its stdout and stderr, the files of
    its directory named in ``read`` (bytes, None when missing or not a regular file), and the
    CPU seconds and peak memory (MB) its tree used; the directory is removed. ``service``: the
    command starts a server later runs use (``pg_ctl start``): what it leaves running is not
    killed when it ends, but with the checker's end."""
    tmp = make_private_dir("child-")
    dir_fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        given = dict(files or {})
        if stdin:
            given["stdin"] = stdin
        for name, text in given.items():
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                         dir_fd=dir_fd)  # fmt: skip
            with os.fdopen(fd, "w") as f:
                os.fchown(fd, NOBODY, NOBODY)
                f.write(text)
        os.fchown(dir_fd, NOBODY, NOBODY)
        environ = dict(environ)
        for name in ("HOME", "TMPDIR"):
            if environ.get(name) in (None, CHILD_ENV.get(name)):
                environ[name] = tmp
        kind, target, args = how
        args = [os.path.join(tmp, a[len(IN_CHILD_DIR):]) if a.startswith(IN_CHILD_DIR) else a
                for a in args]  # fmt: skip
        request = {"kind": kind, "target": target, "args": args, "env": environ, "cwd": cwd,
                   "cpu": cpu_seconds, "nproc": nproc_limit(), "stdin": os.path.join(tmp, "stdin") if stdin else None,
                   "stdout": os.path.join(tmp, "stdout"),
                   "stderr": os.path.join(tmp, "stderr")}  # fmt: skip
        tree = Tree(keep=lambda: (_zygote.pid,))
        memory = None if memory_mb is None else memory_mb << 20
        watch = tree_watch(tree, None if cpu_seconds is None else _cpu_bar(cpu_seconds), memory)
        kill = None if service else tree.kill
        try:
            if kind == "exec" and _suid_undumpable():
                status, used_us, maxrss = _run_exec(request, timeout, watch, kill)
            else:
                status, used_us, maxrss = _zygote.run(request, timeout, watch, kill)
            tree.note_maxrss(maxrss)
        finally:
            if not service:
                tree.kill()
                remove_leftovers()
        cpu = (used_us + tree.reaped_us) / 1e6
        if cpu_seconds is not None and not isinstance(status, str) and cpu > _cpu_bar(cpu_seconds):
            status = "cpu"  # under each process's RLIMIT_CPU, over the bar as a tree
        if memory is not None and not isinstance(status, str) and tree.peak > memory:
            status = "memory"  # one process's high-water mark, between two looks
        stdout, stderr, *back = (_read_child_file(dir_fd, name)
                                 for name in ("stdout", "stderr", *read))  # fmt: skip
    finally:
        os.close(dir_fd)
        remove_tree(tmp)
    return status, stdout, stderr, back, cpu, tree.peak / (1 << 20)


def _cpu_bar(cpu_seconds):
    """The CPU seconds a run may use: as its RLIMIT_CPU's soft limit, whole seconds."""
    return max(1, int(-(-cpu_seconds // 1)))


def _suid_undumpable():
    """Whether a process that changes its uid is made undumpable (``fs.suid_dumpable`` 0, the
    kernel's default): then a fork of this process, nobody's until it execs, cannot be traced
    by another nobody process meanwhile."""
    try:
        with open("/proc/sys/fs/suid_dumpable", "rb") as f:
            return f.read().strip() == b"0"
    except OSError:
        return False


def _run_exec(request, timeout, watch=None, kill=None):
    """A program that is not Python, run as ``_ZYGOTE``'s children run (nobody, a session of
    its own, files of its directory as stdin/stdout/stderr), forked straight from this process
    into exec: a fork of the server would cost the server's start, and nothing of this process
    is left after the exec. ``(status, cpu_us, maxrss_kb)`` as ``_Zygote.run`` gives them."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)  # from here on not dumpable until the exec (_suid_undumpable)
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (request["nproc"], request["nproc"]))
            for fd, name, flags in ((0, request["stdin"] or os.devnull, os.O_RDONLY),
                                    (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_EXCL),
                                    (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_EXCL)):  # fmt: skip
                opened = os.open(name, flags | os.O_NOFOLLOW, 0o600)
                os.dup2(opened, fd)  # 0-2 inheritable; every other fd Python made closes at exec
                os.close(opened)
            os.chdir(request["cwd"])
            if request["cpu"] is not None:
                soft = max(1, int(-(-request["cpu"] // 1)))
                resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
            os.execvpe(request["target"], [request["target"]] + request["args"], request["env"])
        except BaseException as e:
            try:
                os.write(2, ("cannot start {}: {}\n".format(request["target"][:80], e)).encode())
            except OSError:
                pass
        finally:
            os._exit(127)
    status, used_us, maxrss = _wait(pid, time.monotonic() + timeout, watch)
    try:
        os.killpg(pid, _SIGKILL)  # on a timeout, or what it left in its session
    except (ProcessLookupError, PermissionError):
        pass
    if isinstance(status, str) and kill is not None:
        kill()  # reaps it too (this process's child)
    if status in ("timeout", "cpu", "memory", "procs"):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return status, used_us, maxrss


def _wait(pid, deadline, watch=None):
    """``(status, cpu_us, maxrss_kb)`` of ``pid`` (see ``_Zygote.run``), or ``("timeout", 0,
    0)`` once ``deadline`` passed, ``(over, 0, 0)`` once ``watch`` said so (it is not
    reaped)."""
    import select

    try:
        ready = os.pidfd_open(pid)
    except (AttributeError, OSError):  # Python 3.8, or Linux before 5.3: poll
        ready = None
    try:
        pause, tick = 0.001, float("inf") if watch is None else watch.tick
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, int((usage.ru_utime + usage.ru_stime) * 1e6), usage.ru_maxrss
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", 0, 0
            if ready is not None:
                if not select.select([ready], [], [], min(left, tick))[0]:
                    over = watch and watch()
                    if over:
                        return over, 0, 0
            else:
                time.sleep(min(pause, left, tick))
                pause = min(2 * pause, 0.05)
                over = watch and watch()
                if over:
                    return over, 0, 0
    finally:
        if ready is not None:
            os.close(ready)


#: The directories make_private_dir made: the checker's, kept by remove_leftovers.
MADE = set()


def make_private_dir(prefix):
    """A new directory (mode 0700, root's) in $TMPDIR or /tmp, as ``tempfile.mkdtemp`` makes
    one, without its imports (``random``, ``shutil``, ``re``: ~12 ms)."""
    base = os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(base, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)  # never through a link: mkdir fails on any existing name
            path = os.path.abspath(path)
            MADE.add(path)
            return path
        except FileExistsError:
            continue


def remove_tree(path):
    """Remove ``path`` and what is under it, never through a link (nobody may have planted
    one, or swap a directory for one meanwhile), ignoring errors, as ``shutil.rmtree`` does."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW

    def empty(dir_fd):
        for entry in os.scandir(dir_fd):
            try:
                if entry.is_dir(follow_symlinks=False):
                    fd = os.open(entry.name, flags, dir_fd=dir_fd)
                    try:
                        empty(fd)
                    finally:
                        os.close(fd)
                    os.rmdir(entry.name, dir_fd=dir_fd)
                else:
                    os.unlink(entry.name, dir_fd=dir_fd)
            except OSError:
                pass

    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        empty(fd)
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass
