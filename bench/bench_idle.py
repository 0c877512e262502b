"""How idle an idle server is (#42): `python -m nmt.serve` started, one request answered, then
the CPU time all its processes use over a minute with no request (target: under 2% of one
core), for each backend given.

    python bench/bench_idle.py --ckpt model.pt [--export DIR] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import httpx
import psutil
from common import save_records

from nmt.serving.launch import launched


def idle_share(args: list[str], seconds: float) -> tuple[float, int]:
    """(share of one core used by the server's processes, how many processes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with launched(args, env) as url:
        httpx.post(url + "/translate", json={"text": "A man rides a bike."}, timeout=60)
        time.sleep(5)
        port = f"port={url.rsplit(':', 1)[1]}"
        root = min(
            (p for p in psutil.process_iter(["cmdline"]) if port in (p.info["cmdline"] or [])),
            key=lambda p: p.create_time(),
        )  # the first process started with that port: the server; the rest are its children
        tree = [root, *root.children(recursive=True)]
        before, start = sum(sum(p.cpu_times()[:2]) for p in tree), time.monotonic()
        time.sleep(seconds)
        used = sum(sum(p.cpu_times()[:2]) for p in tree) - before
        return used / (time.monotonic() - start), len(tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ckpt", default=os.environ.get("NMT_BENCH_CKPT"))
    parser.add_argument("--export", help="its CTranslate2 export (python -m nmt.export)")
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    if not args.ckpt:
        sys.exit("--ckpt: a trained model.pt")
    runs = [("torch", [f"ckpt={args.ckpt}"])]
    if args.export:
        runs.append(("ctranslate2", [f"ckpt={args.export}", "backend=ctranslate2"]))
    records = []
    for backend, served in runs:
        share, processes = idle_share(served, args.seconds)
        print(
            f"{backend:12s} idle {args.seconds:.0f} s: {100 * share:.2f}% of one core "
            f"({processes} processes; target under 2%)",
            flush=True,
        )
        records.append({"name": f"idle/{backend}", "core_share": share, "processes": processes})
    save_records(records, "idle")


if __name__ == "__main__":
    main()
