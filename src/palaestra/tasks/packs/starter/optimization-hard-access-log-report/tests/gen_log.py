"""Synthetic access logs (the workspace sample and the hidden inputs come from here; the hidden
test's checker makes the large log again with :func:`make`)."""

import datetime as dt
import random

RESOURCES = ["items", "users", "orders", "carts", "search", "health", "img", "reviews"]


def make(rng, n_lines, n_clients):
    """{"access.log": text} drawn from ``rng``."""
    clients = [f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}"
               for _ in range(n_clients)]
    t = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    step = 86400 / n_lines
    lines = []
    for k in range(n_lines):
        ts = t + dt.timedelta(seconds=k * step + rng.uniform(-120, 5))  # some out of order
        if rng.random() < 0.004:  # flushed late by a buffering proxy
            ts -= dt.timedelta(seconds=rng.uniform(1800, 7200))
        ip = clients[min(int(rng.paretovariate(1.2)) - 1, n_clients - 1)] \
            if rng.random() < 0.5 else rng.choice(clients)
        res = rng.choice(RESOURCES)
        r = rng.random()
        if r < 0.5:
            path = f"/api/{res}/{rng.randint(1, 99999)}"
        elif r < 0.8:
            path = f"/api/{res}"
        elif r < 0.9:
            path = f"/api/{res}?page={rng.randint(1, 9)}"
        else:
            path = f"/api/{res}/{rng.randint(1, 999)}/{rng.choice(['history', 'photos'])}"
        status = rng.choices([200, 201, 304, 404, 500, 502, 503], [70, 5, 8, 8, 4, 2, 3])[0]
        latency = int(rng.lognormvariate(3.5, 0.8)) + (400 if status >= 500 else 0)
        line = (f"{ts.strftime('%Y-%m-%dT%H:%M:%SZ')} {ip} {rng.choice(['GET', 'POST'])} "
                f"{path} {status} {latency} ua{rng.randint(1, 40)}")
        if rng.random() < 0.002:
            line = rng.choice([line[: rng.randint(5, 40)], line + " extra", "",
                               line.replace(f" {status} ", " ??? "),
                               line.replace("T", " ", 1)])
        lines.append(line)
    return {"access.log": "\n".join(lines) + "\n"}


def write(out_path, seed, n_lines, n_clients):
    with open(out_path, "w") as f:
        f.write(make(random.Random(seed), n_lines, n_clients)["access.log"])


if __name__ == "__main__":
    import sys
    write(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
