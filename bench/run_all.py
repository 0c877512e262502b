"""`make bench`: every benchmark in turn (never alongside another heavy job), then a summary
of bench/results.json. NMT_BENCH_CKPT=outputs/<run>/model.pt adds the BLEU figures of a
trained model to bench_inference.py, runs bench_serve.py on it with both engines (its
CTranslate2 int8 export made here, in a temporary folder), what scores and alignments cost
(bench_scores_cost.py), how its alignments compare with eflomal's (bench_alignment.py), what
cutting paragraphs into sentences costs and buys (bench_documents.py), what format=html
costs and where its tags land (bench_html.py), each file format against the plain lines
(bench_formats.py), how idle an idle server is (bench_idle.py),
what the sentence cache buys (bench_cache.py), what its Hugging Face export gives
(bench_hf.py), how it takes capitals, unpunctuated lines and numbers (bench_robustness.py),
whether it carries protected spans and uses a glossary's terms on both engines
(bench_spans.py, bench_glossary.py) and, on a copy calibrated on val, how far its confidence
can be trusted (bench_confidence.py)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(*args: str) -> None:
    print("==", *args, flush=True)
    subprocess.run([sys.executable, *args], check=True, cwd=HERE)


for script in (
    "bench_data.py",
    "bench_train.py",
    "bench_inference.py",
    "bench_splitters.py",
    "bench_detect.py",
    "bench_document_scaling.py",
):
    run(str(HERE / script))
ckpt = os.environ.get("NMT_BENCH_CKPT")
if ckpt:  # serving needs a trained model: real output lengths
    run(str(HERE / "bench_serve.py"), "--ckpt", ckpt)
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "int8"
        run("-m", "nmt.export", f"ckpt={ckpt}", f"out={export}", "quantization=int8")
        run(str(HERE / "bench_serve.py"), "--ckpt", str(export), "--backend", "ctranslate2")
        run(str(HERE / "bench_scores_cost.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_alignment.py"), "--ckpt", ckpt)
        run(str(HERE / "bench_documents.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_html.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_formats.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_idle.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_cache.py"), "--ckpt", ckpt, "--export", str(export))
        run(str(HERE / "bench_hf.py"), "--ckpt", ckpt)
        run(str(HERE / "bench_robustness.py"), "--ckpt", ckpt)
        run(str(HERE / "bench_spans.py"), "--ckpt", ckpt)
        run(str(HERE / "bench_spans.py"), "--ckpt", str(export), "--backend", "ctranslate2")
        run(str(HERE / "bench_glossary.py"), "--ckpt", ckpt)
        run(str(HERE / "bench_glossary.py"), "--ckpt", str(export), "--backend", "ctranslate2")
        calibrated = Path(folder) / "calibrated.pt"
        shutil.copy(ckpt, calibrated)
        data = Path(os.environ.get("NMT_DATA_DIR", HERE.parent.parent / "shared/data/multi30k"))
        run(
            "-m",
            "nmt.calibrate",
            f"ckpt={calibrated}",
            f"src={data / 'val.en'}",
            f"ref={data / 'val.de'}",
        )
        run(str(HERE / "bench_confidence.py"), "--ckpt", str(calibrated))
else:
    print("== bench_serve.py skipped: set NMT_BENCH_CKPT=outputs/<run>/model.pt", flush=True)

results = json.loads((HERE / "results.json").read_text())
machines = {json.dumps(r.get("machine"), sort_keys=True) for r in results["records"]}
for seen in sorted(machines):
    print("\nmachine:", seen)
for r in results["records"]:
    if "ratio" in r:
        ratio = r["ratio"]
        print(
            f"{r['name']:<50} {r['ratio']['median']:5.2f}x [{ratio['min']:.2f}-{ratio['max']:.2f}]"
            f" {r['ours']['system']} {r['ours']['median']:.1f} / {r['peer']['system']}"
            f" {r['peer']['median']:.1f} {r['unit']}"
        )
    else:
        shown = {k: v for k, v in r.items() if k not in ("name", "machine", "measured")}
        print(f"{r['name']:<50} " + "  ".join(f"{k} {v}" for k, v in shown.items()))
