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

- numbers as written (#82): each test pair with one number as people write it (a time, a
  date, money, a percentage, a range, a score, a version, a phone number, an IP address, a
  size, dimensions, a fraction, an ordinal, a code) put in on both sides before a pair of
  words eflomal links one to one, its digits drawn (seed 0), each form as often as the
  others. Translated three ways: spans protected, numbers kept (the default); protected,
  numbers=localize (the reference then holds the German form); and protect=[] (the model
  alone). Scored per form by the share come out byte for byte (for localize: in its German
  form, and by value), with BLEU against the changed references.

Each row also gives the lines the output checks flagged and those with a loop.

    python bench/bench_robustness.py --ckpt before/model.pt --ckpt after/model.pt
    python bench/bench_robustness.py --ckpt model.pt --sets written   # numbers as written only
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import sacrebleu
from common import model_engines, models_args, read_lines, save_records

from nmt.data.augmentation import Pair, insert, numbers, one_to_one_links
from nmt.data.word_alignment import align_corpus
from nmt.terms.spans import DEFAULT_RULES, Rules
from nmt.translation.texts import translate_texts

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


# one template per form; each digit is drawn anew (a phone number is kept: its plan decides)
WRITTEN = {
    "time": "10:45",
    "time am/pm": "9:30 PM",
    "date": "2026-12-01",
    "date dotted": "14.03.2025",
    "date with month": "1 May 2019",
    "money": "$4.99",
    "money code": "EUR 30",
    "percentage": "50%",
    "range": "45-67",
    "score": "3-2",
    "version": "v2.1.3",
    "phone": "+49 30 1234567",
    "ip": "192.168.0.1",
    "size": "4.7 GB",
    "dimensions": "30x40x50 cm",
    "fraction": "3/4",
    "ordinal": "21st",
    "code": "A-2291-X",
    "thousands": "1,250",
}


def test_links(src: list[str], refs: list[str]) -> list:
    """The word links of each test pair, from eflomal over these pairs and the training
    pairs together."""
    train_src, train_tgt = read_lines("train.en"), read_lines("train.de")
    return align_corpus(src + train_src, refs + train_tgt)[: len(src)]


def with_written(src, refs, links, localized: bool) -> tuple[list[str], list[str], list[str]]:
    """(sources, references, the form put in each; "" where no word pair is linked one to
    one): forms in turn, their digits drawn (seed 0); with `localized`, the reference holds
    the German form (nmt.written_numbers.localize)."""
    from nmt.written_numbers import localize

    rng, kinds = np.random.default_rng(0), list(WRITTEN)
    out_src, out_refs, put = [], [], []
    for i, (s, r, pairs) in enumerate(zip(src, refs, links, strict=True)):
        template = WRITTEN[kinds[i % len(kinds)]]
        form = (
            template
            if "+" in template
            else "".join(str(rng.integers(1, 10)) if c.isdigit() else c for c in template)
        )
        one_to_one = one_to_one_links(sorted(pairs))
        if not one_to_one:
            out_src.append(s), out_refs.append(r), put.append("")
            continue
        a, b = one_to_one[rng.integers(len(one_to_one))]
        new = insert(Pair(s.split(), r.split(), sorted(pairs)), a, b, form, form)
        ref = " ".join(new.tgt)
        out_src.append(" ".join(new.src)), put.append(form)
        out_refs.append(ref.replace(form, localize(form)) if localized else ref)
    return out_src, out_refs, put


def written_records(engine, search, ckpt, src, refs, links) -> list[dict]:
    """The numbers-as-written rows of one model: per way of translating, per form, the share
    come out byte for byte (and for localize, by value too)."""
    from nmt.written_numbers import find as numbers_in
    from nmt.written_numbers import localize, same_value

    records = []
    ways = {"protected": DEFAULT_RULES, "localize": None, "model alone": Rules()}
    for way, rules in ways.items():
        if rules is None:
            try:
                rules = Rules(DEFAULT_RULES.kinds, (), "localize")
            except TypeError:  # a tree from before numbers=localize
                continue
        sources, references, put = with_written(src, refs, links, way == "localize")
        found = translate_texts(engine, sources, search, protect=rules)
        hyps = [t.text for t in found]
        by_kind: dict[str, list[tuple[bool, bool]]] = {}
        for i, form in enumerate(put):
            if not form:
                continue
            want = localize(form) if way == "localize" else form
            exact = want in hyps[i]
            valued = exact or any(same_value(form, m.text) for m in numbers_in(hyps[i]))
            by_kind.setdefault(list(WRITTEN)[i % len(WRITTEN)], []).append((exact, valued))
        record = {
            "name": f"robustness/written/{way}/{ckpt}",
            "ckpt": ckpt,
            "form": "numbers as written",
            "way": way,
            "bleu_lc": round(bleu_lc(hyps, references), 2),
            "numbers": sum(len(v) for v in by_kind.values()),
            "kept_exactly": {
                k: round(float(np.mean([e for e, _ in v])), 3) for k, v in by_kind.items()
            },
            "kept_by_value": {
                k: round(float(np.mean([x for _, x in v])), 3) for k, v in by_kind.items()
            },
            "all_exactly": round(float(np.mean([e for v in by_kind.values() for e, _ in v])), 4),
            "flagged": flagged([t.warnings for t in found]),
        }
        records.append(record)
        print(record, flush=True)
    return records


def with_numbers(src, refs, links) -> tuple[list[str], list[str], list[str]]:
    """(sources, references, the number put in each; "" where no word pair is linked one to
    one)."""
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
    links = test_links(src, refs)
    numbered_src, numbered_refs, put = with_numbers(src, refs, links)
    records = []
    for ckpt, engine, search in model_engines(args):
        records += written_records(engine, search, ckpt, src, refs, links)
        if args.sets == "written":
            continue
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
