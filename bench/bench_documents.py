"""Paragraphs, not lines (#41): what cutting paragraphs into sentences costs and buys.

test_2016_flickr's English sentences are grouped into paragraphs of 3 to 6 consecutive ones
joined by a space (bench_splitters.paragraphs). Three ways through `translate_texts`, each on
each engine given, alternating (bench/harness.py):
- pre-split: the sentences themselves, one per line (the best a user could do by hand);
- sentences: the paragraphs with segment=sentences (the default);
- lines: the paragraphs with segment=lines, as one segment each (the behaviour before).
Throughput is counted in source sentences per second; target: sentences at least 90% of
pre-split. BLEU is scored per paragraph against the references joined the same way (the
pre-split output joined by a space too); target: sentences within 0.5 of pre-split.

The same is reported, BLEU only (too few for timing), for paragraphs of the test sentences
without final punctuation, with and without the splitter's cut of over-long runs (max_words).

    python bench/bench_documents.py --ckpt model.pt [--export DIR]
"""

from __future__ import annotations

import re
import statistics

import sacrebleu
from bench_splitters import paragraphs
from common import read_lines, save_records, trained_engines, trained_model_args
from harness import Run, Side, alternate

from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts

ENDS = re.compile(r"[.!?][\"')\]]*$")


def joined_bleu(outputs: list[str], references: list[str]) -> float:
    return sacrebleu.corpus_bleu(outputs, [references]).score


def way(engine, search, texts: list[str], segment: str, sentences: int, splitter=None):
    def run() -> Run:
        found = translate_texts(engine, texts, search, segment, splitter)
        return Run(sentences, None, [t.text for t in found])

    return run


def regroup(lines: list[str], groups: list[list[str]]) -> list[str]:
    """Pre-split outputs joined back into their paragraphs, by a space."""
    out, at = [], 0
    for group in groups:
        out.append(" ".join(lines[at : at + len(group)]))
        at += len(group)
    return out


def main() -> None:
    args = trained_model_args(__doc__)
    english, german = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    pairs = paragraphs(list(zip(english, german, strict=True)))
    src_groups = [[en for en, _ in p] for p in pairs]
    references = [" ".join(de for _, de in p) for p in pairs]
    flat = [s for group in src_groups for s in group]
    texts = [" ".join(group) for group in src_groups]
    bare = [(en, de) for en, de in zip(english, german, strict=True) if not ENDS.search(en)]
    bare_pairs = paragraphs(bare)
    bare_texts = [" ".join(en for en, _ in p) for p in bare_pairs]
    bare_refs = [" ".join(de for _, de in p) for p in bare_pairs]
    print(f"{len(pairs)} paragraphs of {len(flat)} sentences; {len(bare_pairs)} unpunctuated")
    records = []
    for backend, engine, search in trained_engines(args):
        sides = [
            Side(
                "pre-split", "one sentence per line", way(engine, search, flat, "lines", len(flat))
            ),
            Side(
                "sentences", "segment=sentences", way(engine, search, texts, "sentences", len(flat))
            ),
            Side("lines", "segment=lines", way(engine, search, texts, "lines", len(flat))),
        ]
        timings = alternate(sides, "sent/s", args.rounds, same_work=False)
        bleu = {
            "pre-split": joined_bleu(regroup(timings.outputs["pre-split"], src_groups), references),
            "sentences": joined_bleu(timings.outputs["sentences"], references),
            "lines": joined_bleu(timings.outputs["lines"], references),
        }
        for name, target in (("sentences", 0.9), ("lines", None)):
            ratio = timings.ratio(name, "pre-split", f"documents/{backend}/{name}_vs_presplit")
            gap = bleu[name] - bleu["pre-split"]
            print(
                f"  {ratio.line()}  BLEU {bleu[name]:.2f} vs {bleu['pre-split']:.2f} "
                f"({gap:+.2f})"
                + (f"  (target at least {target:.0%}, BLEU within 0.5)" if target else ""),
                flush=True,
            )
            records.append(
                ratio.record()
                | {"bleu": bleu[name], "bleu_presplit": bleu["pre-split"], "target": target}
            )
        no_cut = SentenceSplitter(max_words=10**9)
        bare_flat = [en for en, _ in bare]
        bare_bleu = {
            "pre-split": joined_bleu(
                regroup(
                    way(engine, search, bare_flat, "lines", 0)().output,
                    [[en for en, _ in p] for p in bare_pairs],
                ),
                bare_refs,
            ),
            "sentences": joined_bleu(
                way(engine, search, bare_texts, "sentences", 0)().output, bare_refs
            ),
            "sentences without the long-run cut": joined_bleu(
                way(engine, search, bare_texts, "sentences", 0, no_cut)().output, bare_refs
            ),
            "lines": joined_bleu(way(engine, search, bare_texts, "lines", 0)().output, bare_refs),
        }
        print(
            "  unpunctuated paragraphs, BLEU: "
            + ", ".join(f"{k} {v:.2f}" for k, v in bare_bleu.items())
        )
        records.append({"name": f"documents/{backend}/unpunctuated_bleu", **bare_bleu})
        print(f"  ({statistics.median(timings.rates['pre-split']):.1f} pre-split sent/s)")
    save_records(records, "documents")


if __name__ == "__main__":
    main()
