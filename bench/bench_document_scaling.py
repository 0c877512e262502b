"""Is the document code linear in its input? Its time on hostile pages and Word files (what a
server may be sent) as their size doubles, without the model.

Each case runs at 6 sizes, doubling, in `--repeats` rounds that time each size once (a
slow spell of the machine falls on every size alike); a size's time is the median over the
rounds of the CPU time of this process (what other jobs take is not counted), the garbage
collector run before each timing and paused during it (its full collections would land on
one size at random). Printed: the median time per size and, in brackets, the best of the
rounds (on a shared virtual machine the median of 5 still wanders by a third); the ratio
per doubling of each and the median's geometric mean. Target: every ratio at most 2.3 (a
quadratic step shows 4). The translator
is a stand-in (each word upper-cased, word i aligned to word i), so the figures are the
documents' own work:
- html_tags: one paragraph of `<b>a</b> ` x n, through Pages.plan and Pages.render;
- html_comments, html_marked_sections, html_unclosed_comments: `<!--`, `<![`, `<!--a>`
  x n (CVE-2025-6069: html.parser searches the rest of the input for each one's end), the
  same way;
- docx_runs: a Word paragraph of n runs of "a" (one word), read (WordFile), planned,
  rendered and written back;
- nested_spans: one segment of `<i>a<b>b</b></i>` x n/2 (n tags, two deep, in one word).

    python bench/bench_document_scaling.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import time
from collections.abc import Callable

import docx
from common import save_records

from nmt.documents.docx_file import WordFile
from nmt.documents.markup import Pages
from nmt.translation.translated import Translation

TARGET = 2.3  # the most a doubling of the input may cost


def upper(texts: list[str]) -> list[Translation]:
    """Each word upper-cased, word i aligned to word i, the outer whitespace kept."""
    found = []
    for text in texts:
        words = text.split()
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        target = lead + " ".join(w.upper() for w in words) + trail
        links = [(i, i) for i in range(len(words))]
        found.append(Translation(text, alternatives=[(target, 0.0)], alignments=[links]))
    return found


def pages(documents: list[str]) -> list[str]:
    planned = Pages.plan(documents)
    return [t.text for t in planned.render(upper([s.text for s in planned.segments]))]


def word_file(n: int) -> bytes:
    document = docx.Document()
    paragraph = document.add_paragraph()
    for _ in range(n):
        paragraph.add_run("a")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def through_word_file(data: bytes) -> bytes:
    read = WordFile(data)
    return read.translated(pages(read.fragments))


# name: (smallest size, the input of size n, the work on it)
CASES: dict[str, tuple[int, Callable[[int], object], Callable[[object], object]]] = {
    "html_tags": (500, lambda n: ["<p>" + "<b>a</b> " * n + "</p>"], pages),
    "html_comments": (100_000, lambda n: ["<p>x " + "<!--" * n], pages),
    "html_marked_sections": (100_000, lambda n: ["<p>x " + "<![" * n], pages),
    "html_unclosed_comments": (5_000, lambda n: ["<p>x " + "<!--a>" * n], pages),
    "docx_runs": (250, word_file, through_word_file),
    "nested_spans": (500, lambda n: ["<p>" + "<i>a<b>b</b></i>" * (n // 2) + "</p>"], pages),
}


def seconds(work: Callable[[object], object], given: object) -> float:
    gc.collect()
    gc.disable()
    start = time.process_time()
    work(given)
    spent = time.process_time() - start
    gc.enable()
    return spent


def doublings(times: list[float]) -> list[float]:
    return [b / a for a, b in zip(times, times[1:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    records, worst = [], {}
    for name, (smallest, make, work) in CASES.items():
        sizes = [smallest * 2**k for k in range(6)]
        inputs = [make(n) for n in sizes]
        work(inputs[0])  # warm: imports, caches
        rounds = [[seconds(work, given) for given in inputs] for _ in range(args.repeats)]
        median = [statistics.median(times) for times in zip(*rounds, strict=True)]
        best = [min(times) for times in zip(*rounds, strict=True)]
        worst[name] = (max(doublings(median)), max(doublings(best)))
        mean = (median[-1] / median[0]) ** (1 / (len(sizes) - 1))
        print(f"{name}: median x{mean:.2f} per doubling on average", flush=True)
        rows = zip(sizes, median, best, [0, *doublings(median)], [0, *doublings(best)], strict=True)
        for n, t, b, r, rb in rows:
            ratio = f"  x{r:.2f} (x{rb:.2f})" if r else ""
            print(f"  n={n:>9,}  {t * 1000:8.1f} ms ({b * 1000:8.1f} ms){ratio}", flush=True)
        records.append(
            {
                "name": f"document_scaling/{name}",
                "sizes": sizes,
                "median_seconds": [round(t, 5) for t in median],
                "best_seconds": [round(t, 5) for t in best],
                "median_doublings": [round(r, 2) for r in doublings(median)],
                "best_doublings": [round(r, 2) for r in doublings(best)],
            }
        )
    save_records(records, "document_scaling")
    for label, k in (("median", 0), ("best", 1)):
        over = {name: round(w[k], 2) for name, w in worst.items() if w[k] > TARGET}
        most = max(w[k] for w in worst.values())
        print(f"worst ratio per doubling, {label}: {most:.2f} (target {TARGET}); over: {over}")


if __name__ == "__main__":
    main()
