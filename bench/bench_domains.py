"""Models on each domain of the general corpus (data=general, #83): everyday sentences (Ding),
software messages (gettext catalogs of held-out packages) and Multi30k, through translate's
path with each model's own search.

Per model, domain and split (val and test of each):
- BLEU and chrF2 (cased sacreBLEU), with protected spans on (translate's default) and off;
- placeholders and numbers kept: of the format placeholders (`%s`, `%(name)s`, `{0}`) and
  numbers as people write them in the sources, the share that the output holds as often;
- terms (with --terms): a glossary drawn from Ding's word pairs (its training lines only):
  the entries a source holds whose target the reference uses; the share of them the output
  uses, with no glossary and with that glossary (translate's glossary=), and BLEU with it.

    python bench/bench_domains.py --ckpt general/model.pt --ckpt multi30k/model.pt [--terms]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import sacrebleu
from common import save_records

from nmt.config import CorpusConfig, DataConfig, InferenceConfig
from nmt.corpus import ding
from nmt.corpus.build import held_out_split
from nmt.corpus.packages import unpacked
from nmt.data.sources import cache_root, debian_corpus
from nmt.decoding.settings import DecodeConfig
from nmt.files import read_lines
from nmt.inference import loading
from nmt.inference.search_choice import choose_search
from nmt.terms.glossary import MAX_FORMS, Entry, Glossary, core, lemma
from nmt.terms.spans import DEFAULT_RULES, Rules
from nmt.translation.texts import translate_texts
from nmt.written_numbers import NUMBERS, PLACEHOLDERS

DOMAINS = ("everyday", "software", "multi30k")


def kept(sources: list[str], outputs: list[str], pattern) -> tuple[float | None, int]:
    """The share of the sources' matches the outputs hold as often, and how many there were."""
    asked = held = 0
    for src, out in zip(sources, outputs, strict=True):
        want = Counter(m.group(0) for m in pattern.finditer(src))
        asked += sum(want.values())
        held += sum(min(n, out.count(text)) for text, n in want.items())
    return (round(held / asked, 4) if asked else None), asked


def dictionary_glossary(cfg: DataConfig) -> Glossary:
    """Ding's word pairs of the lines the corpus trains on (a held-out line's are left out),
    at most MAX_FORMS per source lemmas (the first ones)."""
    corpus = cfg.corpus
    root = unpacked(corpus.dictionary, cache_root(corpus.cache_dir) / "packages").root
    entries, forms = {}, Counter()
    for line in ding.entries(root):
        if line.words and held_out_split(line.line, corpus.held_out_share) == "train":
            en, de = line.words
            key = tuple(lemma(core(w), "en") for w in en.split())
            if len(key) <= 4 and "\t" not in en + de and forms[key] < MAX_FORMS:
                forms[key] += en not in entries
                entries.setdefault(en, Entry(en, de))
    return Glossary(list(entries.values()))


def terms_asked(glossary: Glossary, sources: list[str], refs: list[str]) -> list[list[Entry]]:
    """Per line, the entries its source holds whose target its reference uses."""
    return [
        [m.entry for m in glossary.find(src) if glossary.uses(ref, m.entry.target)]
        for src, ref in zip(sources, refs, strict=True)
    ]


def term_use(glossary: Glossary, asked: list[list[Entry]], outputs: list[str]) -> float | None:
    total = sum(len(entries) for entries in asked)
    used = sum(
        glossary.uses(out, e.target) for es, out in zip(asked, outputs, strict=True) for e in es
    )
    return round(used / total, 4) if total else None


def scores(outputs: list[str], refs: list[str]) -> dict:
    return {
        "bleu": round(sacrebleu.corpus_bleu(outputs, [refs]).score, 2),
        "chrf2": round(sacrebleu.corpus_chrf(outputs, [refs]).score, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", action="append", required=True, help="a model (repeatable)")
    parser.add_argument("--splits", default="val,test")
    parser.add_argument("--terms", action="store_true", help="also the glossary's term use")
    parser.add_argument("--lines", type=int, default=None, help="the first N lines of each")
    args = parser.parse_args()
    cfg = DataConfig(source="debian", name="general", corpus=CorpusConfig())
    folder = debian_corpus(cfg)
    glossary = dictionary_glossary(cfg) if args.terms else None
    records = []
    for ckpt in args.ckpt:
        engine = loading.load(InferenceConfig(ckpt=ckpt, decode=DecodeConfig()))
        search, line = choose_search(engine.card, DecodeConfig(), [])
        print(f"== {ckpt}: {line}", flush=True)
        for domain in DOMAINS:
            for split in args.splits.split(","):
                name = f"{split}_{domain}"
                src = list(read_lines(folder / f"{name}.en"))[: args.lines]
                refs = list(read_lines(folder / f"{name}.de"))[: args.lines]
                for setting, rules in (("protected", DEFAULT_RULES), ("not protected", Rules())):
                    start = time.perf_counter()
                    out = [t.text for t in translate_texts(engine, src, search, protect=rules)]
                    record = {
                        "name": f"domains/{name}/{setting}/{ckpt}",
                        "ckpt": ckpt,
                        "split": name,
                        "setting": setting,
                        "lines": len(src),
                        **scores(out, refs),
                        "seconds": round(time.perf_counter() - start, 1),
                    }
                    for what, pattern in (("placeholders", PLACEHOLDERS), ("numbers", NUMBERS)):
                        record[f"{what}_kept"], record[what] = kept(src, out, pattern)
                    if glossary is not None and setting == "protected":
                        asked = terms_asked(glossary, src, refs)
                        flat = {e.source: e for es in asked for e in es}
                        own = Glossary(list(flat.values()))
                        with_terms = [
                            t.text for t in translate_texts(engine, src, search, glossary=own)
                        ]
                        record["terms"] = sum(len(es) for es in asked)
                        record["term_use"] = term_use(glossary, asked, out)
                        record["term_use_glossary"] = term_use(glossary, asked, with_terms)
                        record["bleu_glossary"] = scores(with_terms, refs)["bleu"]
                    records.append(record)
                    print(record, flush=True)
    save_records(records, "domains")


if __name__ == "__main__":
    main()
