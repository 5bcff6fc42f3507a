"""Time the schedule simulator: every schedule at P in {4, 8, 16, 32, 64}, M in {2P, 8P, 32P}.

Run: ``python benchmarks/bench_schedules.py`` with dpguard installed (benchmarks/run.py runs
it as one section of the whole suite). Each case reports
the best of several runs of `dpguard.schedules.simulate` (order generation + simulation +
result), its event count (ops executed; an overlapped pair is one), and the ratio of its time
per (P x M) to that of the smallest case of the same schedule measured in this run. A ratio
that stays flat or falls as P x M grows shows the cost is linear in P x M (small cases carry
fixed overhead, so their per-item cost is higher). The two targets of issue #3 are printed
at the end; nothing here asserts absolute times, which depend on the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from dpguard.schedules import SCHEDULES, compare, simulate

RANKS = (4, 8, 16, 32, 64)
FACTORS = (2, 8, 32)


def best_of(fn: Callable[[], object], budget: float = 0.2, runs: int = 3) -> float:
    """Fastest of at least `runs` calls, repeating cheap calls until `budget` seconds pass."""
    best = float("inf")
    spent = 0.0
    count = 0
    while count < runs or spent < budget:
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        count += 1
        if count >= 50:
            break
    return best


def measure(ranks: Sequence[int] = RANKS, factors: Sequence[int] = FACTORS) -> list[dict[str, Any]]:
    """One row per (schedule, P, M): best time, events, and time per (P x M) relative to the
    smallest case of the same schedule measured in this run."""
    rows: list[dict[str, Any]] = []
    for name, spec in SCHEDULES.items():
        v = 2 if spec.uses_virtual_stages else 1
        base = None
        for p in ranks:
            for factor in factors:
                m = factor * p
                result = simulate(name, p, m, virtual_stages=v)
                seconds = best_of(lambda n=name, p=p, m=m, v=v: simulate(n, p, m, virtual_stages=v))
                per_item = seconds / (p * m)
                base = base or per_item
                rows.append(
                    {
                        "schedule": name,
                        "ranks": p,
                        "microbatches": m,
                        "events": result.events,
                        "seconds": seconds,
                        "per_pm_ratio": per_item / base,
                    }
                )
    return rows


def targets() -> dict[str, float]:
    return {
        "dualpipe_p64_m2048_seconds": best_of(lambda: simulate("dualpipe", 64, 2048)),
        "compare_p16_m256_seconds": best_of(lambda: compare(16, 256)),
    }


def main() -> int:
    print(f"{'schedule':<18}{'P':>4}{'M':>6}{'events':>9}{'ms':>10}{'us/event':>10}{'ratio':>8}")
    for row in measure():
        print(
            f"{row['schedule']:<18}{row['ranks']:>4}{row['microbatches']:>6}{row['events']:>9}"
            f"{row['seconds'] * 1e3:>10.2f}{row['seconds'] / row['events'] * 1e6:>10.2f}"
            f"{row['per_pm_ratio']:>8.2f}"
        )
    t = targets()
    print()
    print(
        f"target: dualpipe P=64 M=2048 < 0.5 s   measured {t['dualpipe_p64_m2048_seconds']:.3f} s"
    )
    print(f"target: compare  P=16 M=256  < 0.3 s   measured {t['compare_p16_m256_seconds']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
