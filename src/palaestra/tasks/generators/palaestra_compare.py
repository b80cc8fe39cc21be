"""The comparisons of the declarative hidden test (stdlib only, Python 3.8+; shipped in
``tests/`` beside ``palaestra_harness.py``): ``COMPARE[how](ck, label, want, got, options)``
records the checks of one case on a ``palaestra_check.Checker``. ``got`` is what the answer
gave: ``{"stdout", "files"}`` of a program, the value a Python call emitted, or
``{"columns", "rows"}`` of a query."""

import hashlib

from palaestra_check import json_dumps, json_loads, within


def digest(files):
    """SHA-256 of named texts (the generator's ``harness_spec.digest``)."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        if not isinstance(data, (str, bytes)):
            data = repr(data)  # a made Python call's input: lists, ints, strs
        data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        h.update(f"{name}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


def made_stale(made, make):
    """Whether an input made again in the checker differs from the generator's (``make``, of
    ``harness_spec.made``: a dict, a case's files or a call's input, is digested as it is,
    any other value as ``{"": it}``)."""
    return digest(made if isinstance(made, dict) else {"": made}) != make["sha256"]


def lines(text):
    """What the ``lines`` comparison sees of an output: its lines, right-stripped."""
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def _first_diff(want, got, what="line"):
    bad = [i for i in range(max(len(want), len(got))) if want[i : i + 1] != got[i : i + 1]]
    if not bad:
        return ""
    i = bad[0]
    w, g = want[i] if i < len(want) else None, got[i] if i < len(got) else None
    return f"{what} {i + 1}: expected {w!r}, got {g!r} ({len(bad)} of {len(want)} differ)"


def compare_output(ck, label, want, got, opts):
    """stdout (and the output files) byte for byte; a large expected output as digests; the
    exit status and the end of stderr too when expected (a program run with ``status``,
    ``stderr``)."""
    stdout, files = got["stdout"], got["files"]
    if "status" in want and got.get("status") != want["status"]:
        detail = "expected exit status {}, got {}".format(want["status"], got.get("status"))
        return ck.check(label, False, detail)
    if "stderr" in want and got.get("stderr") != want["stderr"]:
        detail = "expected {!r} on stderr, got {!r}".format(want["stderr"], got.get("stderr"))
        return ck.check(label, False, detail)
    if "stdout" not in want:
        if digest({"": stdout}) != want["stdout_sha256"]:
            return ck.check(
                label,
                False,
                "stdout differs from the reference's ({} lines expected, {} printed)".format(
                    want["stdout_lines"], len(stdout.splitlines())
                ),
            )
        hashes = {name: digest({"": text}) for name, text in files.items()}
        bad = [
            n
            for n in sorted(set(hashes) | set(want["files_sha256"]))
            if hashes.get(n) != want["files_sha256"].get(n)
        ]
        return ck.check(
            label,
            not bad,
            bad and f"output file {bad[0]}: differs or missing or unexpected",
        )
    if stdout != want["stdout"]:
        return ck.check(
            label, False, "stdout " + _first_diff(want["stdout"].splitlines(), stdout.splitlines())
        )
    wants = want["files"]
    bad = [n for n in sorted(set(wants) | set(files)) if wants.get(n) != files.get(n)]
    if not bad:
        return ck.check(label, True)
    name = bad[0]
    if name in wants and name in files:
        return ck.check(
            label,
            False,
            f"output file {name}: "
            + _first_diff(wants[name].splitlines(), files[name].splitlines()),
        )
    return ck.check(label, False, f"output file {name}: missing or unexpected")


def _text(text, newlines):
    if text is None or newlines != "universal":
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def compare_files(ck, label, want, got, opts):
    """The output files, one check a file ``want["files"]`` names (``file_label``, default
    "{label}: {name}"); stdout is not compared. ``newlines="universal"``: read as Python's text
    mode reads them (\\r\\n and \\r as \\n)."""
    newlines = opts.get("newlines")
    for name, text in want["files"].items():
        w, g = _text(text, newlines), _text(got["files"].get(name), newlines)
        if g is None or w is None:
            detail = "missing" if g is None else "unexpected"
        else:
            detail = _first_diff(w.splitlines(), g.splitlines())
        ck.check(
            opts.get("file_label", "{label}: {name}").format(label=label, name=name),
            w == g,
            detail,
        )


def compare_lines(ck, label, want, got, opts):
    """The output's lines (right-stripped); a large expected output as a digest."""
    have = lines(got["stdout"])
    if "lines" not in want:
        return ck.check(
            label,
            digest({"": "\n".join(have)}) == want["lines_sha256"],
            "output differs from the expected ({} lines expected, {} printed)".format(
                want["count"], len(have)
            ),
        )
    return ck.check(
        label,
        have == want["lines"],
        _first_diff(want["lines"], have, opts.get("what", "output line")),
    )


def close(got, want, tol):
    """Equal, numbers within ``tol`` (bools are not numbers), recursively."""
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and set(got) == set(want)
            and all(close(got[k], want[k], tol) for k in want)
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(close(g, w, tol) for g, w in zip(got, want))
        )
    numbers = (int, float)
    if isinstance(want, float) or isinstance(got, float):
        return (
            isinstance(got, numbers)
            and isinstance(want, numbers)
            and not isinstance(got, bool)
            and not isinstance(want, bool)
            and abs(got - want) <= tol
        )
    return type(got) is type(want) and got == want


def compare_json_keys(ck, label, want, got, opts):
    """stdout is a JSON object; one check per expected key (partial credit by key), after
    one check that it has exactly the expected keys when ``keys_label`` is given."""
    try:
        value = json_loads(got["stdout"])
    except (ValueError, RecursionError):
        return ck.check(opts["parse_label"].format(label=label), False, got["stdout"][-300:])
    if not isinstance(value, dict):
        return ck.check(opts["object_label"].format(label=label), False, repr(value)[:200])
    if opts.get("keys_label"):
        ck.equal(opts["keys_label"].format(label=label), sorted(value), sorted(want))
    for key in want:
        ck.check(
            opts["key_label"].format(label=label, key=key),
            close(value.get(key), want[key], opts.get("tol", 0.0)),
            f"expected {want[key]!r:.300}, got {value.get(key)!r:.300}",
        )


def compare_csv(ck, label, want, got, opts):
    """stdout is CSV: its header, then its rows, cell by cell: ``columns`` says how each is
    compared (None: exactly, "strip": blanks around ignored, a number: a tolerance)."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(got["stdout"])))
    header, rows = (rows[0] if rows else None), rows[1:]
    ck.equal(opts["header_label"].format(label=label), header, want["header"])
    ck.check(
        opts["rows_label"].format(label=label, n=len(want["rows"])),
        _same_cells(rows, want["rows"], opts["columns"]),
        "expected {}, got {}".format(want["rows"], rows),
    )


def _same_cells(rows, wants, columns):
    if len(rows) != len(wants):
        return False
    for row, w in zip(rows, wants):
        if len(row) != len(columns):
            return False
        for g, w_cell, how in zip(row, w, columns):
            if how is None and g != w_cell or how == "strip" and g.strip() != w_cell:
                return False
            if isinstance(how, (int, float)) and not within(g, w_cell, how):
                return False  # "nan" is within no tolerance
    return True


def compare_rows(ck, label, want, got, opts):
    """A query's rows (and its column names, when expected), numbers within ``tol``."""
    if "columns" in want:
        ck.equal(
            opts.get("columns_label", "columns on {label}").format(label=label),
            got["columns"],
            want["columns"],
        )
    rows, tol = got["rows"], opts.get("tol", 0.0)
    ok = len(rows) == len(want["rows"]) and all(
        isinstance(g, list) and len(g) == len(w) and all(close(a, b, tol) for a, b in zip(g, w))
        for g, w in zip(rows, want["rows"])
    )
    ck.check(
        opts.get("rows_label", "{label}").format(label=label, n=len(want["rows"])),
        ok,
        _first_diff(want["rows"], rows, "row"),
    )


def compare_equal(ck, label, want, got, opts):
    return ck.equal(label, got, want)


def _short(value, limit=160):
    text = json_dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def compare_items(ck, label, want, got, opts):
    """A list of results (a case's calls, a trace's steps): one check, equal item by item; its
    detail names the first differing item (``what``, default "case", counted from 0)."""
    if got == want:
        return ck.check(label, True)
    if not isinstance(got, list):
        return ck.check(label, False, "expected a list, got " + _short(got))
    i = next(k for k in range(max(len(want), len(got))) if want[k : k + 1] != got[k : k + 1])
    return ck.check(
        label,
        False,
        "{} {}: expected {}, got {}".format(
            opts.get("what", "case"),
            i,
            _short(want[i] if i < len(want) else None),
            _short(got[i] if i < len(got) else None),
        ),
    )


_STRIP = {"blanks": str.strip, "trailing_newlines": lambda text: text.rstrip("\n")}


def compare_path(ck, label, want, got, opts):
    """What a path holds (a ``state`` answer's ``{"type", "text"}``): ``want["type"]`` alone,
    one check of its type (``file``, ``dir``, ``absent``...); ``want["text"]``, one check of
    its text, which a missing or non-regular file fails (``strip``: ``blanks`` off both
    ends or ``trailing_newlines`` stripped first, a missing file then reading as empty)."""
    if "text" not in want:
        ok = got["type"] == want["type"]
        return ck.check(label, ok, "" if ok else "found: " + got["type"])
    text, strip = got["text"], want.get("strip")
    if strip:
        text = _STRIP[strip](text or "")
    return ck.equal(label, text, want["text"])


def compare_tree(ck, label, want, got, opts):
    """A program's ``trees`` (folders read back whole, see ``read_tree``): one check a folder
    ``want["trees"]`` names (``tree_label``, default "{label}: {name}"), its detail the first
    paths that differ."""
    for name, tree in want["trees"].items():
        have = got["trees"].get(name)
        if have is None or tree is None:
            bad = [] if have is tree else ["(the folder is missing, or a link)"]
        else:
            bad = sorted(p for p in set(tree) | set(have) if tree.get(p) != have.get(p))
        ck.check(
            opts.get("tree_label", "{label}: {name}").format(label=label, name=name),
            not bad,
            ", ".join(bad[:6]),
        )


def compare_kept(ck, label, want, got, opts):
    """A program's ``kept`` folders: one check a folder ``want["kept"]`` names (``kept_label``,
    default "{label}: {name} kept"), that none of its listed files was rewritten, replaced or
    removed by the run."""
    for name, paths in want["kept"].items():
        bad = sorted(set(paths) & set(got["rewritten"].get(name, ())))
        ck.check(
            opts.get("kept_label", "{label}: {name} kept").format(label=label, name=name),
            not bad,
            ", ".join(bad[:5]),
        )


def compare_status(ck, label, want, got, opts):
    """The exit status of a program run with ``status``: one check."""
    return ck.equal(label, got.get("status"), want["status"])


def compare_paths(ck, label, want, got, opts):
    """The absolute paths a program's ``look`` names, after the run: one check that each is
    what ``want["paths"]`` says (``{path: type}``: ``absent``, ``file``...)."""
    bad = sorted(p for p, t in want["paths"].items() if got["looked"][p]["type"] != t)
    return ck.check(label, not bad, ", ".join(bad[:5]))


def compare_each(ck, label, want, got, opts):
    """Several comparisons of one output (``of``: their options, ``want`` a list of their
    expected values, in order): a report on stdout and the folder the run changed. A
    comparison's ``label`` (default "{label}") names its checks."""
    for sub, w in zip(opts["of"], want):
        COMPARE[sub["how"]](ck, sub.get("label", "{label}").format(label=label), w, got, sub)


COMPARE = {
    "output": compare_output,
    "lines": compare_lines,
    "json_keys": compare_json_keys,
    "csv": compare_csv,
    "rows": compare_rows,
    "equal": compare_equal,
    "items": compare_items,
    "files": compare_files,
    "path": compare_path,
    "tree": compare_tree,
    "kept": compare_kept,
    "status": compare_status,
    "paths": compare_paths,
    "each": compare_each,
}
