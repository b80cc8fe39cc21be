"""The jail of one run of agent code at verify time (stdlib only, Python 3.8+; shipped in
``tests/`` beside ``palaestra_fork.py``, which puts every child it starts in one).

A run is the agent's program, module or query, started by ``palaestra_check.run_python`` /
``run_command`` (or a checker's own long-lived child, as HumanEval's). Its **process tree** is
every process it starts, whatever it does: the checker (root) is a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``), so a process the run double-forks, or leaves behind when its
parent exits, is reparented to the checker, not to the sandbox's init, and stays in the tree; a
new session (``setsid``) changes nothing. A process is in the run's tree when it did not exist
when the run started and the checker is its ancestor (the fork server itself excepted).

Neither backend lets the verifier make a cgroup (bubblewrap's sandbox has no cgroupfs; Docker's
is mounted read-only) nor a PID namespace (no ``CAP_SYS_ADMIN``, no user namespace), so the
tree is bounded this way instead:

* **CPU over the tree.** While it runs, :meth:`Tree.cpu` sums ``utime + stime + cutime +
  cstime`` (``/proc/<pid>/stat``) of its live processes (a process's ``cutime`` holds what its
  reaped children used) and the ``rusage`` of those the checker reaped; ``palaestra_fork``
  polls it and kills the tree past its bar. When the run ends the exact figure is its first
  process's ``wait4`` rusage (it and every descendant it waited for) plus the rusage of every
  process the checker reaped (the orphans). A program that forks before each second of CPU and
  waits for its child (RLIMIT_CPU resets at every fork) is counted whole. Each process keeps its
  own ``RLIMIT_CPU`` too.
* **The tree is killed when the run ends** (:meth:`Tree.kill`): every member is sent SIGKILL,
  and those the checker inherits are reaped, until none is left (a process that forks while it
  is killed only makes orphans, which the next round finds).
* **Memory**: ``RLIMIT_AS`` per process where a check gives one; the sandbox's own cgroup bounds
  the whole.
"""

import os

_SIGKILL = 9
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_subreaper = None


def become_subreaper():
    """Make this process a child subreaper (once): orphans of the trees it starts come back to
    it. False where the kernel refuses (then an orphan escapes the tree's accounting, never its
    kill: ``kill_nobody_processes`` ends it with the checker)."""
    global _subreaper
    if _subreaper is None:
        _subreaper = _prctl(36, 1) == 0  # PR_SET_CHILD_SUBREAPER
    return _subreaper


def _prctl(option, arg):
    try:
        import _ctypes  # not ctypes: its import costs ~5 ms at every verification

        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")
        return _ctypes.call_function(prctl, (option, arg, 0, 0, 0))
    except (ImportError, AttributeError, OSError):
        return -1


def _stat(pid):
    """``(ppid, state, ticks)`` of a process (ticks: utime + stime + cutime + cstime), or
    None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # after "pid (comm) ": comm may hold spaces
    try:
        return int(fields[1]), fields[0], sum(int(x) for x in fields[11:15])
    except (IndexError, ValueError):
        return None


class Tree:
    """The processes of one run (see the module's docstring): made before the run starts."""

    def __init__(self, keep=(), everything=False):
        """``keep``: pids never in the tree, or a callable giving them (the fork server);
        ``everything``: every descendant of this process is in it (to reap them all)."""
        become_subreaper()
        self.me = os.getpid()
        self.keep = keep
        self.before = frozenset() if everything else frozenset(os.listdir("/proc"))
        self.reaped_us = 0  # CPU of the members this process reaped, in microseconds

    def members(self):
        """pid -> (ppid, state, ticks) of the run's processes now."""
        keep = set(self.keep()) if callable(self.keep) else set(self.keep)
        new = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and name not in self.before:
                info = _stat(int(name))
                if info is not None:
                    new[int(name)] = info
        known = {}  # pid -> whether the checker is its ancestor

        def descends(pid, depth=0):
            if pid == self.me:
                return True
            if pid <= 1 or depth > 4096:
                return False
            if pid not in known:
                known[pid] = False  # a cycle (pids reused meanwhile) ends here
                info = new.get(pid) or _stat(pid)
                known[pid] = info is not None and descends(info[0], depth + 1)
            return known[pid]

        return {pid: info for pid, info in new.items()
                if pid not in keep and descends(info[0])}  # fmt: skip

    def cpu(self):
        """Seconds of CPU the run's tree used so far (its live processes, and those reaped)."""
        ticks = sum(info[2] for info in self.members().values())
        return ticks / _CLOCK_TICKS + self.reaped_us / 1e6

    def reap(self, pid):
        """Reap ``pid``, a child of this process, if it ended; True when it did."""
        try:
            done, _, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            self.reaped_us += int((usage.ru_utime + usage.ru_stime) * 1e6)
        return bool(done)

    def kill(self, limit=10.0):
        """Kill every process of the tree and reap those this process inherited; returns once
        none is left (or after ``limit`` seconds: what is left is killed at the checker's end
        with every process of nobody's)."""
        import time

        deadline, pause = time.monotonic() + limit, 0.0005
        keep = set(self.keep()) if callable(self.keep) else set(self.keep)
        while True:
            members = self.members()
            waiting = False
            for pid, (ppid, state, _) in members.items():
                if state not in (b"Z", b"X"):
                    try:
                        os.kill(pid, _SIGKILL)
                    except OSError:
                        pass
                    waiting = True
                elif ppid == self.me:
                    waiting = not self.reap(pid) or waiting
                elif ppid in members or ppid in keep:
                    waiting = True  # a zombie its dying parent leaves to us, or the server's
            if not waiting or time.monotonic() > deadline:
                return
            time.sleep(pause)
            pause = min(2 * pause, 0.02)
