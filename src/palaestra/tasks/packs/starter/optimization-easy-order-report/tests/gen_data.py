"""Synthetic orders/customers files (used for the workspace sample and the hidden inputs; the
hidden test's checker makes the large export again with :func:`make`)."""

import random


def make(rng, n_customers, n_orders):
    """{"orders.csv": text, "customers.csv": text} drawn from ``rng``."""
    ids = [f"C{rng.randrange(10**7):07d}" for _ in range(n_customers)]
    for k in range(max(1, n_customers // 400)):  # a few ids appear twice in the export
        ids[rng.randrange(n_customers // 2, n_customers)] = ids[rng.randrange(n_customers // 2)]
    first = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo", "Gil", "Hal", "Ivy", "Jo"]
    last = ["Nash", "Ortiz", "Park", "Quinn", "Reyes", "Sato", "Tan", "Udo", "Vance"]
    customers = ["id,name,region\n"]
    for cid in ids:
        customers.append(f"{cid},{rng.choice(first)} {rng.choice(last)},{rng.choice('NSEW')}\n")
    orders = ["order_id,customer_id,amount\n"]
    for k in range(n_orders):
        if rng.random() < 0.01:
            cid = f"X{rng.randrange(10**6):06d}"
        else:
            cid = ids[min(int(rng.expovariate(1.0) * n_customers / 3), n_customers - 1)]
        orders.append(f"O{k:08d},{cid},{rng.randint(1, 50000) / 100:.2f}\n")
    return {"orders.csv": "".join(orders), "customers.csv": "".join(customers)}


def write(orders_path, customers_path, seed, n_customers, n_orders):
    files = make(random.Random(seed), n_customers, n_orders)
    for path, name in ((orders_path, "orders.csv"), (customers_path, "customers.csv")):
        with open(path, "w") as f:
            f.write(files[name])


if __name__ == "__main__":
    import sys
    write(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
