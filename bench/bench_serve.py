"""nmt.serve under load: 16 concurrent clients post the test_2016_flickr lines, one line per
request, to a server with cross-request batching on (its defaults) and to the best server
with it off (batch_requests=1: one request at a time per worker; one worker on every core or
one single-threaded worker per core, whichever the sweep finds faster); the offline translate
of the same lines in this process, on all cores and warmed up, is the ceiling. The three
alternate for `--rounds` rounds (bench/harness.py), each server started for its run and
stopped after it. One model, its own search.

Reports sentences/s, p50 and p99 latency, the answers missing (not a 200) or differing from
the offline output (both must be 0), and BLEU. Servers listen on 127.0.0.1 only; every request
has a timeout.

    python bench/bench_serve.py --ckpt outputs/<run>/model.pt [--backend ctranslate2]

With `--against OLD_CHECKOUT` it measures a change instead: this checkout's server against
that checkout's (its `nmt` first on the path), both at their defaults, alternating, and
prints the ratio (now / before) with its spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import sacrebleu
from common import ROOT, read_lines, save_records
from harness import ROUNDS, Run, Side, alternate, sweep

from nmt.config import InferenceConfig
from nmt.decoding.settings import DecodeConfig
from nmt.inference import loading
from nmt.inference.search_choice import choose_search
from nmt.serving.launch import launched
from nmt.terms.spans import DEFAULT_RULES
from nmt.translation.texts import translate_texts

CLIENTS = 16
# The one-request-at-a-time servers tried as "batching off"; the faster is the baseline.
OFF = [
    ["batch_requests=1", "workers=1", "threads=0"],  # one worker on every core
    ["batch_requests=1", "workers=0", "threads=0"],  # one single-threaded worker per core
]
SWEEP_LINES = 200
TARGETS = [3.0, 0.6]  # batching on: 3x the best one-at-a-time server, 60% of warm offline


def offline_engine(ckpt: str, backend: str):
    """`nmt.translate`'s engine and the model's own search, in this process."""
    cfg = InferenceConfig(ckpt=ckpt, decode=DecodeConfig(), backend=backend)
    engine = loading.load(cfg)
    search, line = choose_search(engine.card, cfg.decode, [])
    print(line, flush=True)
    return engine, search


class Client:
    """One keep-alive HTTP/1.1 connection posting JSON: a load generator light enough not to
    take the cores from the server it measures (httpx spent ~1 ms of CPU per request here)."""

    def __init__(self, url: str):
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.reader = self.writer = None

    async def post(self, path: str, payload) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        body = json.dumps(payload).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status_line, *header_lines = (await self.reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        headers = dict(line.split(b": ", 1) for line in header_lines if line)
        content = await self.reader.readexactly(int(headers[b"content-length"]))
        return int(status_line.split()[1]), content

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def load(url: str, lines: list[str]) -> tuple[list[str | None], list[float], float]:
    """Every line posted alone by CLIENTS concurrent clients: the answers (None if missing),
    each request's latency, and the wall time."""
    answers: list[str | None] = [None] * len(lines)
    latencies: list[float] = []

    async def client(todo: list[int], record: bool) -> None:
        connection = Client(url)
        try:
            while todo:
                i = todo.pop()
                start = time.perf_counter()
                try:
                    status, content = await asyncio.wait_for(
                        connection.post("/translate", {"text": lines[i]}), timeout=120
                    )
                    if record and status == 200:
                        answers[i] = json.loads(content)["translation"]
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                    connection.close()
                    connection = Client(url)
                if record:
                    latencies.append(time.perf_counter() - start)
        finally:
            connection.close()

    warmup = list(range(2 * CLIENTS))
    await asyncio.gather(*(client(warmup, False) for _ in range(CLIENTS)))
    todo = list(reversed(range(len(lines))))
    start = time.perf_counter()
    await asyncio.gather(*(client(todo, True) for _ in range(CLIENTS)))
    return answers, latencies, time.perf_counter() - start


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


class Served:
    """One server setting as a harness side: each run starts the server, loads it with the
    lines, stops it (never two servers at once: an idle one still takes CPU), and keeps what
    a skeptic checks: answers missing or differing from offline, and latencies."""

    def __init__(self, args, settings: list[str], lines: list[str], expected: list[str], root=ROOT):
        self.args, self.settings, self.lines, self.expected = args, settings, lines, expected
        self.root = root  # the checkout whose nmt.serve runs
        self.missing = self.differing = 0
        self.p50: list[float] = []
        self.p99: list[float] = []

    def run(self) -> Run:
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        command = [
            f"ckpt={self.args.ckpt}",
            f"backend={self.args.backend}",
            *self.args.server,
            *self.settings,
        ]
        with launched(command, env) as url:
            answers, latencies, wall = asyncio.run(load(url, self.lines))
        self.missing += sum(a is None for a in answers)
        self.differing += sum(
            a is not None and a != e for a, e in zip(answers, self.expected, strict=True)
        )
        self.p50.append(percentile(latencies, 50))
        self.p99.append(percentile(latencies, 99))
        return Run(len(self.lines), None, [a or "" for a in answers], wall)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    parser.add_argument("--backend", default="torch", choices=["torch", "ctranslate2"])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--server", nargs="*", default=[], help="nmt.serve settings, every run")
    parser.add_argument("--against", help="another checkout: its server against this one's")
    args = parser.parse_args()
    if not args.ckpt:
        raise SystemExit("--ckpt (or NMT_BENCH_CKPT): a trained model.pt, e.g. of make train")
    lines = read_lines("test_2016_flickr.en")[: args.sentences]
    refs = read_lines("test_2016_flickr.de")[: args.sentences]

    engine, search = offline_engine(args.ckpt, args.backend)

    def offline() -> Run:
        # translate's own path and defaults (sentences, protected spans), the work a served
        # answer does: the engine alone would skip both
        found = translate_texts(engine, lines, search, protect=DEFAULT_RULES)
        return Run(len(lines), None, [t.text for t in found])

    # the offline answers every served one must equal; computing them warms offline up on the
    # exact work it is timed on (the servers warm themselves: 2 x CLIENTS requests first)
    expected = offline().output
    if args.against:
        against(args, lines, refs, expected)
        return
    sample = lines[:SWEEP_LINES]
    offs = {" ".join(o): Served(args, o, sample, expected[:SWEEP_LINES]) for o in OFF}
    best = sweep(f"{args.backend} batching off", {k: s.run for k, s in offs.items()}, warm=False)
    off = offs[best].settings
    servers = {
        "batching on": Served(args, [], lines, expected),
        "batching off": Served(args, off, lines, expected),
    }

    sides = [
        Side("batching on", "nmt.serve defaults", servers["batching on"].run),
        Side("batching off", " ".join(off), servers["batching off"].run),
        Side("offline", "translate, one process", offline),
    ]
    timings = alternate(sides, "sent/s", args.rounds, same_work=False, warm=False)
    name = f"serve/{args.backend}"
    ratios = [
        timings.ratio("batching on", "batching off", f"{name}/batching_on_vs_off"),
        timings.ratio("batching on", "offline", f"{name}/batching_on_vs_offline"),
    ]
    print(f"\n{len(lines)} lines, {CLIENTS} clients, one line per request, {args.backend}")
    print(f"{'':14} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'missing':>8} {'differ':>7} BLEU")
    for mode in ("offline", "batching on", "batching off"):
        rate = statistics.median(timings.rates[mode])
        bleu = sacrebleu.corpus_bleu(timings.outputs[mode], [refs]).score
        server = servers.get(mode)
        ms = (
            ["-", "-"]
            if server is None
            else [f"{1000 * statistics.median(v):.1f}" for v in (server.p50, server.p99)]
        )
        missing, differing = (0, 0) if server is None else (server.missing, server.differing)
        print(f"{mode:14} {rate:8.1f} {ms[0]:>8} {ms[1]:>8} {missing:8d} {differing:7d} {bleu:.2f}")
    for ratio, target in zip(ratios, TARGETS, strict=True):
        met = "met" if statistics.median(ratio.ratios) >= target else "NOT met"
        print(f"  {ratio.line()}  target {target}x: {met}", flush=True)
    records = [r.record() | {"target": t} for r, t in zip(ratios, TARGETS, strict=True)]
    for mode, server in servers.items():
        records.append(
            {
                "name": f"{name}/{mode.replace(' ', '_')}_answers",
                "missing": server.missing,
                "differing": server.differing,
                "p50_ms": 1000 * statistics.median(server.p50),
                "p99_ms": 1000 * statistics.median(server.p99),
            }
        )
    save_records(records, f"serve/{args.backend}")


def against(args, lines: list[str], refs: list[str], expected: list[str]) -> None:
    """This checkout's server against --against's, both at their defaults, alternating."""
    servers = {
        "now": Served(args, [], lines, expected),
        "before": Served(args, [], lines, expected, root=args.against),
    }
    sides = [
        Side("now", str(ROOT), servers["now"].run),
        Side("before", args.against, servers["before"].run),
    ]
    timings = alternate(sides, "sent/s", args.rounds, same_work=False, warm=False)
    ratio = timings.ratio("now", "before", f"serve/{args.backend}/now_vs_before")
    print(f"\n{len(lines)} lines, {CLIENTS} clients, one line per request, {args.backend}")
    for mode, server in servers.items():
        rate = statistics.median(timings.rates[mode])
        bleu = sacrebleu.corpus_bleu(timings.outputs[mode], [refs]).score
        p50, p99 = (1000 * statistics.median(v) for v in (server.p50, server.p99))
        print(
            f"{mode:8} {rate:8.1f} sent/s  p50 {p50:.1f} ms  p99 {p99:.1f} ms  "
            f"missing {server.missing}  differ {server.differing}  BLEU {bleu:.2f}"
        )
    print(f"  {ratio.line()}", flush=True)
    save_records([ratio.record()], f"serve/{args.backend}_against")


if __name__ == "__main__":
    main()
