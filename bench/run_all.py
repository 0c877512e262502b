"""`make bench`: every benchmark in turn (never alongside another heavy job), then a summary
of bench/results.json."""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

for script in ("bench_data.py", "bench_train.py", "bench_decode.py"):
    print(f"== {script}", flush=True)
    subprocess.run([sys.executable, str(HERE / script)], check=True, cwd=HERE)

results = json.loads((HERE / "results.json").read_text())
print("\nmachine:", results["machine"])
for r in results["records"]:
    print(f"{r['name']:<44} ours {r['ours']:>10.1f}  peer {r['peer']:>10.1f} {r['unit']:<12} ratio {r['ratio']:5.2f}x")
