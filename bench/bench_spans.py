"""Protected spans (#58): test_2016_flickr with a URL, an e-mail address, a number, a template
variable or inline code put in each sentence, translated with spans protected (translate's
default) and without, through `translate`'s path.

Each test pair gets one span (the kinds in turn, a different one per line) on both sides at a
pair of words eflomal links one to one (the links from eflomal over the test pairs and
Multi30k's training pairs together), as the training views put numbers in. Per model and
setting:
- kept: the share of spans byte-identical in the output, as often as in the source;
- put back: the share the protection put back at their aligned position (the model lost or
  doubled their placeholder), from the warnings;
- BLEU of the rest: each output with its span taken out, against the plain references,
  beside the plain sentences' own BLEU under the same setting (target: within 1);
- seconds: the whole set's decoding, protection included.

    python bench/bench_spans.py --ckpt model.pt [--ckpt other/model.pt] [--backend ctranslate2]
"""

from __future__ import annotations

import time

import numpy as np
import sacrebleu
from common import model_engines, models_args, read_lines, save_records

from nmt.data.augmentation import Pair, insert, one_to_one_links
from nmt.data.word_alignment import align_corpus
from nmt.terms.spans import DEFAULT_RULES, Rules
from nmt.translation.texts import translate_texts

SPANS = [
    "https://example.org/docs?id=42",
    "ann.meyer@example.org",
    "1,250",
    "{{name}}",
    "`git pull`",
    "%(count)s",
    "$HOME",
    "17",
]


def with_spans(src: list[str], refs: list[str]) -> tuple[list[str], list[str]]:
    """(sources, the span put in each; "" where no word pair is linked one to one)."""
    train_src, train_tgt = read_lines("train.en"), read_lines("train.de")
    links = align_corpus(src + train_src, refs + train_tgt)[: len(src)]
    rng = np.random.default_rng(0)
    out, put = [], []
    for i, (s, r, pairs) in enumerate(zip(src, refs, links, strict=True)):
        pair = Pair(s.split(), r.split(), sorted(pairs))
        one_to_one = one_to_one_links(pair.links)
        if not one_to_one:
            out.append(s), put.append("")
            continue
        a, b = one_to_one[rng.integers(len(one_to_one))]
        span = SPANS[i % len(SPANS)]
        out.append(" ".join(insert(pair, a, b, span, span).src))
        put.append(span)
    return out, put


def without(text: str, span: str) -> str:
    return " ".join(text.replace(span, " ", 1).split()) if span else text


def bleu(hyps: list[str], refs: list[str]) -> float:
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def main() -> None:
    args = models_args(__doc__.split("\n\n")[0], 5, "lines put back, printed")
    src, refs = read_lines(f"{args.split}.en"), read_lines(f"{args.split}.de")
    spanned, put = with_spans(src, refs)
    asked = [i for i, span in enumerate(put) if span]
    records = []
    for ckpt, engine, search in model_engines(args):
        for name, rules in (("protected", DEFAULT_RULES), ("not protected", Rules())):
            plain = [t.text for t in translate_texts(engine, src, search, protect=rules)]
            start = time.perf_counter()
            found = translate_texts(engine, spanned, search, protect=rules)
            seconds = time.perf_counter() - start
            hyps = [t.text for t in found]
            kept = [i for i in asked if hyps[i].count(put[i]) == spanned[i].count(put[i])]
            put_back = [i for i in asked if any(w.startswith("span ") for w in found[i].warnings)]
            rest = [without(h, span) for h, span in zip(hyps, put, strict=True)]
            record = {
                "name": f"spans/{name}/{args.backend}/{ckpt}",
                "ckpt": ckpt,
                "backend": args.backend,
                "setting": name,
                "spans": len(asked),
                "kept": round(len(kept) / len(asked), 4),
                "put_back": round(len(put_back) / len(asked), 4),
                "bleu_rest": round(bleu(rest, refs), 2),
                "bleu_plain": round(bleu(plain, refs), 2),
                "seconds": round(seconds, 1),
            }
            records.append(record)
            print(record, flush=True)
            for i in put_back[: args.show]:
                print(f"  {spanned[i]!r} -> {hyps[i]!r}: {found[i].warnings}", flush=True)
            for i in sorted(set(asked) - set(kept))[: args.show]:
                print(f"  not kept: {spanned[i]!r} -> {hyps[i]!r}", flush=True)
    save_records(records, "spans")


if __name__ == "__main__":
    main()
