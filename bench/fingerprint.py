"""What the product answers, as sha256 digests: run before and after a change that must not
change behaviour (a redesign), and compare the two lists.

    python bench/fingerprint.py --ckpt outputs/<run>/model.pt --work /tmp/fp > before.txt

Each line is "<sha256>  <name>". The inputs are the first val lines (or --split's) plus lines
of numbers, addresses, placeholders and capitals; HTML and Word inputs are built from them.
The commands (--offline: these alone):
translate on both engines (greedy, beam n-best with scores and alignments, lines), HTML and
Word files (the Word file's XML parts, since a zip's bytes hold times), a glossary (steered,
placed and exact), spans off and localized numbers, nmt.score, seeded sampling; then
evaluate's hypotheses and scores, and the served answers of both servers (/translate,
/translate_file, LibreTranslate).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx

# the tree whose behaviour is read: this checkout, or --tree (an older one, for "before")
ROOT = Path(__file__).resolve().parents[1]
if "--tree" in sys.argv:
    ROOT = Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()
sys.path.insert(0, str(ROOT))

from nmt.serving.launch import launched  # noqa: E402

EXTRA = [
    "Call +49 30 1234567 at 10:45 or visit https://example.org/docs before 3 March 2024.",
    "The update costs $4.99 and version v2.1.3 fixes 12 bugs.",
    "A MAN IN A RED SHIRT IS CLIMBING A ROCK.",
    "Write to info@example.com: %s files left, {count} to go.",
    "",
    "  Two dogs play in the snow.  A child watches them.  ",
    "- A woman sings on a stage",
]
GLOSSARY = "man\tMensch\ndog\tKöter\nshirt\tHemdchen\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run(args: list[str], stdin: bytes | None = None) -> bytes:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", *args], input=stdin, capture_output=True, env=env, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.decode()[-2000:]}")
    return done.stdout


def docx_parts(data: bytes) -> bytes:
    """A Word file's XML parts in name order (its zip's bytes hold times)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return b"".join(z.read(n) for n in sorted(z.namelist()) if n.endswith(".xml"))


def answered(reply: httpx.Response) -> httpx.Response:
    """A served answer, or the end of the run: a refusal hashes the same before and after,
    and would hide a request that no longer works."""
    if reply.status_code != 200:
        raise SystemExit(f"{reply.request.url} answered {reply.status_code}: {reply.text[:300]}")
    return reply


def make_inputs(work: Path, data_dir: Path, n: int, split: str = "val") -> dict[str, Path]:
    import docx

    val = (data_dir / f"{split}.en").read_text(encoding="utf-8").splitlines()[:n]
    lines = [*val, *EXTRA]
    paths = {"txt": work / "in.en", "html": work / "in.html", "docx": work / "in.docx"}
    paths["txt"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    body = "".join(
        f"<p>{line} <b>in bold</b> <a href='https://x.org'>a link</a></p>" for line in lines[:8]
    )
    paths["html"].write_text(f"<html><body><h1>A title</h1>{body}</body></html>", encoding="utf-8")
    document = docx.Document()
    for line in lines[:8]:
        p = document.add_paragraph(line + " ")
        p.add_run("in bold").bold = True
    document.save(paths["docx"])
    paths["glossary"] = work / "terms.tsv"
    paths["glossary"].write_text(GLOSSARY, encoding="utf-8")
    paths["de"] = work / "ref.de"
    ref = (data_dir / f"{split}.de").read_text(encoding="utf-8").splitlines()[:n]
    paths["de"].write_text("\n".join(ref) + "\n", encoding="utf-8")
    paths["val_en"] = work / "val.en"
    paths["val_en"].write_text("\n".join(val) + "\n", encoding="utf-8")
    paths["data"] = work / "data"  # a Multi30k layout of the same lines, for evaluate
    paths["data"].mkdir(exist_ok=True)
    for split in ("train", "val", "test_2016_flickr"):
        for lang, text in (("en", val), ("de", ref)):
            (paths["data"] / f"{split}.{lang}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return paths


def offline(ckpt: str, ct2: Path, paths: dict[str, Path], work: Path) -> dict[str, bytes]:
    txt, found = str(paths["txt"]), {}
    engines = {"torch": [f"ckpt={ckpt}"], "ct2": [f"ckpt={ct2}", "backend=ctranslate2"]}
    for engine, model in engines.items():
        t = ["nmt.translate", *model, "threads=1", "progress=false"]
        found[f"{engine} greedy"] = run([*t, f"input={txt}", "decode=greedy"])
        found[f"{engine} beam nbest scores alignments"] = run(
            [*t, f"input={txt}", "decode=beam", "nbest=3", "alignments=true"]
        ) + run([*t, f"input={txt}", "decode=beam", "scores=true", "alignments=true"])
        found[f"{engine} lines"] = run([*t, f"input={txt}", "segment=lines"])
        found[f"{engine} html"] = run([*t, f"input={paths['html']}"])
        out = work / f"{engine}.docx"
        run([*t, f"input={paths['docx']}", f"output={out}"])
        found[f"{engine} docx"] = docx_parts(out.read_bytes())
        found[f"{engine} glossary"] = run(
            [*t, f"input={txt}", f"glossary={paths['glossary']}", "scores=true"]
        )
        found[f"{engine} spans off, numbers localized"] = run(
            [*t, f"input={txt}", "protect=[]", "scores=true"]
        ) + run([*t, f"input={txt}", "numbers=localize", "alignments=true"])
        found[f"{engine} score"] = run(
            ["nmt.score", *model, "threads=1", f"src={paths['val_en']}", f"tgt={paths['de']}"]
        )
    t = ["nmt.translate", *engines["torch"], "threads=1", "progress=false"]
    found["torch glossary exact beam"] = run(
        [*t, f"input={txt}", f"glossary={paths['glossary']}", "glossary_exact=true", "decode=beam"]
    )
    found["torch sample seeded"] = run(
        [*t, f"input={txt}", "decode=sample", "decode.seed=7", "nbest=2"]
    )
    return found


def served(ckpt: str, ct2: Path, paths: dict[str, Path]) -> dict[str, bytes]:
    lines = paths["txt"].read_text(encoding="utf-8").splitlines()
    found = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for engine, model in {
        "torch": [f"ckpt={ckpt}"],
        "ct2": [f"ckpt={ct2}", "backend=ctranslate2"],
    }.items():
        with launched([*model, "threads=1", "cache_sentences=0"], env) as url:
            asked = [
                {"text": lines},
                {
                    "text": lines[:6],
                    "alignments": True,
                    "search": {"strategy": "beam", "beam_size": 4, "nbest": 2},
                },
                {"text": lines[:6], "scores": True, "alignments": True},
                {"text": [paths["html"].read_text(encoding="utf-8")], "format": "html"},
                {"text": lines[-7:], "glossary": {"dog": "Köter"}},
                {"text": lines[-7:], "protect": [], "numbers": "localize"},
            ]
            for i, body in enumerate(asked):
                answer = answered(httpx.post(url + "/translate", json=body, timeout=120)).json()
                answer.pop("timing", None)
                found[f"served {engine} /translate {i}"] = json.dumps(
                    answer, sort_keys=True
                ).encode()
            for name in ("txt", "html"):
                with open(paths[name], "rb") as f:
                    r = httpx.post(
                        url + "/translate_file", files={"file": (f"in.{name}", f)}, timeout=120
                    )
                found[f"served {engine} /translate_file {name}"] = answered(r).content
            r = httpx.post(
                url + "/translate_file",
                files={"file": ("in.docx", paths["docx"].read_bytes())},
                timeout=120,
            )
            found[f"served {engine} /translate_file docx"] = docx_parts(answered(r).content)
            r = httpx.post(
                url + "/libretranslate/translate",
                json={"q": lines[:3], "source": "en", "target": "de"},
                timeout=120,
            )
            found[f"served {engine} libretranslate"] = answered(r).content
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--work", type=Path, required=True, help="a folder for inputs and outputs")
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("NMT_DATA_DIR", "../shared/data/multi30k"))
    )
    parser.add_argument(
        "--lines", type=int, default=40, help="split lines at the head of the input"
    )
    parser.add_argument("--split", default="val", help="the split read: val or test_2016_flickr")
    parser.add_argument(
        "--offline", action="store_true", help="the commands only: no evaluate, no servers"
    )
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    paths = make_inputs(args.work, args.data, args.lines, args.split)
    ct2 = args.work / "ct2"
    if not ct2.exists():
        run(["nmt.export", f"ckpt={args.ckpt}", f"out={ct2}", "quantization=float32"])
    found = offline(args.ckpt, ct2, paths, args.work)
    if args.offline:
        for name, data in found.items():
            print(f"{sha(data)}  {name}")
        return
    evaluation = args.work / "evaluation"
    run(
        [
            "nmt.evaluate",
            f"ckpt={args.ckpt}",
            "threads=1",
            "splits=[valid]",
            f"data.dir={paths['data']}",
            f"data.cache_dir={args.work / 'cache'}",
            f"hydra.run.dir={evaluation}",
        ]
    )
    found["evaluate hypotheses"] = (evaluation / "hyp.valid.txt").read_bytes()
    record = json.loads((evaluation / "evaluation.json").read_text())
    scores = {  # the figures, not the seconds
        role: {k: v for k, v in split.items() if k not in ("decoding",)}
        for role, split in record["splits"].items()
    }
    found["evaluate scores"] = json.dumps(scores, sort_keys=True).encode()
    found.update(served(args.ckpt, ct2, paths))
    for name, data in found.items():
        print(f"{sha(data)}  {name}")


if __name__ == "__main__":
    main()
