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
* **The tree is killed when the run ends**, times out or crosses a bar (:meth:`Tree.kill`):
  it is frozen first (every process made since the run started is sent SIGSTOP, those not of
  the tree continued; a stopped process forks no more), then every member is sent SIGKILL,
  and those the checker inherits are reaped, until none is left.
* **What a run leaves in ``/tmp``, ``/var/tmp`` and ``/dev/shm``** (a FIFO, a stash of work
  done, a link) is removed when it ends (:func:`remove_leftovers`): the next run finds none.
* **Processes**: a run with more than ``palaestra_fork.MAX_PROCS`` at once (a fork bomb) is
  killed, before it exhausts the sandbox's pids and the checker cannot fork; its
  ``RLIMIT_NPROC`` (:func:`nproc_limit`) stops its forks at twice that.
* **Memory over the tree** (a run's ``memory_mb``): :meth:`Tree.memory` sums, over its live
  processes, the resident pages no file backs (``RssAnon + RssShmem`` of ``/proc/<pid>/status``,
  which root reads without ``CAP_SYS_PTRACE``, unlike ``smaps``' proportional ``Pss``), polled
  with the CPU; past the bar the tree is killed. When the run ends, the largest process's
  high-water mark (``ru_maxrss`` of the rusage the checker gets, file pages included) counts
  too, so one process over the bar is caught however briefly. What this does not show: pages a
  fork shares copy-on-write are counted once per process (the sum is an upper bound), a peak of
  several processes that lasts less than a poll (20 ms) can pass unseen, and files written (on a
  tmpfs they are memory) are storage, not counted. A cgroup of its own per run would count
  exactly; neither backend gives the verifier one (above). The sandbox's own cgroup bounds the
  whole.
"""

import os
import stat  # os imports it: free

_SIGKILL, _SIGSTOP, _SIGCONT = 9, 19, 18  # Linux's
_NOBODY = 65534
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


def _resident(pid):
    """Bytes of resident memory no file backs of a process (``RssAnon + RssShmem``), 0 when
    it is gone (or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            held = 0
            for line in f:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    held += int(line.split()[1])  # kB
            return held * 1024
    except (OSError, ValueError, IndexError):
        return 0


class Tree:
    """The processes of one run (see the module's docstring): made before the run starts."""

    def __init__(self, keep=(), everything=False):
        """``keep``: pids never in the tree, or a callable giving them (the fork server);
        ``everything``: every descendant of this process is in it (to reap them all)."""
        become_subreaper()
        self.me = os.getpid()
        self.keep = keep
        self.everything = everything
        self.before = frozenset() if everything else frozenset(os.listdir("/proc"))
        self.reaped_us = 0  # CPU of the members this process reaped, in microseconds
        self.peak = 0  # bytes: the most memory seen (see memory() and note_maxrss())

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
        return self.cpu_of(self.members())

    def cpu_of(self, members):
        """:meth:`cpu`, of ``members`` (what :meth:`members` gave)."""
        ticks = sum(info[2] for info in members.values())
        return ticks / _CLOCK_TICKS + self.reaped_us / 1e6

    def memory(self, members=None):
        """Bytes of memory the run's tree holds now (see the module's docstring); the peak so
        far is kept in :attr:`peak`."""
        held = sum(_resident(pid) for pid in (self.members() if members is None else members))
        self.peak = max(self.peak, held)
        return held

    def note_maxrss(self, kilobytes):
        """Count a process's high-water mark (``ru_maxrss``, in KiB) in :attr:`peak`."""
        self.peak = max(self.peak, kilobytes * 1024)

    def reap(self, pid):
        """Reap ``pid``, a child of this process, if it ended; True when it did."""
        try:
            done, _, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            self.reaped_us += int((usage.ru_utime + usage.ru_stime) * 1e6)
            self.note_maxrss(usage.ru_maxrss)
        return bool(done)

    def kill(self, limit=10.0):
        """Kill every process of the tree and reap those this process inherited; returns once
        none is left (or after ``limit`` seconds: what is left is killed at the checker's end
        with every process of nobody's). The tree is frozen first (:meth:`freeze`): a fork
        bomb's processes are killed at once, not one round of forks after another."""
        import time

        deadline, pause = time.monotonic() + limit, 0.0005
        self.freeze(min(deadline, time.monotonic() + 2.0))
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

    def freeze(self, deadline):
        """Send SIGSTOP to every member of the tree until a pass finds each of them stopped (or
        a zombie), or ``deadline`` (a process in a vfork, say, stays running). A process with
        SIGSTOP pending makes no child (the kernel restarts a fork a signal interrupts), so
        once every member is stopped none can be made, and the SIGKILL round that follows ends
        the whole tree; the processes a bomb forked meanwhile hold their pids (and count
        against its ``RLIMIT_NPROC``: see :func:`nproc_limit`) until then.

        The first pass stops every process made since the run started, unread: a bomb's
        hundreds of processes spinning on failed forks leave this process too little CPU to
        read each one's ``/proc`` first. Those that turn out not to be the run's (a server's
        process serving it) are continued."""
        import time

        keep = set(self.keep()) if callable(self.keep) else set(self.keep)
        blanket = set()
        if not self.everything:
            for name in os.listdir("/proc"):
                if name.isdigit() and name not in self.before and int(name) not in keep:
                    blanket.add(int(name))
                    _signal(int(name), _SIGSTOP)
        signalled = set(blanket)
        try:
            while time.monotonic() < deadline:
                running = False
                for pid, (_, state, _) in self.members().items():
                    if state in (b"T", b"t", b"Z", b"X", b"x"):
                        continue
                    running = True  # new, its SIGSTOP still pending, or continued: (again)
                    if pid not in signalled or state != b"D":
                        _signal(pid, _SIGSTOP)
                        signalled.add(pid)
                if not running:
                    return
                time.sleep(0.0005)
        finally:
            if blanket:
                for pid in blanket - set(self.members()):
                    _signal(pid, _SIGCONT)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


#: The most processes a run may have at once: a fork bomb is killed, not left to exhaust the
#: sandbox's pids (the checker forks the next run).
MAX_PROCS = 256


def nproc_limit():
    """The ``RLIMIT_NPROC`` of a run (nobody's processes, which the kernel counts per user):
    those nobody has now (the fork server, a service a check started) and ``2 * MAX_PROCS``.
    A fork bomb's forks then fail once it has that many: the watch sees it past ``MAX_PROCS``
    and its tree is frozen at that size (:meth:`Tree.freeze`), never at the sandbox's pids
    limit. Where the sandbox shares the kernel's count of nobody with processes it cannot see
    (Docker without a user namespace), those eat into the margin."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/status", "rb") as f:
                    uid = next(line for line in f if line.startswith(b"Uid:")).split()[1]
                count += int(uid) == _NOBODY
            except (OSError, StopIteration, ValueError, IndexError):
                pass
    return count + 2 * MAX_PROCS


#: How often a run with a memory bar is looked at, in seconds.
MEMORY_TICK = 0.02


def watch(tree, bar, memory=None):
    """``"cpu"`` when ``tree`` is over ``bar`` seconds of CPU (None: no bar), ``"memory"``
    when it holds more than ``memory`` bytes (None: no bar), ``"procs"`` when more than
    MAX_PROCS processes were made since it started (its own, or what it had a server start:
    counted from ``/proc``'s listing alone, as a bomb's processes leave this process too
    little CPU to read each one's), else None; asked every ``tick`` seconds."""

    def over():
        if len(set(os.listdir("/proc")).difference(tree.before)) > MAX_PROCS:
            return "procs"
        if bar is None and memory is None:
            return None
        members = tree.members()
        if bar is not None and tree.cpu_of(members) > bar:
            return "cpu"
        if memory is not None and tree.memory(members) > memory:
            return "memory"
        return None

    over.tick = 0.1 if bar is None else min(0.1, max(0.02, bar / 50))
    if memory is not None:
        over.tick = MEMORY_TICK
    return over


# -- what runs may read, and what the checker reads back -------------------------------------

_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def open_regular(path):
    """A read-only fd on the regular file at the absolute ``path``, reached without following
    a link at any step and without blocking (a FIFO, a device, a socket, a link, a missing
    file: None)."""
    import stat

    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    try:
        fd = os.open("/", _NOFOLLOW_DIR)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            step = os.open(part, _NOFOLLOW_DIR, dir_fd=fd)
            os.close(fd)
            fd = step
        last = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(last).st_mode):
        os.close(last)
        return None
    return last


def read_regular_bytes(path, limit=1 << 20):
    """The first ``limit`` bytes of the regular file at ``path`` (see :func:`open_regular`),
    or None."""
    fd = open_regular(path)
    return None if fd is None else read_fd(fd, limit)


def read_fd(fd, limit):
    """The first ``limit`` bytes of the open file ``fd``, which is closed."""
    try:
        chunks, size = [], 0
        while size < limit:
            chunk = os.read(fd, limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


#: Where any process may create files (sticky, world-writable): emptied of nobody's after
#: every run.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def remove_leftovers():
    """Remove what nobody (agent code) left at the top of :data:`SHARED_TMP` (files, FIFOs,
    links, folders, whole), never through a link, sparing the checker's own directories
    (:data:`MADE`, some given to nobody): a run's ``/tmp`` and ``/dev/shm`` files never reach
    the next run. Called once the run's whole tree is killed, so nothing recreates them."""
    from palaestra_fork import MADE, NOBODY, remove_tree

    for base in SHARED_TMP:
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != NOBODY or entry.path in MADE:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


READ_ONLY_ROOTS = set()  # the directories read_only_dir made


def read_only_dir(files, prefix="ro-"):
    """A new directory holding ``files`` (relative path -> str or bytes) that runs may read
    and never write: root's, directories 0555, files 0444. For a reference's code and for
    inputs read by more than one run."""
    from palaestra_fork import make_private_dir

    root = make_private_dir(prefix)
    READ_ONLY_ROOTS.add(root)
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
    seal(root)
    return root


def close_to_runs(paths):
    """Make each directory of ``paths`` root's alone (mode 0700; never through a link): what
    a run cannot enter it cannot read, import or execute (a reference's, once agent code is
    about to run)."""
    for path in sorted(paths):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def seal(root):
    """Make the tree at ``root`` read-only for runs: every entry root's (links included, never
    followed), directories 0555, files 0444 (0555 where executable)."""
    import stat

    def fix(path, st):
        os.lchown(path, 0, 0)
        if stat.S_ISDIR(st.st_mode):
            os.chmod(path, 0o555)
        elif stat.S_ISREG(st.st_mode):
            os.chmod(path, 0o555 if st.st_mode & 0o111 else 0o444)

    for here, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(here, name)
            fix(path, os.lstat(path))
    fix(root, os.lstat(root))
    return root


def writable_by_runs(root):
    """The first path under ``root`` (itself included, and the directories above it) that a
    run (nobody) could change, or None: what a reference must never be read from."""
    import stat

    def open_to_runs(st):
        if stat.S_ISLNK(st.st_mode):
            return False  # a link's own mode means nothing; its target is checked where met
        return st.st_uid == 65534 or st.st_mode & 0o022

    path = os.path.abspath(root)
    above = os.path.dirname(path)
    while above != "/":
        st = os.lstat(above)
        if open_to_runs(st) and not (above == "/tmp" and st.st_mode & stat.S_ISVTX):
            return above
        above = os.path.dirname(above)
    for here, dirs, names in os.walk(path):
        for name in [""] + dirs + names:
            full = os.path.join(here, name) if name else here
            if open_to_runs(os.lstat(full)):
                return full
    return None


def copy_tree(src, dest):
    """``shutil.copytree(src, dest, symlinks=True)`` without shutil (its fnmatch imports re):
    links are copied as links (never followed, dangling or not), files and directories with
    their mode and times. Anything else the agent left (a FIFO, a socket, a device node) is
    skipped, never opened: the verdict is still computed, on the rest."""
    os.mkdir(dest)
    with os.scandir(src) as entries:
        for entry in entries:
            target = os.path.join(dest, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir(follow_symlinks=False):
                copy_tree(entry.path, target)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(entry.path, target)
    _copy_stat(os.stat(src, follow_symlinks=False), dest)


def _copy_file(src, dest):
    """Copy the regular file ``src``; nothing when it is no longer one (swapped meanwhile for a
    FIFO, a socket, a device: opened without blocking, never read)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:  # a socket (ENXIO), a link swapped in (ELOOP): skipped
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        with open(dest, "xb") as out:
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                out.write(chunk)
    finally:
        os.close(fd)
    _copy_stat(st, dest)


def _copy_stat(st, dest):
    os.chmod(dest, stat.S_IMODE(st.st_mode))
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
