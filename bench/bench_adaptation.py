"""Fine-tuning on a new domain (#59), measured without a network: Multi30k's pairs about water
are held out of training, and become the domain a "pretrained" model is adapted to.

    python bench/bench_adaptation.py split --out adapt      # writes adapt/{general,water}/*.tsv
    (pretrain, export to HF, import, fine-tune, train from scratch: docs/benchmarks.md,
    "Fine-tuning on a held-out domain")
    python bench/bench_adaptation.py score --data adapt --ckpt before=pretrained.pt \\
        --ckpt tuned=tuned/model.pt

split: a pair is about water when its English names water by one of WATER's words (whole
words, any case). general/: train (Multi30k's train less water), dev (val less water), test
(test_2016_flickr less water). water/: train, dev (val's water pairs), test (TEST_PAIRS of the
training split's water pairs, drawn with seed 0, in no training set), flickr
(test_2016_flickr's water pairs). A tab inside a sentence (one German line has one) becomes a
space, since a tab ends a TSV field.

score: each model translates water/test, water/flickr and general/test with its own search
through translate's path; cased BLEU (sacreBLEU) of each, printed as a table and kept in
bench/results.json under adaptation/.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

import sacrebleu
from common import read_lines, save_records

from nmt.evaluation.markdown import table

WATER = re.compile(
    r"\b(water|waters|beach|beaches|ocean|sea|lake|river|pool|swim\w*|surf\w*|wave|waves|"
    r"boat\w*|kayak\w*|canoe\w*|wet|splash\w*|fountain|dive|diving|diver|snorkel\w*|raft\w*|"
    r"sail\w*|shore|dock)\b",
    re.IGNORECASE,
)
TEST_PAIRS = 500
SETS = ("water/test", "water/flickr", "general/test", "general/dev")


def pairs(split: str) -> list[tuple[str, str]]:
    return list(zip(read_lines(f"{split}.en"), read_lines(f"{split}.de"), strict=True))


def write(path: Path, rows: list[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{x.replace(chr(9), ' ')}\t{y.replace(chr(9), ' ')}\n" for x, y in rows)
    path.write_text(text, encoding="utf-8")
    print(f"{path}: {len(rows)} pairs")


def split(out: Path) -> None:
    about = lambda pair: WATER.search(pair[0]) is not None  # noqa: E731
    train, val, test = pairs("train"), pairs("val"), pairs("test_2016_flickr")
    water = [p for p in train if about(p)]
    random.Random(0).shuffle(water)
    write(out / "general/train.tsv", [p for p in train if not about(p)])
    write(out / "general/dev.tsv", [p for p in val if not about(p)])
    write(out / "general/test.tsv", [p for p in test if not about(p)])
    write(out / "water/test.tsv", water[:TEST_PAIRS])
    write(out / "water/train.tsv", water[TEST_PAIRS:])
    write(out / "water/dev.tsv", [p for p in val if about(p)])
    write(out / "water/flickr.tsv", [p for p in test if about(p)])


def score(data: Path, models: list[str]) -> None:
    from common import model_engines

    from nmt.translation.texts import translate_texts

    sets = {}
    for name in SETS:
        rows = [line.split("\t") for line in (data / f"{name}.tsv").read_text().splitlines()]
        sets[name] = ([x for x, _ in rows], [y for _, y in rows])
    names = dict(model.split("=", 1) for model in models)
    engines = model_engines(argparse.Namespace(ckpt=list(names.values()), backend="torch"))
    records, rows = [], []
    for (name, ckpt), (_, engine, search) in zip(names.items(), engines, strict=True):
        bleu = {}
        for set_name, (src, refs) in sets.items():
            hyps = [t.text for t in translate_texts(engine, src, search)]
            bleu[set_name] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
        records.append({"name": f"adaptation/{name}", "ckpt": ckpt, "bleu": bleu})
        rows.append([name, *(bleu[s] for s in SETS)])
        print(records[-1], flush=True)
    print(table(["model", *(f"{s} ({len(sets[s][0])})" for s in SETS)], rows))
    save_records(records, "adaptation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("split").add_argument("--out", type=Path, required=True)
    scoring = commands.add_parser("score")
    scoring.add_argument("--data", type=Path, required=True)
    scoring.add_argument("--ckpt", action="append", required=True, help="NAME=model.pt")
    args = parser.parse_args()
    if args.command == "split":
        split(args.out)
    else:
        score(args.data, args.ckpt)


if __name__ == "__main__":
    main()
