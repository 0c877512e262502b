"""The benchmark harness (bench/harness.py) and what the benchmarks build on it: the order of
the rounds, the ratios' spread, the refusal of unequal work, the sweep's choice, memory over a
process tree, the generated corpus's growing vocabulary, and equal decoder steps per engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402
from harness import Run, Side, alternate, check_same_work, run_measured, sweep  # noqa: E402


def scripted(name: str, calls: list[str], seconds: list[float], work=None) -> Side:
    """A side whose runs take the given seconds in turn (the first one is the warm-up)."""
    queue = list(seconds)

    def run() -> Run:
        calls.append(name)
        return Run(10.0, work, name, queue.pop(0))

    return Side(name, f"{name} settings", run)


def test_alternate_warms_every_side_then_rotates_the_order_each_round():
    calls: list[str] = []
    sides = [scripted(n, calls, [1.0] * 4) for n in "abc"]
    alternate(sides, "u/s", rounds=3)
    assert calls[:3] == ["a", "b", "c"]  # warm-ups, on the exact work
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]


def test_ratio_is_the_median_of_per_round_ratios_with_min_and_max():
    calls: list[str] = []
    ours = scripted("ours", calls, [9, 1.0, 2.0, 1.0, 1.0, 4.0])  # 10 units per run
    peer = scripted("peer", calls, [9, 2.0, 2.0, 4.0, 1.0, 2.0])
    timings = alternate([ours, peer], "u/s", rounds=5)
    ratio = timings.ratio("ours", "peer", "x")
    assert ratio.ratios == [2.0, 1.0, 4.0, 1.0, 0.5]  # each round's pair, not the medians' ratio
    record = ratio.record()
    assert record["ratio"] == {"median": 1.0, "min": 0.5, "max": 4.0}
    assert record["ours"]["median"] == 10.0 and record["rounds"] == 5
    assert record["settings"] == {"ours": "ours settings", "peer": "peer settings"}
    assert "1.00x [0.50-4.00] n=5" in ratio.line()


def test_memory_ratio_is_peer_over_ours():
    sides = [
        Side("ours", "", lambda: Run(1.0, seconds=1.0, memory_mib=100.0)),
        Side("peer", "", lambda: Run(1.0, seconds=1.0, memory_mib=300.0)),
    ]
    timings = alternate(sides, "u/s", rounds=2, warm=False)
    assert timings.memory_ratio("ours", "peer", "m").ratios == [3.0, 3.0]


def test_speed_and_memory_are_reported_as_two_named_ratios(capsys):
    sides = [
        Side("ours", "", lambda: Run(4.0, seconds=1.0, memory_mib=100.0)),
        Side("peer", "", lambda: Run(4.0, seconds=2.0, memory_mib=200.0)),
    ]
    timings = alternate(sides, "u/s", rounds=2, warm=False)
    records = timings.report_speed_and_memory("ours", "peer", "x/rate", "x/memory")
    assert [(r["name"], r["ratio"]["median"]) for r in records] == [
        ("x/rate", 2.0),
        ("x/memory", 2.0),
    ]
    assert capsys.readouterr().out.count("2.00x [2.00-2.00] n=2") == 2


def test_unequal_work_stops_the_comparison():
    calls: list[str] = []
    sides = [scripted("a", calls, [1.0] * 3, (5, 5)), scripted("b", calls, [1.0] * 3, (5, 6))]
    with pytest.raises(SystemExit, match="unequal work: b"):
        alternate(sides, "u/s", rounds=2)
    check_same_work({"a": (5, 5), "b": (5, 5)})  # equal work passes
    equal = [scripted(n, calls, [1.0] * 2, (5, 5)) for n in "cd"]
    assert alternate(equal, "u/s", rounds=1).rates == {"c": [10.0], "d": [10.0]}


def test_sweep_picks_the_fastest_candidate_and_shows_them_all(capsys):
    choice = sweep(
        "system",
        {
            "slow": lambda: Run(10.0, seconds=2.0),
            "fast": lambda: Run(10.0, seconds=0.5),
            "middle": lambda: Run(10.0, seconds=1.0),
        },
    )
    assert choice == "fast"
    assert "slow 5.0  fast 20.0*  middle 10.0" in capsys.readouterr().out


def test_tree_memory_counts_the_children():
    """A parent that starts a child holding 300 MiB: the tree's peak holds the child's."""
    child = "import time; held = b'x' * (300 * 2**20); time.sleep(1)"
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    _, peak = run_measured([sys.executable, "-c", parent])
    assert peak > 300


def test_a_failing_command_says_why():
    with pytest.raises(SystemExit, match="no such thing"):
        run_measured([sys.executable, "-c", "import sys; sys.exit('no such thing')"])


def test_rounds_must_be_positive():
    with pytest.raises(ValueError):
        harness.alternate([], "u/s", rounds=0)


def test_generated_corpus_vocabulary_keeps_growing(tmp_path, multi30k_dir, monkeypatch):
    """Heaps' law: 10x the pairs bring several times the distinct words (a repeated corpus
    brings none), and made-up words never collide."""
    monkeypatch.setenv("NMT_DATA_DIR", str(multi30k_dir))
    from bench_data import heaps_corpus, made_up_word

    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir(), large.mkdir()
    few, many = heaps_corpus(small, 2_000)["en"], heaps_corpus(large, 20_000)["en"]
    assert 10**0.4 < many / few < 10**0.9
    lines = (large / "train.en").read_text().splitlines()
    assert len(lines) == 20_000 and all(lines)
    assert len({made_up_word(r) for r in range(20_000)}) == 20_000


def test_forced_steps_are_equal_work_on_both_engines(overfit_engine, model_pt, tmp_path):
    """bench_inference holds every sentence to the same decoder steps: ours forces EOS at its
    limit, CTranslate2 stops without one, so each is asked for what makes the steps equal."""
    from bench_inference import Ours, ct2_engine

    from nmt.checkpoint import load_checkpoint
    from nmt.ct2.model_dir import export
    from nmt.decoding.settings import DecodeConfig

    export(load_checkpoint(model_pt), tmp_path / "int8", "int8", False)
    lines = ["A man rides a bike.", "Two dogs play in the snow near a large tree.", "Hi"]
    beam = DecodeConfig(strategy="beam", beam_size=4, len_penalty=1.0, length_norm="power")
    for search in (DecodeConfig(), beam):
        torch_run = Ours(overfit_engine).decode(lines, search, steps=7)
        ct2_run = ct2_engine(tmp_path / "int8", 1024, 1, "cpu", "default").decode(
            lines, search, steps=7
        )
        assert torch_run.work == ct2_run.work == (7, 7, 7)
        assert [len(t) for t in torch_run.output] == [6, 6, 6]
        assert [len(t) for t in ct2_run.output] == [7, 7, 7]
