"""The figures a benchmark reports and the results table: ``Target``, ``Figure`` (a row of the
table), ``Sample`` (one repetition's measurement), ``Row`` (a figure's samples aggregated) and
``render_table``; and the host rows (``HOST_FIGURES``, timed by ``reference_loop_ms``) that give
the machine's speed while the benchmarks ran.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A target from the issue: ``op`` (``>=``, ``<=``, ``<``) ``bound``, on the figure's median
    ``value`` or on its ``ratio`` to the baseline."""

    op: str
    bound: float
    on: str = "value"

    def met(self, value: float | None, ratio: float | None) -> bool | None:
        """Whether the target is met; None when the figure it is on was not measured."""
        x = value if self.on == "value" else ratio
        if x is None:
            return None
        return {">=": x >= self.bound, "<=": x <= self.bound, "<": x < self.bound}[self.op]

    def __str__(self) -> str:
        prefix = "ratio " if self.on == "ratio" else ""
        return f"{prefix}{self.op} {self.bound:g}"


@dataclass(frozen=True)
class Figure:
    """One row of the table: ``key`` (unique within its benchmark), ``label``, ``unit`` and the
    targets it is held to."""

    key: str
    label: str
    unit: str
    targets: tuple[Target, ...] = ()


@dataclass(frozen=True)
class Sample:
    """One repetition's measurement of figure ``key``, with the baseline measured in the same
    repetition (None when the figure has none)."""

    key: str
    value: float
    baseline: float | None = None


@dataclass
class Row:
    """The aggregate of a figure's samples: median, min and max of the values, median of the
    baselines and median of the per-repetition ratios (value / baseline)."""

    benchmark: str
    figure: Figure
    values: list[float] = field(default_factory=list)
    baselines: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def add(self, sample: Sample) -> None:
        self.values.append(sample.value)
        if sample.baseline is not None:
            self.baselines.append(sample.baseline)
            if sample.baseline and math.isfinite(sample.baseline):
                self.ratios.append(sample.value / sample.baseline)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def verdict(self) -> str:
        """``pass``, ``FAIL``, or ``-`` without a target (or nothing measured)."""
        results = [t.met(self.median, self.ratio) for t in self.figure.targets]
        if not results or None in results:
            return "-"
        return "pass" if all(results) else "FAIL"


def _number(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf"
    if x == int(x) or abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def render_table(rows: Iterable[Row]) -> str:
    """The results as a Markdown table (one line per figure)."""
    header = [
        "benchmark",
        "figure",
        "unit",
        "median",
        "min",
        "max",
        "baseline",
        "ratio",
        "target",
        "pass",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            row.benchmark,
            row.figure.label,
            row.figure.unit,
            _number(row.median),
            _number(min(row.values) if row.values else None),
            _number(max(row.values) if row.values else None),
            _number(statistics.median(row.baselines) if row.baselines else None),
            _number(row.ratio),
            "; ".join(str(t) for t in row.figure.targets) or "-",
            row.verdict,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The machine's speed when a table was measured: milliseconds of figures taken on a slower
# moment of a shared host are larger in proportion, roughly; ratios to a baseline measured in the
# same run are not (both sides slow down alike).
HOST = "host"
HOST_FIGURES = [
    Figure(
        f"reference_{when}",
        f"pure-Python reference loop (10,000,000 integer additions), {when} the benchmarks",
        "ms",
    )
    for when in ("before", "after")
]
REFERENCE_ADDITIONS = 10_000_000


def reference_loop_ms(repeat: int = 3) -> float:
    """The fastest of ``repeat`` wall times (ms) of one fixed pure-Python loop of
    ``REFERENCE_ADDITIONS`` integer additions: how fast this machine runs Python now (the
    fastest, so that one preempted timing does not count)."""
    best = math.inf
    for _ in range(repeat):
        began = time.perf_counter()
        total = 0
        for i in range(REFERENCE_ADDITIONS):
            total += i
        best = min(best, time.perf_counter() - began)
    if total != REFERENCE_ADDITIONS * (REFERENCE_ADDITIONS - 1) // 2:
        raise RuntimeError("the reference loop added wrong")
    return best * 1000
