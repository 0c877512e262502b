"""Glossaries (#58): how often a translation uses a required term, what it costs in BLEU and
time, per engine, through `translate`'s path.

The glossary is built from test_2016_flickr's references: for each test pair whose plain
translation lacks (by German lemma) a reference noun (capitalised, not the sentence's first
word: German capitalises nouns alone; no tagger is at hand for verbs) that eflomal links one
to one to a source content word (letters only, 3 or more, not a function word), that source
word -> reference noun is one entry (the first such pair of the sentence; a source word
already in the glossary is skipped, so each entry has one target). Each such sentence is
translated with its own entry, as Dinu et al. 2019 score terms (a glossary applied to every
sentence also rewrites synonyms that other sentences' references kept). Measured:
- term use: the share of entries whose sentence's translation holds the target term (any
  inflection, by lemma), without and with the glossary (without is 0 by construction);
- misses in a compound: entries not used whose translation holds the term as the head or
  first part of a longer word (`Holzbank` for `Bank`);
- exact form: of those used, the share in the reference's own form; and of the entries given
  in another form (--given lemma), the share whose translation has the reference's form;
- BLEU of the whole test set without and with the entries;
- seconds: the test set without them, and their sentences one by one with them; val
  (which the glossary was not built from), each setting once untimed (warm), then --repeats
  times in pairs back to back, without a glossary and with it, each side first in turn: with
  FILLER entries of training words val never holds (a 1,000-entry glossary that
  applies nowhere: what matching costs) and with the test entries (common nouns: nearly
  every val line holds one, so the mode's own cost), and with --house, a house glossary of
  HOUSE entries (train's words most often linked to a German noun, each with that noun: what
  a user's glossary mostly holds), with its val term use without and with: the median ratio
  to without, range;
- a sample of applied terms, printed for checking by eye.
Per mode: the terms annotated (a model trained with data.augment.terms) or placed (any other),
either way with the torch beam steered to the terms (decode.term_bonus, --term-bonus; 0 is
off), the beam's finished hypothesis that uses the most terms first unless --term-choice
off, and a term still lacking placed (decode.term_place, --term-place edit|decode|off: written
in, decoded again from it, or not at all); and exact (glossary_exact: hard
constraints, on an engine that has them, unless --without-exact).
--entries keeps the glossary in a file, so that models are compared on one. With --given
lemma each target term is given as its lemma (`Ast` where the reference has `Äste`), as a user
writes a glossary: the model must inflect it, and the exact form is still the reference's.

    python bench/bench_glossary.py --ckpt model.pt --entries terms.tsv [--backend ctranslate2]
        [--given lemma] [--stop first_k] [--term-choice off] [--term-bonus 0]
        [--term-place edit|decode|off] [--without-exact] [--house house.tsv]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path

import sacrebleu
from common import read_lines, save_records

from nmt.config import InferenceConfig
from nmt.data.augmentation import one_to_one_links
from nmt.data.word_alignment import align_corpus
from nmt.decoding.settings import DecodeConfig
from nmt.inference import loading
from nmt.inference.search_choice import choose_search
from nmt.terms.annotation import FUNCTION_WORDS, term_text
from nmt.terms.glossary import Entry, Glossary, core, lemma
from nmt.translation.texts import translate_texts


def build(src: list[str], refs: list[str], plain: list[str]) -> dict[int, Entry]:
    """Sentence index -> its entry (see the module docstring)."""
    train_src, train_tgt = read_lines("train.en"), read_lines("train.de")
    links = align_corpus(src + train_src, refs + train_tgt)[: len(src)]
    entries, taken = {}, set()
    for i, (s, r, out, pairs) in enumerate(zip(src, refs, plain, links, strict=True)):
        s_words, r_words = s.split(), r.split()
        have = {lemma(core(w), "de") for w in out.split()}
        for a, b in one_to_one_links(sorted(pairs)):
            word, term = core(s_words[a]), core(r_words[b])
            if (
                len(word) >= 3
                and word.isalpha()
                and term.isalpha()
                and b > 0
                and term[:1].isupper()  # a noun: German capitalises nouns alone
                and word.lower() not in FUNCTION_WORDS
                and word.lower() not in taken
                and lemma(term, "de") not in have
            ):
                entries[i] = Entry(
                    word.lower() if a == 0 else word, term
                )  # a capital of the start goes
                taken.add(word.lower())
                break
    return entries


def read_entries(path: str) -> dict[int, Entry]:
    rows = [line.split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return {int(i): Entry(source, target) for i, source, target in rows}


FILLER = 1000
HOUSE = 1000


def filler(entries: list[Entry], avoid: list[str], n: int) -> list[Entry]:
    """n entries that apply to none of `avoid`'s lines: training words (content words, in
    order of first use) that no line of `avoid` holds in any form, each to itself
    capitalised (the target is never read: the entry never applies)."""
    have = {lemma(core(w), "en") for line in avoid for w in line.split()}
    have |= {core(w).lower() for line in avoid for w in line.split()}
    have |= {e.source.lower() for e in entries}
    chosen: dict[str, Entry] = {}
    for line in read_lines("train.en"):
        for word in (core(w).lower() for w in line.split()):
            if (
                len(chosen) < n
                and len(word) >= 3
                and word.isalpha()
                and word not in FUNCTION_WORDS
                and word not in have
                and lemma(word, "en") not in have
            ):
                chosen.setdefault(word, Entry(word, word.capitalize()))
    return list(chosen.values())


def house(n: int) -> list[Entry]:
    """A house glossary of n entries, as a user keeps one: train's source content words
    (letters only, 3 or more, not a function word) most often linked one to one (eflomal) to
    a German noun, each with that noun where it is at least half of the word's one-to-one
    links (its usual translation: not "green" -> "Grün" for "im Grünen"). Mostly the
    model's own words, some that it writes otherwise."""
    train_src, train_tgt = read_lines("train.en"), read_lines("train.de")
    counts: Counter[tuple[str, str]] = Counter()
    links: Counter[str] = Counter()  # each source word's one-to-one links, to any word
    for s, t, pairs in zip(train_src, train_tgt, align_corpus(train_src, train_tgt), strict=True):
        s_words, t_words = s.split(), t.split()
        for a, b in one_to_one_links(sorted(pairs)):
            word, term = core(s_words[a]).lower(), core(t_words[b])
            if len(word) < 3 or not word.isalpha() or word in FUNCTION_WORDS:
                continue
            links[word] += 1
            if term.isalpha() and b > 0 and term[:1].isupper():
                counts[word, term] += 1
    chosen: dict[str, str] = {}
    for (word, term), count in counts.most_common():
        if len(chosen) == n:
            break
        if 2 * count >= links[word]:
            chosen.setdefault(word, term)
    return [Entry(word, term) for word, term in chosen.items()]


def read_or_build(path: str | None, build_entries) -> list[Entry]:
    """Entries from a TSV (source, target) if it exists, else built and written there."""
    if path and Path(path).exists():
        rows = Path(path).read_text(encoding="utf-8").splitlines()
        return [Entry(*row.split("\t")) for row in rows]
    entries = build_entries()
    if path:
        Path(path).write_text("".join(f"{e.source}\t{e.target}\n" for e in entries), "utf-8")
    return entries


def timed(engine, search, lines, glossary=None):
    start = time.perf_counter()
    found = translate_texts(engine, lines, search, glossary=glossary)
    return found, time.perf_counter() - start


def in_a_compound(translation: str, term: str) -> bool:
    """Whether a word of `translation` holds the (one-word) `term` inside it, as the head or
    the first part of a longer word, case aside."""
    term = term.lower()
    return any(
        len(word) > len(term) and (word.endswith(term) or word.startswith(term))
        for word in (core(w).lower() for w in translation.split())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--backend", default="torch", choices=["torch", "ctranslate2"])
    parser.add_argument("--sample", type=int, default=50, help="applied terms printed")
    parser.add_argument(
        "--entries",
        help="a TSV of (test line, source term, target term): read if it exists (so that "
        "models are compared on one glossary), else built and written there",
    )
    parser.add_argument(
        "--given",
        choices=["reference", "lemma"],
        default="reference",
        help="the target terms as the references have them, or as their lemmas (a user's "
        "glossary: the model must inflect them)",
    )
    parser.add_argument(
        "--stop",
        choices=["exact", "first_k"],
        help="the beam's stopping rule, if not the model's (first_k: CTranslate2's)",
    )
    parser.add_argument(
        "--term-choice",
        choices=["on", "off"],
        default="on",
        help="annotated or placed: the beam's finished hypothesis that uses the most terms "
        "first (decode.term_choice), or the search's own best",
    )
    parser.add_argument(
        "--term-bonus",
        type=float,
        help="the beam's bonus per term token written (decode.term_bonus; an engine with a "
        "constrained search), if not the default",
    )
    parser.add_argument(
        "--term-place",
        choices=["decode", "edit", "off"],
        help="a term the translation still lacks decoded again from it, or written into it "
        "(decode.term_place), if not the default; for a model that reads no terms, off uses none",
    )
    parser.add_argument(
        "--without-exact", action="store_true", help="leave the exact mode (glossary_exact) out"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed val runs per setting (0: no timing)"
    )
    parser.add_argument(
        "--house",
        help="a TSV of HOUSE entries (source, target), read if it exists, else built from "
        "train (`house`) and written there: val is timed with it too",
    )
    args = parser.parse_args()
    src, refs = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    val = read_lines("val.en")
    engine = loading.load(
        InferenceConfig(ckpt=args.ckpt, decode=DecodeConfig(), backend=args.backend)
    )
    fields = {"stop": args.stop} if args.stop else {}
    if args.term_bonus is not None:
        fields["term_bonus"] = args.term_bonus
    if args.term_place is not None:
        fields["term_place"] = args.term_place
    search, line = choose_search(
        engine.card,
        DecodeConfig(),
        [],
        term_choice=args.term_choice == "on",
        **fields,
    )
    learnt = engine.info.get("terms")
    print(f"== {args.ckpt} ({args.backend}; terms learnt: {learnt}): {line}", flush=True)
    plain, plain_s = timed(engine, search, src)
    entries = (
        read_entries(args.entries)
        if args.entries and Path(args.entries).exists()
        else build(src, refs, [t.text for t in plain])
    )
    if args.entries and not Path(args.entries).exists():  # kept: other models get the same
        Path(args.entries).write_text(
            "".join(f"{i}\t{e.source}\t{e.target}\n" for i, e in entries.items()),
            encoding="utf-8",
        )
    print(f"{len(entries)} entries, from {len(entries)} of {len(src)} test sentences", flush=True)
    reference_form = {i: e.target for i, e in entries.items()}
    if args.given == "lemma":
        entries = {i: Entry(e.source, term_text(e.target, "lemma")) for i, e in entries.items()}
        changed = sum(1 for i, e in entries.items() if e.target != reference_form[i])
        print(f"targets given as lemmas: {changed} differ from the reference's form", flush=True)
    modes = {"annotated" if learnt else "placed": False}
    if engine.constrains and not args.without_exact:
        modes["exact"] = True
    records = []
    for mode, exact in modes.items():
        glossary = Glossary(list(entries.values()), exact=exact)
        # each test sentence with its own entry (as Dinu et al. score terms), one call each
        found, found_s = list(plain), 0.0
        for i, entry in entries.items():
            one, seconds = timed(engine, search, [src[i]], Glossary([entry], exact=exact))
            found[i], found_s = one[0], found_s + seconds
        # val, alternating: without, FILLER entries that apply nowhere, the test entries
        settings = {
            "none_apply": Glossary(filler(list(entries.values()), val, FILLER), exact=exact),
            "test_entries": glossary,
        }
        if args.house:
            settings["house"] = Glossary(
                read_or_build(args.house, lambda: house(HOUSE)), exact=exact
            )
        ratios: dict[str, list[float]] = {name: [] for name in settings}
        outputs: dict[str, list] = {}
        if args.repeats:  # one untimed run of each: every batch shape met once (warm)
            plain_val = timed(engine, search, val)[0]
            outputs = {name: timed(engine, search, val, g)[0] for name, g in settings.items()}
        for repeat in range(args.repeats):
            for name, setting in settings.items():
                # a pair back to back, each side first in turn: no drift or order favours one
                pair = (None, setting) if repeat % 2 == 0 else (setting, None)
                seconds = [timed(engine, search, val, g)[1] for g in pair]
                without, with_it = seconds if repeat % 2 == 0 else seconds[::-1]
                ratios[name].append(with_it / without)
        used = [i for i, e in entries.items() if glossary.uses(found[i].text, e.target)]
        exact_form = [
            i for i in used if reference_form[i] in [core(w) for w in found[i].text.split()]
        ]
        # of the misses, those whose translation holds the term inside a longer word: a
        # German compound (`Holzbank` for `Bank`), which the measure by lemma counts a miss
        compound = [
            i for i in entries if i not in used and in_a_compound(found[i].text, reference_form[i])
        ]
        # the entries given in another form than the reference's: did the model inflect?
        inflect = [i for i, e in entries.items() if e.target != reference_form[i]]
        record = {
            "name": f"glossary/{args.backend}/{mode}/{args.given}/{search.stop}/"
            f"choice_{args.term_choice}/bonus_{search.term_bonus}/place_{search.term_place}/"
            f"{args.ckpt}",
            "ckpt": args.ckpt,
            "backend": args.backend,
            "mode": mode,
            "entries": len(glossary),
            "targets_given": args.given,
            "stop": search.stop,
            "term_choice": search.term_choice,
            "term_bonus": search.term_bonus if engine.constrains and not exact else None,
            "term_place": search.term_place if not exact else None,
            "term_use_without": round(
                sum(1 for i, e in entries.items() if glossary.uses(plain[i].text, e.target))
                / len(entries),
                4,
            ),
            "term_use_with": round(len(used) / len(entries), 4),
            "exact_form_of_used": round(len(exact_form) / max(len(used), 1), 4),
            "missed_but_in_a_compound": len(compound),
            "given_in_another_form": len(inflect),
            "reference_form_of_those": round(
                sum(1 for i in inflect if i in exact_form) / max(len(inflect), 1), 4
            ),
            "bleu_without": round(sacrebleu.corpus_bleu([t.text for t in plain], [refs]).score, 2),
            "bleu_with": round(sacrebleu.corpus_bleu([t.text for t in found], [refs]).score, 2),
            "test_seconds_without": round(plain_s, 1),
            "test_seconds_with_one_by_one": round(found_s, 1),
        }
        if args.repeats:  # --repeats 0 (a busy machine): quality alone
            held = sum(1 for line in val if glossary.find(line))
            record["val_lines_holding_a_test_entry"] = held
            record["filler_entries"] = len(settings["none_apply"])
            if args.house:  # the house glossary's terms in val: used without and with it
                held = [(i, u) for i, t in enumerate(outputs["house"]) for u in t.terms]
                record["house_entries"] = len(settings["house"])
                record["house_val_lines_holding_one"] = sum(1 for t in outputs["house"] if t.terms)
                record["house_val_terms_held"] = len(held)
                record["house_term_use_without"] = round(
                    sum(settings["house"].uses(plain_val[i].text, u["target"]) for i, u in held)
                    / max(len(held), 1),
                    4,
                )
                record["house_term_use_with"] = round(
                    sum(u["used"] for _, u in held) / max(len(held), 1), 4
                )
                record["house_val_bleu_without"] = round(
                    sacrebleu.corpus_bleu(
                        [t.text for t in plain_val], [read_lines("val.de")]
                    ).score,
                    2,
                )
                record["house_val_bleu_with"] = round(
                    sacrebleu.corpus_bleu(
                        [t.text for t in outputs["house"]], [read_lines("val.de")]
                    ).score,
                    2,
                )
            for name, values in ratios.items():
                record[f"val_time_ratio_{name}_median"] = round(statistics.median(values), 3)
                record[f"val_time_ratio_{name}_range"] = [
                    round(min(values), 3),
                    round(max(values), 3),
                ]
        print(record, flush=True)
        for i in used[: args.sample]:
            form = "exact" if i in exact_form else "inflected"
            entry, reference = entries[i], reference_form[i]
            print(f"  [{form}] {entry.source} -> {entry.target} ({reference}): {found[i].text}")
        records.append(record)
    save_records(records, "glossary")


if __name__ == "__main__":
    main()
