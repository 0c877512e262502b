"""format=html on test_2016_flickr (#41): what the tags cost in quality and time, and where
they land.

Each English test sentence becomes a page `<p>...</p>` with one inline tag (b, i, a with an
href, span with a class, in turn) around a phrase of 1 to 3 source words that eflomal aligns
to at least one reference word (eflomal run on train + test and symmetrised, as
bench_alignment). Per engine given, alternating (bench/harness.py):
- plain: the sentences as text (translate_texts, segment=sentences);
- html: the pages, as a job of format html (nmt.jobs), whose tags stripped should give the
  same text.
BLEU of both against the references (target: html within 0.5 of plain), the share of lines
whose stripped text is the plain translation exactly, and the time html costs.

Where the tags land: each page is rendered onto its reference, forced as the model's output
with the model's own alignment (Engine.align: its guided head, or the raw attention of a
model without one), and the tag's target words are compared with the reference words that
eflomal aligns to the phrase (from the first to the last): the share of tags on exactly those
words, and the word-level F1 of the tag's words against them.

    python bench/bench_html.py --ckpt model.pt [--export DIR]
"""

from __future__ import annotations

import html
import random
import re
import statistics

import sacrebleu
from common import read_lines, save_records, trained_engines, trained_model_args
from harness import Run, Side, alternate

from nmt.data.word_alignment import align_corpus
from nmt.documents.html_tree import parse
from nmt.documents.markup import Segment, plan
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits
from nmt.jobs.run import engine_translator, run
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.texts import translate_texts
from nmt.translation.translated import Translation

TAGS = ["b", "i", 'a href="https://example.org/?q=1&amp;p=2"', 'span class="term"']
TAG = re.compile(r"<[^>]*>")


def tagged_pages(sources: list[str], gold: list[list[tuple[int, int]]]) -> list[tuple]:
    """Per sentence: (page, tagged source word range (start, end))."""
    pages = []
    for i, (source, links) in enumerate(zip(sources, gold, strict=True)):
        words = source.split()
        aligned = {s for s, _ in links}
        spans = [
            (start, start + n)
            for n in (1, 2, 3)
            for start in range(len(words) - n + 1)
            if aligned & set(range(start, start + n))
        ]
        start, end = random.Random(i).choice(spans)
        tag = TAGS[i % len(TAGS)]
        escaped = [html.escape(w, quote=False) for w in words]
        inner = f"<{tag}>{' '.join(escaped[start:end])}</{tag.split()[0]}>"
        page = " ".join([*escaped[:start], inner, *escaped[end:]])
        pages.append((f"<p>{page}</p>", (start, end)))
    return pages


def stripped(page: str) -> str:
    """A page's text (a plain translation passes unchanged)."""
    return html.unescape(TAG.sub("", page)) if page.startswith("<p>") else page


def landed_words(rendered: str) -> set[int]:
    """The target word indices inside the one inline tag of a rendered page."""
    body = rendered.removeprefix("<p>").removesuffix("</p>")
    opened = re.search(r"<(b|i|a|span)[ >]", body)
    closed = body.index(f"</{opened.group(1)}>")
    before = len(TAG.sub("", body[: opened.start()]).split())
    inside = len(TAG.sub("", body[opened.start() : closed]).split())
    glued = opened.start() > 0 and not body[opened.start() - 1].isspace()
    first = before - 1 if glued and before else before
    return set(range(first, first + inside))


def landing(engine, pages, sources, references, gold) -> tuple[float, float]:
    """(share of tags on exactly eflomal's words, mean word F1) on the forced references."""
    forced = engine.align(sources, references)
    exact, f1s = 0, []
    for (page, (start, end)), reference, links, own in zip(
        pages, references, gold, forced, strict=True
    ):
        (segment,) = [p for p in plan(parse(page)) if isinstance(p, Segment)]
        rendered = segment.render(
            Translation(page, alternatives=[(reference, 0.0)], alignments=[own or []])
        )
        words = {t for s, t in links if start <= s < end}
        want = set(range(min(words), max(words) + 1))
        got = landed_words(rendered)
        exact += got == want
        common = len(got & want)
        f1s.append(2 * common / (len(got) + len(want)) if common else 0.0)
    return exact / len(pages), statistics.mean(f1s)


def html_job(engine, pages: list[str], search) -> list:
    """The pages as POST /translate with format html translates them."""
    job = Job(texts=pages, format="html", search=search)
    return run(
        check(job, Limits.unbounded()), engine_translator(engine, job, SentenceSplitter())
    ).translations


def way(engine, search, texts: list[str], translate):
    def run() -> Run:
        found = translate(engine, texts, search)
        return Run(len(texts), None, [stripped(t.text) for t in found])

    return run


def main() -> None:
    args = trained_model_args(__doc__)
    train_src, train_ref = read_lines("train.en"), read_lines("train.de")
    sources, references = read_lines("test_2016_flickr.en"), read_lines("test_2016_flickr.de")
    gold = align_corpus(train_src + sources, train_ref + references)[len(train_src) :]
    pages = tagged_pages(sources, gold)
    records = []
    for backend, engine, search in trained_engines(args):
        sides = [
            Side("plain", "the sentences as text", way(engine, search, sources, translate_texts)),
            Side("html", "format=html", way(engine, search, [p for p, _ in pages], html_job)),
        ]
        timings = alternate(sides, "sent/s", args.rounds, same_work=False)
        bleu = {
            name: sacrebleu.corpus_bleu(timings.outputs[name], [references]).score
            for name in ("plain", "html")
        }
        same = sum(a == b for a, b in zip(*timings.outputs.values(), strict=True))
        ratio = timings.ratio("html", "plain", f"html/{backend}/html_vs_plain")
        exact, f1 = landing(engine, pages, sources, references, gold)
        print(
            f"  {ratio.line()}\n  BLEU html {bleu['html']:.2f} vs plain {bleu['plain']:.2f} "
            f"({bleu['html'] - bleu['plain']:+.2f}; target within 0.5); stripped = plain on "
            f"{same}/{len(sources)} lines\n  tags on exactly eflomal's reference words: "
            f"{exact:.3f}; word F1 {f1:.3f}",
            flush=True,
        )
        records.append(
            ratio.record()
            | {"bleu_html": bleu["html"], "bleu_plain": bleu["plain"], "same_lines": same}
            | {"tags_exact": exact, "tags_word_f1": f1}
        )
    save_records(records, "html")


if __name__ == "__main__":
    main()
