"""The edit-distance family's script check (stdlib only, Python 3.8+; shipped in the task's
``tests/`` as ``edit_script.py``, a ``function`` comparison of the declarative harness): the
script the answer returned is applied to the input and priced here, in the checker; it must
produce the entry at the optimal cost."""


def priced(ck, label, want, got, opts):
    """``want``: ``[a, entry, cost]``; ``got``: the answer's script for ``a``."""
    a, entry, cost = want
    try:
        result = price(a, got if got is not None else [], opts["costs"])
    except ValueError as e:
        return ck.check(label, False, str(e))
    return ck.equal(label + " result and cost", result, (entry, cost))


def price(a, ops, costs):
    """Apply a script to ``a``; return (result, cost) or raise ValueError if it is malformed."""
    ins, dele, sub, case, swap = costs
    out, pos, cost = [], 0, 0
    for op in ops if isinstance(ops, list) else [ops]:
        if not isinstance(op, list) or not op:
            raise ValueError(f"malformed step {op!r}")
        kind = op[0]
        if kind == "keep" and pos < len(a):
            out.append(a[pos])
            pos += 1
        elif kind == "sub" and pos < len(a) and len(op) == 2 and _char(op[1]):
            out.append(op[1])
            cost += _sub(a[pos], op[1], sub, case)
            pos += 1
        elif kind == "del" and pos < len(a):
            cost += dele
            pos += 1
        elif kind == "ins" and len(op) == 2 and _char(op[1]):
            out.append(op[1])
            cost += ins
        elif kind == "swap" and swap is not None and pos + 1 < len(a):
            out += [a[pos + 1], a[pos]]
            cost += swap
            pos += 2
        else:
            raise ValueError(f"step {op!r} cannot apply at position {pos}")
    if pos != len(a):
        raise ValueError(f"the script leaves {len(a) - pos} characters of the input unread")
    return "".join(out), cost


def _char(c):
    return isinstance(c, str) and len(c) == 1


def _sub(x, y, sub, case):
    if x == y:
        return 0
    if case is not None and x.lower() == y.lower():
        return case
    return sub
