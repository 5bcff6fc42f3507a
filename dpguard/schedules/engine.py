"""The one discrete-event simulator behind every schedule.

Model (schedules.md section 1): each device runs its ops in the given order; an op starts when
its device is free and its dependencies have finished; communication takes no time.
Dependencies: F(s,m) after F(s-1,m); B or I(s,m) after F(s,m) and after B or I(s+1,m) (the
last stage needs only its own F); W(s,m) after I(s,m). An overlapped pair needs both halves'
dependencies and finishes both at its end.

Because each device's order is fixed, start times are the longest paths of a DAG and do not
depend on the order in which ops are evaluated. The simulator is therefore a single pass with
one pointer per rank and a stack of ranks that may proceed: a rank runs ops until one has an
unfinished dependency, parks on that dependency, and is woken when it finishes. Each op is
handled once, so the cost is linear in the number of ops. If no rank can proceed while some are
unfinished, the orders deadlock and `DeadlockError` shows the rank x step grid.

Times are integers ("ticks"): op times are scaled by the least common denominator so the
arithmetic is exact and fast; `Timeline.scale` converts back.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

from dpguard.errors import DeadlockError
from dpguard.schedules.ops import FB, B, F, I, Layout, Op, OpTimes, OrderError, W
from dpguard.schedules.orders import Orders

_DEADLOCK_CONTEXT = (3, 3)  # steps shown before / after where each rank stopped


@dataclass(frozen=True)
class Timeline:
    """Result of one run, in integer ticks (``value / scale`` is the time)."""

    layout: Layout
    orders: Orders
    starts: tuple[tuple[int, ...], ...]
    ticks: dict[str, int]
    scale: int
    makespan: int
    busy: tuple[int, ...]
    peak_activations: tuple[int, ...]
    sends: tuple[int, ...]
    recvs: tuple[int, ...]
    events: int


def tick_table(times: OpTimes) -> tuple[dict[str, int], int]:
    """Op durations as integers, and the scale that maps them back to `Fraction` times."""
    values = {k: times.of(k) for k in (F, B, I, W, FB)}
    scale = lcm(*(v.denominator for v in values.values()))
    return {k: int(v * scale) for k, v in values.items()}, scale


def label(op: Op) -> str:
    """Compact op name for error messages: 'F(p0,s3,m2)' or 'F(p0,s3,m2)&B(...)'."""
    text = f"{op.kind[0]}(p{op.pipe},s{op.stage},m{op.mb})"
    if op.kind == FB:
        text += f"&B(p{op.b_pipe},s{op.b_stage},m{op.b_mb})"
    return text


def _awaited(layout: Layout, item: int, is_backward: bool) -> str:
    """Name the op behind a dependency and the rank that must run it."""
    rest, mb = divmod(item, layout.microbatches_per_pipe)
    pipe, stage = divmod(rest, layout.stages)
    what = "B/I" if is_backward else "F"
    return f"{what}(p{pipe},s{stage},m{mb}) on rank {layout.rank_of[pipe][stage]}"


def _deadlock(layout: Layout, orders: Orders, pos: list[int], why: dict[int, int]) -> str:
    """The rank x step grid around the deadlock: one row per rank, its ops from a few steps
    before to a few after the one it stopped at, aligned on that step. `why`: the key each
    rank waits under (`run`), named here only: a rank parks at almost every op, and naming
    each wait as it happened was a tenth of a simulation."""
    size = layout.pipes * layout.stages * layout.microbatches_per_pipe
    named = {r: _awaited(layout, key % size, key >= size) for r, key in why.items()}
    before, after = _DEADLOCK_CONTEXT
    rows = []
    for r, order in enumerate(orders):
        at = pos[r]
        cells = [
            "" if not 0 <= step < len(order) else label(order[step])
            for step in range(at - before, at + after + 1)
        ]
        rows.append((r, at, cells))
    width = max((len(c) for _, _, cells in rows for c in cells), default=1) + 3
    head = (
        f"{'rank':>4} {'step':>6} |"
        + "".join(
            f"{k - before:+d}".center(width) if k != before else "stuck".center(width)
            for k in range(before + after + 1)
        ).rstrip()
    )
    lines = [
        "schedule deadlock (a generator bug): no rank can run its next op. Each row shows a "
        "rank's ops around the step where it stopped; [op] cannot start, * marks done ops.",
        head,
    ]
    for r, at, cells in rows:
        marked = [
            (f"[{c}]" if k == before and c else (f"*{c}" if k < before and c else c)).ljust(width)
            for k, c in enumerate(cells)
        ]
        state = "finished" if at >= len(orders[r]) else f"waits for {named.get(r, '?')}"
        lines.append(f"{r:>4} {at:>6} |" + "".join(marked).rstrip() + f"   ({state})")
    return "\n".join(lines)


def _item_bases(layout: Layout) -> list[list[list[int]]]:
    """Per rank, ``[pipe][stage] -> index of (pipe, stage, mb 0)``, or -1 for stages the rank
    does not hold, so that an op placed on the wrong rank is caught by one comparison."""
    n_stages, mbs = layout.stages, layout.microbatches_per_pipe
    return [
        [
            [(p * n_stages + s) * mbs if row[s] == r else -1 for s in range(n_stages)]
            for p, row in enumerate(layout.rank_of)
        ]
        for r in range(layout.ranks)
    ]


def run(layout: Layout, orders: Orders, times: OpTimes) -> Timeline:
    """Simulate `orders` on `layout`; raise DeadlockError / OrderError on generator bugs."""
    sim = _Simulation(layout, orders, times)
    stack = sim.stack
    while stack:
        sim.advance(stack.pop())
    return sim.timeline()


class _Simulation:
    """The simulator's state. Work item (pipe, stage, mb) has index (pipe*S + stage)*mbs + mb,
    so the same micro-batch one stage later is `mbs` further on. f_end/b_end hold the end tick
    of its F / its B or I (-1 = not yet). A rank blocked on f_end[i] parks under key i, on
    b_end[i] under size + i. `advance` is the hot loop: it reads the state through locals."""

    __slots__ = (
        "b_end",
        "bases",
        "busy",
        "clock",
        "consts",
        "f_end",
        "layout",
        "lives",
        "orders",
        "peak",
        "pos",
        "scale",
        "size",
        "stack",
        "starts",
        "ticks",
        "w_state",
        "waiting",
        "why",
    )

    def __init__(self, layout: Layout, orders: Orders, times: OpTimes) -> None:
        self.ticks, self.scale = tick_table(times)
        ranks = layout.ranks
        self.layout, self.orders = layout, orders
        self.size = size = layout.pipes * layout.stages * layout.microbatches_per_pipe
        self.f_end = [-1] * size
        self.b_end = [-1] * size
        self.w_state = bytearray(size)  # 1: ran as I and owes a W; 2: its W ran
        self.bases = _item_bases(layout)
        self.pos = [0] * ranks
        self.clock = [0] * ranks
        self.busy = [0] * ranks
        self.lives = [0] * ranks  # activations held: +1 at each F, -1 at each B or I (s5)
        self.peak = [0] * ranks
        self.starts: list[list[int]] = [[] for _ in range(ranks)]
        self.waiting: dict[int, list[int]] = {}
        self.why: dict[int, int] = {}  # each parked rank's key, named only on a deadlock
        self.stack = list(range(ranks - 1, -1, -1))
        t = self.ticks
        # what `advance` reads on every wake-up, unpacked in one step
        self.consts = (
            (t[F], t[B], t[I], t[W], t[FB]),
            (self.f_end, self.b_end, self.w_state, self.waiting, self.stack),
            (size, layout.microbatches_per_pipe, layout.stages - 1),
        )

    def bug(self, r: int, step: int, problem: str) -> OrderError:
        op = self.orders[r][step]
        return OrderError([f"rank {r} step {step}: {label(op)} {problem} (generator bug)"])

    def paired(self, r: int, i: int, op: Op, ready: int) -> tuple[int, int, int]:
        """An overlapped F&B's backward half: (ready, the key it waits on or -1, its item)."""
        stage, mbs = op[5], self.layout.microbatches_per_pipe
        b_item = self.bases[r][op[4]][stage]
        if b_item < 0 or not 0 <= op[6] < mbs:
            raise self.bug(r, i, "names a stage or micro-batch this rank does not hold")
        b_item += op[6]
        d = self.f_end[b_item]
        if d < 0:
            return ready, b_item, b_item
        ready = max(ready, d)
        if stage < self.layout.stages - 1:
            d = self.b_end[b_item + mbs]
            if d < 0:
                return ready, self.size + b_item + mbs, b_item
            ready = max(ready, d)
        return ready, -1, b_item

    def advance(self, r: int) -> None:
        """Run rank `r`'s ops until one waits on an unfinished dependency (it parks)."""
        (t_f, t_b, t_i, t_w, t_fb), (f_end, b_end, w_state, waiting, stack), sizes = self.consts
        size, mbs, last = sizes
        order, i, t, st, base = (
            self.orders[r],
            self.pos[r],
            self.clock[r],
            self.starts[r],
            self.bases[r],
        )
        live, top, work = self.lives[r], self.peak[r], self.busy[r]
        b_item, n_ops = 0, len(order)
        while i < n_ops:
            op = order[i]
            kind = op[0]
            item = base[op[1]][op[2]]
            if item < 0 or not 0 <= op[3] < mbs:
                raise self.bug(r, i, "names a stage or micro-batch this rank does not hold")
            item += op[3]
            ready = t
            wait = -1
            if kind in (F, FB):
                if op[2]:
                    d = f_end[item - mbs]
                    if d < 0:
                        wait = item - mbs
                    elif d > ready:
                        ready = d
                if kind == FB and wait < 0:
                    ready, wait, b_item = self.paired(r, i, op, ready)
            elif kind == W:
                d = b_end[item]
                if d < 0:
                    wait = size + item
                elif d > ready:
                    ready = d
            else:
                d = f_end[item]
                if d < 0:
                    wait = item
                elif d > ready:
                    ready = d
                if op[2] < last and wait < 0:
                    d = b_end[item + mbs]
                    if d < 0:
                        wait = size + item + mbs
                    elif d > ready:
                        ready = d
            if wait >= 0:
                waiting.setdefault(wait, []).append(r)
                self.why[r] = wait
                break
            st.append(ready)
            if kind == FB:
                t = ready + t_fb
                if f_end[item] >= 0 or b_end[b_item] >= 0:
                    raise self.bug(r, i, "runs twice")
                f_end[item] = b_end[b_item] = t
                # the forward allocates before the paired backward frees (schedules.md s5)
                if live + 1 > top:
                    top = live + 1
                stack.extend(waiting.pop(item, ()))
                woken = waiting.pop(size + b_item, None)
            elif kind == F:
                t = ready + t_f
                if f_end[item] >= 0:
                    raise self.bug(r, i, "runs twice")
                f_end[item] = t
                live += 1
                if live > top:
                    top = live
                woken = waiting.pop(item, None)
            elif kind == W:
                if w_state[item] != 1:
                    raise self.bug(r, i, "has no pending I (a second W, or W after a full B)")
                w_state[item] = 2
                t = ready + t_w
                woken = None
            else:
                t = ready + (t_b if kind == B else t_i)
                if b_end[item] >= 0:
                    raise self.bug(r, i, "runs twice")
                b_end[item] = t
                if kind == I:
                    w_state[item] = 1
                live -= 1
                woken = waiting.pop(size + item, None)
            if woken:
                stack.extend(woken)
            work += t - ready
            i += 1
        self.pos[r], self.clock[r], self.lives[r], self.peak[r], self.busy[r] = (
            i,
            t,
            live,
            top,
            work,
        )

    def timeline(self) -> Timeline:
        """The finished run; a deadlock or an op never run is a generator bug."""
        layout, orders, pos = self.layout, self.orders, self.pos
        if any(pos[r] < len(orders[r]) for r in range(layout.ranks)):
            raise DeadlockError([_deadlock(layout, orders, pos, self.why)])
        if -1 in self.f_end or -1 in self.b_end or 1 in self.w_state:
            raise OrderError(["the orders leave some F, backward or W never run (generator bug)"])
        sends, recvs = _messages(layout)
        return Timeline(
            layout=layout,
            orders=orders,
            starts=tuple(tuple(x) for x in self.starts),
            ticks=self.ticks,
            scale=self.scale,
            makespan=max(self.clock, default=0),
            busy=tuple(self.busy),
            peak_activations=tuple(self.peak),
            sends=sends,
            recvs=recvs,
            events=sum(len(o) for o in orders),
        )


def _messages(layout: Layout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """P2P sends and receives per rank (schedules.md section 6).

    One message is one activation (F of stage s to stage s+1) or one input gradient (B or I of
    stage s to stage s-1) crossing devices; DualPipeV's turn of the V is a local hand-over.
    `run` has checked that every F and every backward ran exactly once, so the per-item
    counts follow from the layout.
    """
    sends = [0] * layout.ranks
    recvs = [0] * layout.ranks
    for row in layout.rank_of:
        for s in range(len(row) - 1):
            if row[s] != row[s + 1]:  # activation down, gradient back up
                for src, dst in ((row[s], row[s + 1]), (row[s + 1], row[s])):
                    sends[src] += layout.microbatches_per_pipe
                    recvs[dst] += layout.microbatches_per_pipe
    return tuple(sends), tuple(recvs)
