"""Synthetic sensor traces for the hidden test (the checker makes the large ones again with
:func:`make`)."""


def trace(rng, n, spread):
    lines, v = ["# generated trace"], rng.randint(-spread, spread)
    for _ in range(n):
        v += rng.randint(-spread // 50 - 1, spread // 50 + 1)
        lines.append(str(v + (rng.choice([-1, 1]) * spread * 10 if rng.random() < 0.01 else 0)))
        r = rng.random()
        if r < 0.002:
            lines.append("")
        elif r < 0.003:
            lines.append("# recalibrated")
        elif r < 0.004:
            lines.append(f"  {rng.randint(-5, 5)}  ")
    return "\n".join(lines) + "\n"


def make(rng, n, spread, k):
    """{"trace.txt": a trace, "k": the window} (the hidden test passes k on the command line)."""
    return {"trace.txt": trace(rng, n, spread), "k": str(k)}
