"""nmt.serve under load: 16 concurrent clients post the test_2016_flickr lines, one line per
request, to a server with cross-request batching on (its defaults), then to one with it off
(batch_requests=1 workers=1: one request at a time, on all cores, what a server without
batching does); the offline translate of the same lines in this process, on all cores, is the
ceiling. One model, its own search, one run.

Reports sentences/s, p50 and p99 latency, the answers missing (not a 200) or differing from
the offline output (both must be 0), and BLEU. Servers listen on 127.0.0.1 only; every request
has a timeout.

    python bench/bench_serve.py --ckpt outputs/<run>/model.pt [--backend ctranslate2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import sacrebleu
from common import ROOT, Record, read_lines, save_records

from nmt.config import InferenceConfig
from nmt.decoding.settings import DecodeConfig
from nmt.inference import loading
from nmt.inference.output_text import output_lines
from nmt.inference.search_choice import choose_search
from nmt.serving.launch import launched

CLIENTS = 16
OFF = ["batch_requests=1", "workers=1"]  # one request at a time, on all cores


def offline(ckpt: str, backend: str, lines: list[str]) -> tuple[list[str], float]:
    """`nmt.translate`'s path in this process: the outputs and the seconds they took."""
    cfg = InferenceConfig(ckpt=ckpt, decode=DecodeConfig(), backend=backend)
    engine = loading.load(cfg)
    search, line = choose_search(engine.card, cfg.decode, [])
    print(line, flush=True)
    start = time.perf_counter()
    hypotheses = engine.translate(lines, search)
    seconds = time.perf_counter() - start
    return output_lines(engine.tokenizer, hypotheses, 1), seconds


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


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    parser.add_argument("--backend", default="torch", choices=["torch", "ctranslate2"])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--server", nargs="*", default=[], help="nmt.serve settings, both runs")
    args = parser.parse_args()
    if not args.ckpt:
        raise SystemExit("--ckpt (or NMT_BENCH_CKPT): a trained model.pt, e.g. of make train")
    lines = read_lines("test_2016_flickr.en")[: args.sentences]
    refs = read_lines("test_2016_flickr.de")[: args.sentences]

    expected, seconds = offline(args.ckpt, args.backend, lines)
    rows = {"offline": (len(lines) / seconds, None, None, 0, 0, expected)}
    for mode, settings in (("batching on", []), ("batching off", OFF)):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [f"ckpt={args.ckpt}", f"backend={args.backend}", *args.server, *settings]
        with launched(command, env) as url:
            answers, latencies, wall = asyncio.run(load(url, lines))
        missing = sum(a is None for a in answers)
        differing = sum(a is not None and a != e for a, e in zip(answers, expected, strict=True))
        outputs = [a or "" for a in answers]
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        rows[mode] = (len(lines) / wall, p50, p99, missing, differing, outputs)

    print(f"\n{len(lines)} lines, {CLIENTS} clients, one line per request, {args.backend}")
    print(f"{'':14} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'missing':>8} {'differ':>7} BLEU")
    for mode, (rate, p50, p99, missing, differing, outputs) in rows.items():
        bleu = sacrebleu.corpus_bleu(outputs, [refs]).score
        ms = [f"{1000 * v:8.1f}" if v is not None else f"{'-':>8}" for v in (p50, p99)]
        print(f"{mode:14} {rate:8.1f} {ms[0]} {ms[1]} {missing:8d} {differing:7d} {bleu:.2f}")
    on, off, ceiling = rows["batching on"][0], rows["batching off"][0], rows["offline"][0]
    print(f"\nbatching on / off: {on / off:.2f}x (target 3x)")
    print(f"batching on / offline: {on / ceiling:.0%} (target 60%)")
    save_records(
        [
            Record(f"serve/{args.backend} batching on vs off", on, off, "sent/s"),
            Record(f"serve/{args.backend} batching on vs offline", on, ceiling, "sent/s"),
        ],
        "serve",
    )


if __name__ == "__main__":
    main()
