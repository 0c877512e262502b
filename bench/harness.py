"""The one way every benchmark compares systems, written for a skeptical reader.

- `sweep`: each system first finds its own best settings (batch, threads, attention, ...):
  every candidate is warmed up on a short slice of the work, then timed once on it, and the
  table is printed so the choice can be checked.
- `alternate`: the chosen settings, each warmed up on the exact work it will time, then timed
  for `rounds` rounds, the order of the systems rotating every round (a machine's speed drifts
  within minutes; systems timed back to back share the drift). Every round must do the same
  work (`Run.work`: e.g. output lengths), or the comparison stops with an error.
- `Ratio`: each pair's per-round ratios as a median with their min and max, never one run.
- `TreeMemory`: peak memory of a process and all its children together, PSS summed (pages
  shared between the processes counted once), sampled every 20 ms.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

ROUNDS = 5


@dataclass
class Run:
    """What one timed run did: `units` of work (sentences, tokens, pairs), `work` a summary that
    two systems doing the same work agree on (None: not checked), `output` kept for quality.
    A run in a subprocess that times its own steps gives `seconds` (else the harness times
    the call) and may give its peak memory, `memory_mib`."""

    units: float
    work: Hashable | None = None
    output: object = None
    seconds: float | None = None
    memory_mib: float | None = None


@dataclass
class Side:
    """One system at its chosen settings: `run()` does the work once and says what it did."""

    name: str
    settings: str
    run: Callable[[], Run]


@dataclass
class Timings:
    """Every round's rate (units per second) of each side, and what each run produced."""

    unit: str
    rates: dict[str, list[float]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, object] = field(default_factory=dict)
    memory: dict[str, list[float]] = field(default_factory=dict)

    def ratio(self, ours: str, peer: str, name: str) -> Ratio:
        """ours / peer rate per round, each round's pair timed together."""
        a, b = self.rates[ours], self.rates[peer]
        per_round = [x / y for x, y in zip(a, b, strict=True)]
        return Ratio(name, ours, peer, self.unit, a, b, per_round, self.settings)

    def memory_ratio(self, ours: str, peer: str, name: str) -> Ratio:
        """peer / ours peak memory per round (above 1: ours needs less)."""
        a, b = self.memory[ours], self.memory[peer]
        per_round = [y / x for x, y in zip(a, b, strict=True)]
        return Ratio(name, ours, peer, "MiB", a, b, per_round, self.settings)

    def report_speed_and_memory(self, ours: str, peer: str, rate: str, memory: str) -> list:
        """Prints the rate ratio (named `rate`) and the peak-memory ratio (named `memory`)
        of ours against the peer, a line each, and returns their records."""
        ratios = [self.ratio(ours, peer, rate), self.memory_ratio(ours, peer, memory)]
        for ratio in ratios:
            print("  " + ratio.line(), flush=True)
        return [ratio.record() for ratio in ratios]


@dataclass
class Ratio:
    name: str
    ours_name: str
    peer_name: str
    unit: str
    ours: list[float]
    peer: list[float]
    ratios: list[float]
    settings: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        lo, mid, hi = spread(self.ratios)
        return (
            f"{self.name:<46} {self.ours_name} {statistics.median(self.ours):9.1f}  "
            f"{self.peer_name} {statistics.median(self.peer):9.1f} {self.unit:<9} "
            f"ratio {mid:5.2f}x [{lo:.2f}-{hi:.2f}] n={len(self.ratios)}"
        )

    def record(self) -> dict:
        def summary(values):
            lo, mid, hi = spread(values)
            return {"median": mid, "min": lo, "max": hi}

        return {
            "name": self.name,
            "unit": self.unit,
            "ours": {"system": self.ours_name, **summary(self.ours)},
            "peer": {"system": self.peer_name, **summary(self.peer)},
            "ratio": summary(self.ratios),
            "rounds": len(self.ratios),
            "settings": {k: self.settings.get(k, "") for k in (self.ours_name, self.peer_name)},
        }


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def timed(run: Callable[[], Run]) -> tuple[float, Run]:
    start = time.perf_counter()
    done = run()
    seconds = time.perf_counter() - start
    return (seconds if done.seconds is None else done.seconds), done


def sweep(system: str, candidates: dict[str, Callable[[], Run]], warm: bool = True) -> str:
    """The candidate label with the highest rate on a short slice of the work; each is warmed
    up on that slice first (unless its runs warm themselves). Prints every candidate's rate."""
    rates = {}
    for label, run in candidates.items():
        if warm:  # first calls pay one-off costs (allocations, kernels, caches)
            run()
        seconds, done = timed(run)
        rates[label] = done.units / seconds
    best = max(rates, key=rates.__getitem__)
    row = "  ".join(f"{k} {rate:.1f}" + ("*" if k == best else "") for k, rate in rates.items())
    print(f"  sweep {system}: {row}", flush=True)
    return best


def alternate(
    sides: list[Side], unit: str, rounds: int = ROUNDS, same_work: bool = True, warm: bool = True
) -> Timings:
    """Warm each side up on the exact work (`warm=False`: the runs warm themselves, e.g. a
    subprocess timing its second pass), then time all sides `rounds` times, rotating which
    goes first. With `same_work`, every run of every side must report the same `work`."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    out = Timings(unit, {s.name: [] for s in sides}, {s.name: s.settings for s in sides})
    out.memory = {s.name: [] for s in sides}
    works = {}
    for side in sides if warm else []:
        works[side.name + " warm-up"] = side.run().work
    for r in range(rounds):
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            seconds, done = timed(side.run)
            out.rates[side.name].append(done.units / seconds)
            if done.memory_mib is not None:
                out.memory[side.name].append(done.memory_mib)
            out.outputs[side.name] = done.output
            works[f"{side.name} round {r + 1}"] = done.work
    if same_work:
        check_same_work(works)
    return out


def check_same_work(works: dict[str, Hashable]) -> None:
    """Refuse a comparison whose runs did different work (e.g. other output lengths)."""
    first_name, first = next(iter(works.items()))
    for name, work in works.items():
        if work != first:
            raise SystemExit(f"unequal work: {name} did not do what {first_name} did")


def run_measured(command: list[str], interval: float = 0.05) -> tuple[str, float]:
    """Run `command` to its end: its stdout, and the peak memory (MiB) of it and its children
    together (TreeMemory). Fails loudly, with its stderr, if it fails."""
    import subprocess

    with (
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as process,
        TreeMemory(process.pid, interval=interval) as memory,
    ):
        out, err = process.communicate()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{err[-2000:]}")
    return out, memory.peak_mib


class TreeMemory:
    """Peak memory of processes `pids` (default: this one) and their descendants, summed: PSS
    where the kernel gives it (shared pages split among the processes that map them), else
    RSS. A context manager; `peak_mib` after it exits."""

    def __init__(self, *pids: int, interval: float = 0.02):
        import psutil

        self.roots = [psutil.Process(pid) for pid in pids] or [psutil.Process()]
        self.interval, self.peak_mib = interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def now_mib(self) -> float:
        import psutil

        processes = []
        for root in self.roots:
            try:
                processes += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        total = 0
        for process in processes:
            try:
                info = process.memory_full_info()
                total += getattr(info, "pss", info.rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return total / 2**20

    def _sample(self) -> None:
        while True:
            self.peak_mib = max(self.peak_mib, self.now_mib())
            if self._stop.wait(self.interval):
                self.peak_mib = max(self.peak_mib, self.now_mib())
                return
