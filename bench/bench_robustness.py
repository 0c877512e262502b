"""Text as people write it (#56): test_2016_flickr in the forms real input comes in, each model
given translating every form with its own search, through `translate`'s path (segment=
sentences, the output checks and their fix on) with no span protected (`protect=[]`: what the
model does with numbers itself; bench_spans.py measures the protection).

Forms, each scored by BLEU of the casefolded output against the casefolded references (lower
case, with ß as ss, as capitals write it):
- as given; lower case; no final punctuation (removed from the output and the references
  too, so a stop is not scored); Title Case; ALL CAPS, these two also with
  decode.fold_case=false (the model alone, not reading them in sentence case).
- numbers: each test pair with a number put in on both sides at a pair of words eflomal
  links one to one (the training view's own `numbers`, seed 0; the links from eflomal over
  the test pairs and Multi30k's training pairs together). Scored by BLEU against the changed
  references and by the share of numbers kept exactly (its digits in the output), with the
  share the output checks fixed, and the lines they flagged.

Each row also gives the lines the output checks flagged and those with a loop.

    python bench/bench_robustness.py --ckpt before/model.pt --ckpt after/model.pt
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import sacrebleu
from common import model_engines, models_args, read_lines, save_records

from nmt.data.augmentation import Pair, numbers
from nmt.data.word_alignment import align_corpus
from nmt.documents.translation import translate_texts

FINAL = ".!?…"
CAPITALS = ("Title Case", "ALL CAPS")  # also translated with decode.fold_case=false


def title_case(line: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in line.split())


def unpunctuated(line: str) -> str:
    return line.rstrip().rstrip(FINAL).rstrip()


def forms(src: list[str], refs: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """form -> (sources, references as scored)."""
    return {
        "as given": (src, refs),
        "lower case": ([s.lower() for s in src], refs),
        "no final punctuation": ([unpunctuated(s) for s in src], [unpunctuated(r) for r in refs]),
        "Title Case": ([title_case(s) for s in src], refs),
        "ALL CAPS": ([s.upper() for s in src], refs),
    }


def with_numbers(src: list[str], refs: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(sources, references, the number put in each; "" where no word pair is linked one to
    one), aligned by eflomal over these pairs and the training pairs."""
    train_src, train_tgt = read_lines("train.en"), read_lines("train.de")
    links = align_corpus(src + train_src, refs + train_tgt)[: len(src)]
    out_src, out_refs, put = [], [], []
    rng = np.random.default_rng(0)
    for s, r, pairs in zip(src, refs, links, strict=True):
        new = numbers(Pair(s.split(), r.split(), sorted(pairs)), rng)
        if new is None:
            out_src.append(s), out_refs.append(r), put.append("")
            continue
        added = set(re.findall(r"\d+", " ".join(new.src))) - set(re.findall(r"\d+", s))
        out_src.append(" ".join(new.src)), out_refs.append(" ".join(new.tgt))
        put.append(min(added, key=len) if added else "")
    return out_src, out_refs, put


def translate(engine, search, lines: list[str]):
    found = translate_texts(engine, lines, search)
    return [t.text for t in found], [t.warnings for t in found]


def flagged(warnings: list[list[str]]) -> int:
    """Lines with a problem left (a fixed number alone is none)."""
    return sum(1 for ws in warnings if any(not w.startswith("fixed") for w in ws))


def loops(warnings: list[list[str]]) -> int:
    return sum(1 for ws in warnings if any(w.startswith("loop") for w in ws))


def bleu_lc(hyps: list[str], refs: list[str]) -> float:
    """BLEU of the casefolded texts: lowercased, and German's ß as the ss that capitals
    write it as (an ALL CAPS output's STRASSE is the reference's Straße)."""
    return sacrebleu.corpus_bleu([h.casefold() for h in hyps], [[r.casefold() for r in refs]]).score


def main() -> None:
    args = models_args(__doc__.split("\n\n")[0], 3, "flagged lines printed per form")
    src, refs = read_lines(f"{args.split}.en"), read_lines(f"{args.split}.de")
    numbered_src, numbered_refs, put = with_numbers(src, refs)
    records = []
    for ckpt, engine, search in model_engines(args):
        for form, (sources, references) in forms(src, refs).items():
            for fold in (True, False) if form in CAPITALS else (True,):
                hyps, warnings = translate(engine, replace(search, fold_case=fold), sources)
                if form == "no final punctuation":
                    hyps = [unpunctuated(h) for h in hyps]
                record = {
                    "name": f"robustness/{form}{'' if fold else ' unfolded'}/{ckpt}",
                    "ckpt": ckpt,
                    "form": form,
                    "fold_case": fold,
                    "bleu_lc": round(bleu_lc(hyps, references), 2),
                    "flagged": flagged(warnings),
                    "loops": loops(warnings),
                }
                records.append(record)
                print(record, flush=True)
                for i in [i for i, w in enumerate(warnings) if w][: args.show]:
                    print(f"  {sources[i]!r} -> {hyps[i]!r}: {warnings[i]}", flush=True)
        hyps, warnings = translate(engine, search, numbered_src)
        asked = [i for i, n in enumerate(put) if n]
        kept = [i for i in asked if put[i] in re.findall(r"\d+", hyps[i])]
        fixed = [i for i in asked if f"fixed number {put[i]}" in warnings[i]]
        record = {
            "name": f"robustness/numbers/{ckpt}",
            "ckpt": ckpt,
            "form": "numbers",
            "bleu_lc": round(bleu_lc(hyps, numbered_refs), 2),
            "numbers": len(asked),
            "kept_exactly": round(len(kept) / len(asked), 4),
            "fixed_by_checks": round(len(fixed) / len(asked), 4),
            "flagged": flagged(warnings),
            "loops": loops(warnings),
        }
        records.append(record)
        print(record, flush=True)
    save_records(records, "robustness")


if __name__ == "__main__":
    main()
