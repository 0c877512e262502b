"""`make bench`: every benchmark in turn (never alongside another heavy job), then a summary
of bench/results.json. NMT_BENCH_CKPT=outputs/<run>/model.pt adds the BLEU figures of a
trained model to bench_inference.py, and runs bench_serve.py on it."""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import format_line  # noqa: E402

for script in ("bench_data.py", "bench_train.py", "bench_decode.py", "bench_inference.py"):
    print(f"== {script}", flush=True)
    subprocess.run([sys.executable, str(HERE / script)], check=True, cwd=HERE)
if os.environ.get("NMT_BENCH_CKPT"):  # serving needs a trained model: real output lengths
    print("== bench_serve.py", flush=True)
    subprocess.run([sys.executable, str(HERE / "bench_serve.py")], check=True, cwd=HERE)
else:
    print("== bench_serve.py skipped: set NMT_BENCH_CKPT=outputs/<run>/model.pt", flush=True)

results = json.loads((HERE / "results.json").read_text())
print("\nmachine:", results["machine"])
for r in results["records"]:
    print(format_line(r["name"], r["ours"], r["peer"], r["unit"], r["ratio"]))
