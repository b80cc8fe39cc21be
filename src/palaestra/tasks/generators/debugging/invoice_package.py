"""invoice-package: a small multi-file invoicing package with injected bugs and a bug report.

The package parses amounts, prices lines (bulk discount), applies coupons and tax, and prints
invoice totals. Bugs are drawn from a pool of ten, each an exact edit of the correct source.
Difficulty knobs: the number of bugs (2 obvious on easy; 2 obvious + 1 subtle on medium; 1
obvious + 3 subtle on hard: rounding direction, boundary comparisons, order of operations) and
how much of it the bug report and the visible tests reveal (all of it on easy, all but one bug
on medium, only two bugs on hard). The hidden test calls every public function on secret random
and boundary inputs and compares with the correct package's results, computed when the task is
generated.
"""

from __future__ import annotations

import random
import textwrap

from palaestra.tasks.generators import family
from palaestra.tasks.generators.base import GeneratedTask, GenSpec
from palaestra.tasks.generators.debugging._kit import (
    CALLS_DRIVER,
    Bug,
    bug_solutions,
    call_tests,
    choose_bugs,
    inject,
    wrong_variants,
)

_PACKAGES = ["billing", "invoicing", "checkout", "ordercalc", "tillkit"]
_COUPON_WORDS = ["SAVE", "SPRING", "WELCOME", "LOYAL", "BULKY", "FRIENDS"]


def _sources(pkg: str, bulk_qty: int, bulk_pct: int, coupons: dict, rate_bp: int) -> dict:
    coupon_lines = "\n".join(
        f'    "{code}": ({pct}, {cap}, {minimum}),' for code, (pct, cap, minimum) in coupons.items()
    )
    return {
        f"{pkg}/__init__.py": f'"""{pkg}: invoice arithmetic in integer cents."""\n',
        f"{pkg}/money.py": textwrap.dedent(
            '''\
            """Amounts of money as integer cents."""


            def parse_amount(text):
                """Parse "12", "12.5", "-3.07", "+4" or "1,234.50" into integer cents.

                Surrounding spaces and thousands separators (",") are ignored. At most two
                decimals are allowed; anything else raises ValueError.
                """
                text = text.strip().replace(",", "")
                sign = -1 if text.startswith("-") else 1
                text = text.lstrip("+-")
                whole, _, frac = text.partition(".")
                if len(frac) > 2 or not (whole + frac).isdigit():
                    raise ValueError(f"not an amount: {text!r}")
                return sign * (int(whole or "0") * 100 + int(frac.ljust(2, "0")))


            def format_cents(cents):
                """Format integer cents as "1234.50", "-0.07" (no thousands separators)."""
                sign = "-" if cents < 0 else ""
                whole, frac = divmod(abs(cents), 100)
                return f"{sign}{whole}.{frac:02d}"
            '''
        ),
        f"{pkg}/pricing.py": textwrap.dedent(
            f'''\
            """Line pricing with a bulk discount."""

            BULK_QTY = {bulk_qty}
            BULK_PERCENT = {bulk_pct}


            def percent_of(cents, percent):
                """percent % of cents (cents >= 0), rounded half up to a whole cent."""
                return (cents * percent + 50) // 100


            def line_total(qty, unit_cents):
                """qty x unit price; lines of BULK_QTY or more items get BULK_PERCENT % off
                the line (the discount rounded half up to a whole cent)."""
                gross = qty * unit_cents
                if qty >= BULK_QTY:
                    gross -= percent_of(gross, BULK_PERCENT)
                return gross
            '''
        ),
        f"{pkg}/tax.py": textwrap.dedent(
            f'''\
            """Sales tax."""

            RATE_BP = {rate_bp}  # basis points: 1/100 of a percent


            def tax_for(cents, rate_bp=RATE_BP):
                """Tax on an amount, rounded half up (away from zero) to a whole cent.

                Refunds (negative amounts) are taxed symmetrically: tax_for(-x) == -tax_for(x).
                """
                sign = -1 if cents < 0 else 1
                return sign * ((abs(cents) * rate_bp + 5000) // 10000)
            '''
        ),
        f"{pkg}/coupons.py": textwrap.dedent(
            '''\
            """Coupon codes: (percent off, cap in cents, minimum subtotal in cents)."""

            from .pricing import percent_of

            COUPONS = {
            %s
            }


            def coupon_discount(subtotal, code):
                """The discount a coupon gives on a subtotal (cents).

                Codes are matched ignoring case and surrounding spaces; an unknown code raises
                KeyError. Subtotals below the coupon's minimum get no discount (a subtotal equal
                to the minimum qualifies). The discount is percent_of(subtotal, percent), but
                never more than the cap.
                """
                percent, cap, minimum = COUPONS[code.strip().upper()]
                if subtotal < minimum:
                    return 0
                return min(percent_of(subtotal, percent), cap)
            '''
        )
        % coupon_lines,
        f"{pkg}/invoice.py": textwrap.dedent(
            '''\
            """Invoice totals."""

            from .coupons import coupon_discount
            from .money import format_cents, parse_amount
            from .pricing import line_total
            from .tax import RATE_BP, tax_for


            def parse_lines(text):
                """Invoice lines "SKU QTY UNIT_PRICE" -> [(sku, qty, unit_cents)]; blank lines
                and lines starting with "#" are skipped."""
                lines = []
                for raw in text.splitlines():
                    raw = raw.strip()
                    if not raw or raw.startswith("#"):
                        continue
                    sku, qty, price = raw.split()
                    lines.append((sku, int(qty), parse_amount(price)))
                return lines


            def totals(lines, coupon=None, rate_bp=RATE_BP):
                """{"subtotal", "discount", "tax", "total"} in cents for [(sku, qty, unit_cents)].

                The coupon discount is computed on the subtotal; tax is charged on what is left
                after the discount; total = subtotal - discount + tax.
                """
                subtotal = sum(line_total(qty, unit) for _, qty, unit in lines)
                discount = coupon_discount(subtotal, coupon) if coupon else 0
                tax = tax_for(subtotal - discount, rate_bp)
                return {"subtotal": subtotal, "discount": discount, "tax": tax,
                        "total": subtotal - discount + tax}


            def render(lines, coupon=None, rate_bp=RATE_BP):
                """The printed invoice summary."""
                t = totals(lines, coupon, rate_bp)
                return "\\n".join(f"{k:<9}{format_cents(v):>12}" for k, v in t.items())
            '''
        ),
        f"{pkg}/__main__.py": textwrap.dedent(
            f'''\
            """python3 -m {pkg} INVOICE_FILE [COUPON]: print the invoice totals."""

            import sys

            from .invoice import parse_lines, render

            if __name__ == "__main__":
                if len(sys.argv) not in (2, 3):
                    sys.exit("usage: python3 -m {pkg} INVOICE_FILE [COUPON]")
                with open(sys.argv[1]) as f:
                    lines = parse_lines(f.read())
                print(render(lines, sys.argv[2] if len(sys.argv) == 3 else None))
            '''
        ),
    }


def _bugs(pkg: str, bulk_qty: int, bulk_pct: int, code: str, coupon: tuple, rate_bp: int):
    pct, cap, minimum = coupon
    m, p, t, c, i = (f"{pkg}/{n}.py" for n in ("money", "pricing", "tax", "coupons", "invoice"))
    # a gross with an exact half-cent bulk discount: qty * unit * pct ends in 50
    unit = next(u for u in range(101, 10_000) if (bulk_qty * u * bulk_pct) % 100 == 50)
    gross = bulk_qty * unit
    half_up = gross - (gross * bulk_pct + 50) // 100
    big = max(minimum, (cap * 100) // pct + 1000)
    half = next(x for x in range(1, 10_001) if x * rate_bp % 10_000 == 5_000)
    return [
        Bug(
            "decimal-digits",
            m,
            (('int(frac.ljust(2, "0"))', 'int(frac or "0")'),),
            (('int(frac.ljust(2, "0"))', 'int(frac or "0") * 10'),),
            'Prices with one decimal are read wrong: "4.5" comes out as 4.05.',
            '    def test_one_decimal(self):\n        self.assertEqual(parse_amount("4.5"), 450)\n'
            '        self.assertEqual(parse_amount("12.25"), 1225)\n',
        ),
        Bug(
            "thousands",
            m,
            (('text.strip().replace(",", "")', "text.strip()"),),
            (('text.strip().replace(",", "")', 'text.strip().split(",")[-1]'),),
            'Prices written with a thousands separator ("1,299.00") are rejected.',
            '    def test_thousands(self):\n        self.assertEqual(parse_amount("1,299.00"), 129900)\n',
        ),
        Bug(
            "negative-format",
            m,
            (
                ('sign = "-" if cents < 0 else ""', 'sign = ""'),
                ("divmod(abs(cents), 100)", "divmod(cents, 100)"),
            ),
            (("divmod(abs(cents), 100)", "divmod(cents, 100)"),),
            "Credit notes print nonsense amounts: -0.07 is shown as -1.93.",
            '    def test_negative(self):\n        self.assertEqual(format_cents(-7), "-0.07")\n',
        ),
        Bug(
            "coupon-cap",
            c,
            (
                (
                    "min(percent_of(subtotal, percent), cap)",
                    "max(percent_of(subtotal, percent), cap)",
                ),
            ),
            (
                (
                    "min(percent_of(subtotal, percent), cap)",
                    "percent_of(min(subtotal, cap), percent)",
                ),
            ),
            f"Coupon {code} gives more than its cap of {cap / 100:.2f} on small orders.",
            f"    def test_cap(self):\n        self.assertEqual(coupon_discount({big}, {code!r}), {cap})\n",
        ),
        Bug(
            "coupon-case",
            c,
            (("COUPONS[code.strip().upper()]", "COUPONS[code]"),),
            (("COUPONS[code.strip().upper()]", "COUPONS[code.upper()]"),),
            f'Customers typing "{code.lower()}" or " {code} " get an error.',
            f"    def test_case(self):\n        self.assertEqual(coupon_discount({big}, "
            f"{' ' + code.lower() + ' '!r}), coupon_discount({big}, {code!r}))\n",
        ),
        Bug(
            "bulk-boundary",
            p,
            (("if qty >= BULK_QTY:", "if qty > BULK_QTY:"),),
            (("if qty >= BULK_QTY:", "if qty >= BULK_QTY - 1:"),),
            f"Ordering exactly {bulk_qty} items gives no bulk discount.",
            f"    def test_bulk_boundary(self):\n        self.assertEqual(line_total({bulk_qty}, "
            f"{unit}), {half_up})\n",
            subtle=True,
        ),
        Bug(
            "half-cent",
            p,
            (("(cents * percent + 50) // 100", "cents * percent // 100"),),
            (("(cents * percent + 50) // 100", "round(cents * percent / 100)"),),
            "Bulk discounts are sometimes a cent too small.",
            f"    def test_half_cent(self):\n        self.assertEqual(line_total({bulk_qty}, "
            f"{unit}), {half_up})\n",
            subtle=True,
        ),
        Bug(
            "refund-tax",
            t,
            (
                (
                    "sign * ((abs(cents) * rate_bp + 5000) // 10000)",
                    "(cents * rate_bp + 5000) // 10000",
                ),
            ),
            (
                (
                    "sign * ((abs(cents) * rate_bp + 5000) // 10000)",
                    "int(cents * rate_bp / 10000 + 0.5)",
                ),
            ),
            "Tax on refunds does not mirror the tax on the original sale.",
            f"    def test_refund(self):\n        self.assertEqual(tax_for(-{half}), -tax_for({half}))\n",
            subtle=True,
        ),
        Bug(
            "coupon-minimum",
            c,
            (("if subtotal < minimum:", "if subtotal <= minimum:"),),
            (("if subtotal < minimum:", "if subtotal < minimum - 100:"),),
            f"An order of exactly {minimum / 100:.2f} does not qualify for {code}.",
            f"    def test_minimum(self):\n        self.assertGreater(coupon_discount({minimum}, "
            f"{code!r}), 0)\n",
            subtle=True,
        ),
        Bug(
            "tax-base",
            i,
            (("tax_for(subtotal - discount, rate_bp)", "tax_for(subtotal, rate_bp)"),),
            (
                (
                    "tax_for(subtotal - discount, rate_bp)",
                    "tax_for(subtotal, rate_bp) - tax_for(discount, rate_bp)",
                ),
            ),
            "With a coupon, the tax looks too high.",
            f"    def test_tax_after_coupon(self):\n        t = totals([('A', 1, {big})], {code!r})\n"
            f"        self.assertEqual(t['tax'], tax_for(t['subtotal'] - t['discount']))\n",
            subtle=True,
        ),
    ]


@family(
    "invoice-package",
    category="debugging",
    summary="Multi-file invoicing package with 2-4 injected bugs (subtler on hard) and a report",
)
def generate(spec: GenSpec) -> GeneratedTask:
    rng = spec.rng
    pkg = rng.choice(_PACKAGES)
    # odd percent, quantity not a multiple of 4: some line has an exact half-cent discount
    bulk_qty = rng.choice([q for q in range(5, 25) if q % 4])
    bulk_pct = rng.choice([3, 5, 7, 15, 25])
    # rates where some amount has an exact half-cent tax (else rounding bugs would be invisible)
    rate_bp = rng.choice([625, 725, 825, 875, 950, 1000, 1150, 1925])
    words = rng.sample(_COUPON_WORDS, 3)
    coupons = {
        f"{w}{rng.randrange(5, 30)}": (
            rng.choice([5, 10, 15, 20, 25]),
            rng.randrange(10, 80) * 100,
            rng.randrange(20, 150) * 100,
        )
        for w in words
    }
    code = next(iter(coupons))
    correct = _sources(pkg, bulk_qty, bulk_pct, coupons, rate_bp)
    pool = _bugs(pkg, bulk_qty, bulk_pct, code, coupons[code], rate_bp)
    n_obvious, n_subtle = {"easy": (2, 0), "medium": (2, 1), "hard": (1, 3)}[spec.tier]
    bugs = choose_bugs(rng, pool, n_obvious, n_subtle)
    # what the users noticed: everything on easy, all but one bug on medium, two bugs on hard
    shown_n = {"easy": len(bugs), "medium": len(bugs) - 1, "hard": 2}[spec.tier]
    shown = sorted(rng.sample(bugs, shown_n), key=bugs.index)
    workspace = inject(correct, bugs)
    workspace["BUG_REPORT.md"] = _report(pkg, shown, spec.tier)
    workspace["tests/test_invoice.py"] = _visible_tests(pkg, shown)
    workspace["sample_invoice.txt"] = _sample_invoice(rng)
    secret = rng.randrange(2**31)

    wrongs = wrong_variants(correct, bugs, rng)
    instruction = textwrap.dedent(
        f"""\
        # Fix the invoicing package

        `/app/{pkg}/` computes invoice totals in integer cents (run it as
        `python3 -m {pkg} sample_invoice.txt [COUPON]`). Users report wrong numbers:
        see `/app/BUG_REPORT.md`. The existing tests (`cd /app && python3 -m unittest discover -s
        tests`) fail.

        Find and fix the root causes. The report lists what users noticed{
            "" if spec.tier == "easy" else "; it may not be everything that is wrong"
        }. The
        behaviour the package must have is the one its docstrings document, for any valid input,
        not only the examples. Keep the module layout, function names, signatures and constants
        as they are; only the standard library is available.
        """
    )
    cases = _cases(pkg, secret, bulk_qty, coupons, rate_bp)
    return GeneratedTask(
        instruction=instruction,
        workspace=workspace,
        tests=call_tests(correct, CALLS_DRIVER, cases),
        **bug_solutions(correct, workspace, wrongs, note="the correct package sources"),
        tags=("python", "debugging", "multi-file"),
    )


def _report(pkg: str, shown: list[Bug], tier: str) -> str:
    items = "\n".join(f"* {b.symptom}" for b in shown)
    return (
        f"# {pkg}: wrong invoice numbers\n\nReported by the accounts team this week:\n\n{items}\n\n"
        "Amounts are integer cents everywhere; the docstrings are the specification.\n"
    )


def _visible_tests(pkg: str, shown: list[Bug]) -> str:
    body = "\n".join(b.visible_test for b in shown)
    return (
        "import unittest\n\n"
        f"from {pkg}.coupons import coupon_discount\n"
        f"from {pkg}.invoice import totals\n"
        f"from {pkg}.money import format_cents, parse_amount\n"
        f"from {pkg}.pricing import line_total\n"
        f"from {pkg}.tax import tax_for\n\n\n"
        f"class InvoiceTests(unittest.TestCase):\n{body}\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    )


def _sample_invoice(rng) -> str:
    lines = ["# sku qty unit_price"]
    for _k in range(rng.randrange(4, 9)):
        price = f"{rng.randrange(1, 3000)}.{rng.randrange(0, 100):02d}"
        if rng.random() < 0.3:
            price = price[:-1]
        lines.append(f"SKU-{rng.randrange(100, 999)} {rng.randrange(1, 30)} {price}")
    return "\n".join(lines) + "\n"


def _amount_text(rng, cents: int) -> str:
    """``cents`` as a user types it: a sign, thousands separators, one or no decimals, blanks."""
    sign = "-" if cents < 0 else rng.choice(["", "", "+"])
    whole, frac = divmod(abs(cents), 100)
    w = f"{whole:,}" if whole >= 1000 and rng.random() < 0.6 else str(whole)
    r = rng.random()
    if frac == 0 and r < 0.4:
        body = w
    elif frac % 10 == 0 and r < 0.7:
        body = f"{w}.{frac // 10}"
    else:
        body = f"{w}.{frac:02d}"
    return rng.choice(["", " "]) + sign + body + rng.choice(["", "  "])


def _cases(pkg: str, secret: int, bulk_qty: int, coupons: dict, rate: int) -> list:
    """``(label, calls)`` a public function: random and boundary arguments, drawn now."""
    rng = random.Random(secret)
    cases = []

    def add(label: str, mod: str, fn: str, argss: list) -> None:
        cases.append(
            (f"{label} ({len(argss)} cases)", [[f"{pkg}.{mod}", fn, list(a)] for a in argss])
        )

    cents = [rng.choice([1, 5, 7, 10, 50, 99, 100, 1234]) for _ in range(6)]
    cents += [rng.randrange(-(10**6), 10**6) for _ in range(40)]
    cents += [rng.randrange(10**6, 10**8) for _ in range(10)]
    fixed = ["4.5", "0.1", " -12.3 ", "1,299.00", "12,345", "+7.25", "1.234", "abc", "1,2,3.4"]
    amounts = [[_amount_text(rng, c)] for c in cents] + [[t] for t in fixed]
    add("parse_amount", "money", "parse_amount", amounts)
    add("format_cents", "money", "format_cents", [[c] for c in cents + [0, -1, -99, -100, -101]])
    percents = [
        [rng.randrange(0, 200000), rng.choice([1, 3, 5, 7, 10, 15, 25, 33])] for _ in range(60)
    ]
    add("percent_of", "pricing", "percent_of", percents + [[250, 1], [150, 1], [50, 1], [5, 10]])
    lines = [[q, rng.randrange(1, 50000)] for q in range(1, 2 * bulk_qty + 3) for _ in range(3)]
    add("line_total", "pricing", "line_total", lines)
    half = next(x for x in range(1, 10001) if x * rate % 10000 == 5000)
    edges = (0, 1, -1, half, -half, 3 * half, -3 * half, -half - 1, -half + 1)
    taxes = [[rng.randrange(-300000, 300000)] for _ in range(80)] + [[x] for x in edges]
    add("tax_for", "tax", "tax_for", taxes)
    discount_args = []
    for code, (pct, cap, minimum) in coupons.items():
        top = cap * 100 // pct
        for sub in (minimum - 1, minimum, minimum + 1, top, top + 100, 10 * minimum, 10**7):
            spelt = rng.choice([code, code.lower(), " " + code + " ", code.title()])
            discount_args.append([sub, spelt])
        discount_args += [[rng.randrange(0, 3 * minimum + top), code] for _ in range(6)]
        spellings = (code.lower(), " " + code + " ", code.title() + "  ")
        discount_args += [[2 * minimum, v] for v in spellings]
    discount_args.append([10**6, "NOSUCHCODE"])
    add("coupon_discount", "coupons", "coupon_discount", discount_args)
    invoices = []
    for _ in range(50):
        items = [
            ["S%d" % k, rng.randrange(1, 2 * bulk_qty + 2), rng.randrange(1, 40000)]
            for k in range(rng.randrange(1, 7))
        ]
        invoices.append([items, rng.choice([*coupons, None])])

    def tax(c: int) -> int:
        return (-1 if c < 0 else 1) * ((abs(c) * rate + 5000) // 10000)

    for code, (pct, cap, minimum) in coupons.items():  # where taxing before the discount differs
        s, found = minimum + rng.randrange(50), 0
        while found < 2 and s < minimum + 10**6:
            d = min((s * pct + 50) // 100, cap)
            if tax(s - d) != tax(s) - tax(d):
                invoices.append([[["X", 1, s]], code])
                found += 1
            s += rng.randrange(1, 40)
    add("totals", "invoice", "totals", invoices)
    add("render", "invoice", "render", invoices[:10] + [[[["R", 1, -5000]], None]])
    return cases
