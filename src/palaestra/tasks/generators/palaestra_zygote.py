"""The fork server's own code (stdlib only, Python 3.8+; shipped in ``tests/`` beside
``palaestra_fork.py``, which runs :data:`SOURCE` as the server: see its docstring).

The server reads requests (marshal, from the checker alone) and forks a child for each, which
runs a script, a module or code as ``python`` would, or execs a program. It also keeps the
standard library modules its Python children import, so that a child pays no import the one
before it paid:

* each Python child reports, when it ends, the modules it imported (a pipe of its own);
* when the next request comes, the server imports those of them that its ``PRELOADABLE``
  names (never another, whatever a child reports: agent code runs in them) and keeps the
  standard library modules that brings in, imported from its own ``sys.path`` (no script
  directory, no working directory);
* a child starts without them in ``sys.modules`` (it sees what a new interpreter would), and an
  ``import`` of one takes the server's copy, already executed, through a finder first on
  ``sys.meta_path``, unless a directory ahead of the standard library on ``sys.path`` holds a
  file or directory of that top-level name (a module of the agent's own that would shadow it in
  a new interpreter): then that child imports everything from disk, as a new interpreter would.

Nothing is imported ahead of need: a verification whose Python children are all different
programs pays each import once more (in the server), never for a module no child imported.
"""

SOURCE = r"""
import marshal, os, resource, sys


def _set_dumpable(flag):
    '''prctl(PR_SET_DUMPABLE, flag); raises when it fails.'''
    import _ctypes
    try:
        prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")
        failed = _ctypes.call_function(prctl, (4, flag, 0, 0, 0))
    except AttributeError:  # an interpreter without these internals
        import ctypes
        failed = ctypes.CDLL(None).prctl(4, flag, 0, 0, 0)
    if failed:
        raise OSError("prctl(PR_SET_DUMPABLE, %d) failed" % flag)


_set_dumpable(0)  # the server only
CTL_IN, CTL_OUT = os.dup(0), os.dup(1)
_null = os.open(os.devnull, os.O_RDWR)
os.dup2(_null, 0)
os.dup2(_null, 1)
os.close(_null)

# -- modules kept for the children ----------------------------------------------------------
#: Top-level standard library packages the server may import for its children: pure imports
#: (no output, no thread, no file, nothing outside the process at import time).
PRELOADABLE = frozenset('''
    abc argparse ast base64 binascii bisect bz2 calendar cmath codecs collections colorsys
    configparser contextlib contextvars copy copyreg csv dataclasses datetime decimal difflib
    dis email enum errno fnmatch fractions functools gettext glob gzip hashlib heapq hmac html
    http inspect io ipaddress itertools json keyword linecache locale logging lzma math
    numbers operator optparse pathlib pickle pprint queue quopri random re reprlib sched
    secrets selectors shlex shutil signal socket sqlite3 statistics string stringprep struct
    subprocess tempfile textwrap threading token tokenize traceback types typing unicodedata
    unittest urllib uuid warnings weakref xml zipfile zlib zoneinfo'''.split())
STDLIB = os.path.dirname(os.__file__)
SERVER_PATH = BASE = None  # set by setup(), at the first request
KEPT = {}  # name -> module, imported for the children (not in BASE)
TRIED = set()  # names a child reported (imported or refused: never tried twice)
REPORT_LIMIT = 60000  # bytes: less than a pipe holds, so a child never blocks on its report


def setup():
    '''At the first request (a verification that runs no Python child never pays it): the
    site-packages a forked server still lacks (SITE_MAIN, given by palaestra_fork), and json,
    which most children import and then inherit.'''
    global SERVER_PATH, BASE
    site_main = globals().get("SITE_MAIN")
    if site_main is not None:
        site_main()
    import json  # noqa: F401
    SERVER_PATH, BASE = list(sys.path), frozenset(sys.modules)  # every child has BASE


def _from_stdlib(module):
    path = getattr(module, "__file__", None)
    if path is None:
        return True  # built in
    path = os.path.realpath(path)
    return path.startswith(STDLIB + os.sep) and "-packages" + os.sep not in path


def keep(names):
    '''Import the reported names that may be kept (see palaestra_zygote), then keep every new
    standard library module in KEPT.'''
    for name in names:
        if len(TRIED) > 5000 or name in TRIED or name in sys.modules:
            continue
        TRIED.add(name)
        parts = name.split(".")
        if parts[0] not in PRELOADABLE or not all(p.isidentifier() for p in parts):
            continue
        try:
            __import__(name)
        except Exception:
            pass
    for name, module in list(sys.modules.items()):
        if name not in BASE and name not in KEPT:
            if _from_stdlib(module):
                KEPT[name] = module
            else:  # never in a child: it would not be a new interpreter's
                del sys.modules[name]


def _shadowed(tops):
    '''Whether a directory ahead of the standard library on sys.path holds one of ``tops``.'''
    for entry in sys.path:
        if entry in SERVER_PATH:
            return False
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        if any(n.partition(".")[0] in tops for n in names):
            return True
    return False


class Kept:
    '''The finder (and loader) that gives a child the server's copy of a kept module.'''

    def __init__(self, modules):
        self.modules = modules
        self.specs = {name: getattr(m, "__spec__", None) for name, m in modules.items()}
        self.tops = {name.partition(".")[0] for name in modules}
        self.path, self.usable = None, True

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules or target is not None:
            return None
        if sys.path != self.path:
            self.path = list(sys.path)
            self.usable = self.usable and not _shadowed(self.tops)
        if not self.usable:
            return None
        return type(sys.__spec__)(name, self)

    def create_module(self, spec):
        return self.modules.pop(spec.name)

    def exec_module(self, module):
        # already executed in the server: put back the spec the import system replaced
        module.__spec__ = self.specs.get(module.__name__)

    def report(self, fd):
        try:
            names = [n for n in sys.modules if n not in BASE]
            os.set_blocking(fd, False)
            os.write(fd, "\n".join(names).encode()[:REPORT_LIMIT])
        except Exception:
            pass


def exit_code(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def run(req, kept):
    os.setsid()
    for fd, name, flags in ((0, req["stdin"] or os.devnull, os.O_RDONLY),
                            (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_EXCL),
                            (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_EXCL)):
        opened = os.open(name, flags | os.O_NOFOLLOW, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(req["cwd"])
    if req["cpu"] is not None:
        soft = max(1, int(-(-req["cpu"] // 1)))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    if req.get("nproc"):  # nobody's processes: a fork bomb's forks fail past it
        resource.setrlimit(resource.RLIMIT_NPROC, (req["nproc"], req["nproc"]))
    os.environ.clear()
    os.environ.update(req["env"])
    kind, target = req["kind"], req["target"]
    if kind == "exec":  # any other program: as exec would start it (a failure: status 127)
        os.execvp(target, [target] + req["args"])
    for name in KEPT:  # a new interpreter's modules; an import of a kept one takes it back
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, kept)
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    try:
        if kind == "module":  # as python -m: argv[0] becomes the module's file
            sys.argv = ["-m"] + req["args"]
            sys.path.insert(0, os.getcwd())
            import runpy
            runpy._run_module_as_main(target)
        else:
            if kind == "code":
                sys.argv, source, name = ["-c"] + req["args"], target, "<string>"
            else:
                sys.argv, name = [target] + req["args"], target
                sys.path.insert(0, os.path.dirname(os.path.realpath(target)))
                main.__file__ = target
                try:
                    with open(target, "rb") as f:
                        source = f.read()
                except OSError as e:
                    sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n"
                                     % (sys.executable, target, e.errno, e.strerror))
                    return 2
            exec(compile(source, name, "exec", dont_inherit=True), main.__dict__)
        rc = 0
    except SystemExit as e:
        rc = exit_code(e)
    except BaseException:
        kind, value, tb = sys.exc_info()
        sys.excepthook(kind, value, tb.tb_next)  # as Python prints it: without this frame
        rc = 1
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            rc = rc or 120
    return rc


def read_exactly(size):
    data = b""
    while len(data) < size:
        chunk = os.read(CTL_IN, size - len(data))
        if not chunk:
            sys.exit(0)  # the checker is done
        data += chunk
    return data


def read_report(fd):
    '''What the child reported (at most REPORT_LIMIT bytes, never waiting): module names.'''
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < REPORT_LIMIT:
            chunk = os.read(fd, REPORT_LIMIT - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:  # nothing more now (a process the child left may hold the pipe)
        pass
    os.close(fd)
    return data.decode("ascii", "replace").split("\n")[:5000]


reported = []
while True:  # a request: its size (4 bytes) and its marshal form, from the checker only
    req = marshal.loads(read_exactly(int.from_bytes(read_exactly(4), "little")))
    if BASE is None:
        setup()
    if reported:  # only now: a verification that runs no more children pays nothing for them
        keep(reported)
        reported = []
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        rc = 127
        try:
            os.close(CTL_IN)
            os.close(CTL_OUT)
            os.close(report_r)
            _set_dumpable(1)  # an ordinary nobody process again, as a new one would be
            kept = Kept(dict(KEPT))
            rc = run(req, kept)
            kept.report(report_w)
        except BaseException as e:  # before the program ran: cannot start it
            try:
                os.write(2, ("cannot start %s: %s\n" % (req["target"][:80], e)).encode())
            except OSError:
                pass
        finally:
            os._exit(rc)
    os.close(report_w)
    os.write(CTL_OUT, b"%d\n" % pid)
    _, status, usage = os.wait4(pid, 0)  # its CPU, and that of what it waited for
    reported = read_report(report_r)
    used_us = int((usage.ru_utime + usage.ru_stime) * 1e6)
    os.write(CTL_OUT, b"%d %d %d\n" % (status, used_us, usage.ru_maxrss))
"""
