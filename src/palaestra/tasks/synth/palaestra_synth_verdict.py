"""The root side of a synthesised task's verifier (standard library only; run as root with
``python -I -S -B``, so nothing of the agent's workspace or environment is imported).

``prepare SRC SUITE WORK``: ``WORK`` made afresh with ``app`` (a copy of ``SRC``, the agent's
workspace, with the test files of ``SUITE`` restored over it), ``home`` and ``tmp``, all owned
by nobody: pytest runs there as nobody. The copy follows no link: a link is copied as a link,
anything but a directory, a regular file or a link is left out, and a test file's path is made
of real directories (a link or a file in its way is removed first).

``score REPORT TESTS_JSON``: every process of nobody is killed, then the pytest plugin's report
is read (a regular file of nobody's with one link, opened without following a link, at most
:data:`REPORT_CAP` bytes: anything else is no report); reward 1 when every test of
``fail_to_pass`` and ``pass_to_pass`` passed, else 0; ``partial`` is the fraction that passed.
Writes ``/logs/verifier/reward.json`` and prints the tests that did not pass.
"""

import json
import os
import shutil
import signal
import stat
import sys
import time

NOBODY = 65534
REPORT_CAP = 16 * 1024 * 1024
_KILL_ROUNDS = 200  # 20 ms apart: what a SIGKILL'd process needs to be gone


def _copy_file(src, dest):
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(dest, flags, stat.S_IMODE(info.st_mode) & 0o777)
        try:
            while chunk := os.read(fd, 1 << 20):
                os.write(out, chunk)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _copy_tree(src, dest):
    os.mkdir(dest, 0o755)
    with os.scandir(src) as entries:
        for entry in entries:
            target = os.path.join(dest, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir(follow_symlinks=False):
                _copy_tree(entry.path, target)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(entry.path, target)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _restore(suite, app):
    for directory, _dirs, files in os.walk(suite):
        rel = os.path.relpath(directory, suite)
        here = app if rel == "." else os.path.join(app, rel)
        if os.path.islink(here) or (os.path.lexists(here) and not os.path.isdir(here)):
            _remove(here)
        if not os.path.lexists(here):
            os.mkdir(here, 0o755)
        for name in files:
            target = os.path.join(here, name)
            _remove(target)
            _copy_file(os.path.join(directory, name), target)


def prepare(src, suite, work):
    os.mkdir(work, 0o700)
    _copy_tree(src, os.path.join(work, "app"))
    _restore(suite, os.path.join(work, "app"))
    os.mkdir(os.path.join(work, "home"), 0o700)
    os.mkdir(os.path.join(work, "tmp"), 0o700)
    for top, dirs, files in os.walk(work):
        for name in dirs + files:
            os.lchown(os.path.join(top, name), NOBODY, NOBODY)
    os.lchown(work, NOBODY, NOBODY)


def _nobody_pids():
    """Live processes whose real or effective uid is nobody (zombies are dead already)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/" + pid + "/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f if b":" in line)
            uids = [int(u) for u in fields[b"Uid"].split()[:2]]
            state = fields[b"State"].split()[0]
        except (OSError, KeyError, ValueError, IndexError):
            continue
        if NOBODY in uids and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


def kill_nobody():
    """Kill every process of nobody until none is left; whether none is."""
    for _ in range(_KILL_ROUNDS):
        pids = _nobody_pids()
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
    return not _nobody_pids()


def read_report(path):
    """The report's ``outcomes``; ValueError or OSError when it is not a sound report."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != NOBODY:
            raise ValueError("not a regular file of nobody's with one link")
        if info.st_size > REPORT_CAP:
            raise ValueError(f"over {REPORT_CAP} bytes")
        data = b""
        while len(data) <= REPORT_CAP and (chunk := os.read(fd, 1 << 20)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > REPORT_CAP:
        raise ValueError(f"over {REPORT_CAP} bytes")
    outcomes = json.loads(data)["outcomes"]
    if not isinstance(outcomes, dict):
        raise ValueError("outcomes is not a mapping")
    return outcomes


def score(report_path, tests_path, out="/logs/verifier/reward.json"):
    with open(tests_path, encoding="utf-8") as f:
        tests = json.load(f)
    wanted = tests["fail_to_pass"] + tests["pass_to_pass"]
    outcomes = {}
    if not kill_nobody():
        print("processes of nobody survive being killed: reward 0")
    else:
        try:
            outcomes = read_report(report_path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"no sound pytest report ({e}): reward 0")
    passed = [t for t in wanted if outcomes.get(t) == "passed"]
    for test in wanted:
        if outcomes.get(test) != "passed":
            print(f"{outcomes.get(test, 'not run')}: {test}")
    reward = 1.0 if wanted and len(passed) == len(wanted) else 0.0
    print(f"{len(passed)} of {len(wanted)} checked tests passed: reward {reward:g}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"reward": reward, "partial": len(passed) / max(1, len(wanted))}, f)


if __name__ == "__main__":
    {"prepare": prepare, "score": score}[sys.argv[1]](*sys.argv[2:])
