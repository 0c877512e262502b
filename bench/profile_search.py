"""Where a search's time goes: one decode of a split with a trained model, part by part.

    python bench/profile_search.py --ckpt model.pt [--split val.en] [--beam 5] [--rounds 3]

The model's own search (beam `--beam`; 1 runs greedy), on the engine `nmt.translate` builds,
its batches searched one after another (`--workers` 1) on torch's threads. Timed
unprofiled, the best of `--rounds`: the sentencepiece encoding of every line, the planner
(its batches, less that encoding), the search over the planned batches, and the decoding of
the best translations to text. Then one run under torch's profiler, with the search's steps
wrapped in named scopes (by patching this process's modules; the library holds no profiling
code): every op's self CPU time goes to the scope it ran in, and a decoder layer's ops to the
kind of kernel they are. What the profiled run spent in a scope beyond its ops' self time is
Python (and torch's dispatch) between them; the profiler's own cost sits there too, so the
shares are printed beside the unprofiled wall.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import defaultdict
from dataclasses import replace

from common import data_dir, machine
from torch.profiler import ProfilerActivity, profile, record_function

import nmt.decoding.beam as beam_module
import nmt.model as model_module
from nmt.config import InferenceConfig
from nmt.decoding.settings import DecodeConfig
from nmt.decoding.state import Finished, LiveRows, SearchBatch, StepDecoder
from nmt.inference import loading
from nmt.inference.search_choice import choose_search
from nmt.model import Transformer

PREFIX = "part: "
# (owner, attribute, part): what each named scope wraps
SCOPES = [
    (Transformer, "encode", "encoder"),
    (Transformer, "start_cache", "encoder"),
    (Transformer, "decode_states", "decoder layers"),
    (Transformer, "project_vocab", "output projection"),
    (model_module, "extend_cache", "cache: grown and gathered"),
    (Transformer, "reorder_cache", "cache: reordered"),
    (StepDecoder, "step", "log-softmax and the step's own ops"),
    (SearchBatch, "constrain", "length and n-gram rules"),
    (beam_module, "candidates", "top-k"),
    (beam_module, "finish_ended", "finished hypotheses"),
    (beam_module, "search_done", "stopping rule"),
    (LiveRows, "next", "reorder of the live beams"),
    (Finished, "results", "results to Python lists"),
]
KERNELS = {  # a decoder layer's ops by name
    "scaled_dot_product": "decoder: attention kernels",
    "flash_attention": "decoder: attention kernels",
    "addmm": "decoder: linear layers (QKV, out, FFN)",
    "aten::mm": "decoder: linear layers (QKV, out, FFN)",
    "gelu": "decoder: activation",
    "relu": "decoder: activation",
    "layer_norm": "decoder: norms and residual adds",
    "aten::add": "decoder: norms and residual adds",
}
OTHER = "decoder: other ops (views, copies, embedding)"
LOOP = "the search loop itself"  # the search's own lines, outside every scope


def scoped(function, name: str):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with record_function(PREFIX + name):
            return function(*args, **kwargs)

    return wrapper


def install_scopes() -> None:
    for owner, attribute, part in SCOPES:
        original = owner.__dict__[attribute]
        if isinstance(original, staticmethod):
            setattr(owner, attribute, staticmethod(scoped(original.__func__, part)))
        else:
            setattr(owner, attribute, scoped(original, part))


def scope_of(event) -> str | None:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(PREFIX):
            return parent.name.removeprefix(PREFIX)
        parent = parent.cpu_parent
    return None


def attribute(events) -> tuple[dict[str, float], dict[str, float]]:
    """-> (ops' self time, the Python between them: a scope's own time outside any op), per
    part, in seconds; the search's Python outside every scope is the beam loop's own."""
    ops: dict[str, float] = defaultdict(float)
    python: dict[str, float] = defaultdict(float)
    for event in events:
        seconds = event.self_cpu_time_total / 1e6
        if event.name == "search":
            python[LOOP] += seconds
        elif event.name.startswith(PREFIX):
            python[event.name.removeprefix(PREFIX)] += seconds
        else:
            part = scope_of(event) or LOOP
            if part == "decoder layers":
                part = next((k for key, k in KERNELS.items() if key in event.name), OTHER)
            ops[part] += seconds
    return ops, python


def best_of(rounds: int, run) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--split", default="val.en")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="batches searched at once")
    args = parser.parse_args()
    engine = loading.load(InferenceConfig(ckpt=args.ckpt, decode=DecodeConfig()))
    engine.workers = args.workers  # the profiler follows one thread's scopes: 1 to profile
    search, line = choose_search(engine.card, DecodeConfig(), [])
    if args.beam == 1:
        search = replace(search, strategy="greedy", beam_size=1)
    else:
        search = replace(search, strategy="beam", beam_size=args.beam)
    lines = (data_dir() / args.split).read_text(encoding="utf-8").splitlines()
    print(f"{machine()}\n{line}; run: beam {args.beam}, {len(lines)} lines of {args.split}")

    batches = engine.planner.plan(lines, search)
    decode = lambda: list(engine.search_batches(batches, search))  # noqa: E731
    found = decode()
    best = [nbest[0].tokens for nbests in found for nbest in nbests if nbest]
    encode = best_of(args.rounds, lambda: engine.tokenizer.encode(lines))
    plan = best_of(args.rounds, lambda: engine.planner.plan(lines, search))
    searched = best_of(args.rounds, decode)
    detokenize = best_of(args.rounds, lambda: engine.tokenizer.decode(best))
    print(
        f"unprofiled, best of {args.rounds}: tokenization {encode:.3f} s, planner "
        f"{plan - encode:.3f} s, search {searched:.3f} s, detokenization {detokenize:.3f} s"
    )

    install_scopes()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("search"):
            decode()
    ops, python = attribute(prof.events())
    in_ops, in_python = sum(ops.values()), sum(python.values())
    total = in_ops + in_python
    print(
        f"\nprofiled search: {total:.2f} s ({total / searched:.2f}x unprofiled); ops "
        f"{in_ops:.2f} s, Python and dispatch between them {in_python:.2f} s"
    )
    print(f"  {'part':<42} {'ops s':>6} {'Python s':>8} {'share':>6}")
    parts = set(ops) | set(python)
    for part in sorted(parts, key=lambda p: -(ops.get(p, 0) + python.get(p, 0))):
        op, py = ops.get(part, 0.0), python.get(part, 0.0)
        print(f"  {part:<42} {op:6.2f} {py:8.2f} {(op + py) / total:6.1%}")


if __name__ == "__main__":
    main()
