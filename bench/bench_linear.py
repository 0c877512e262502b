"""Is document work linear in its input? Each hostile shape a server may be sent is timed at six
sizes, each double the one before, through the code a request runs (nmt.jobs.check: parsing,
segments, counts) and, where the limits would let it through, rendering (tag projection) with
a stand-in translator (each word upper-cased, aligned to itself: no model, so the time is the
document code's alone). Printed per shape: the median of `--repeats` timings at each size and
the ratio of each size's time to the one before; linear work doubles (2.0), and the target is
at most 2.3 per doubling. Limits are lifted (Limits.unbounded) so each shape is timed whole.

    python bench/bench_linear.py [--repeats 5] [--base 4000]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import zipfile

from common import save_records

from nmt.documents.translation import Translation
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits
from nmt.jobs.run import run

W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def upper(texts, numbers, prefixes, alignments, scores) -> list[Translation]:
    """Each word upper-cased and aligned to itself (a Translator)."""
    found = []
    for text in texts:
        words = text.split()
        target = " ".join(w.upper() for w in words)
        links = [[(i, i) for i in range(len(words))]]
        found.append(Translation(text, alternatives=[(target, 0.0)], alignments=links))
    return found


def docx(paragraph: bytes) -> bytes:
    """A minimal .docx holding one paragraph."""
    out = io.BytesIO()
    types = (
        b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        b'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        b'<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
        b'officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        b'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
    )
    body = b"<w:document " + W + b"><w:body>" + paragraph + b"</w:body></w:document>"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", types)
        z.writestr("_rels/.rels", rels)
        z.writestr("word/document.xml", body)
    return out.getvalue()


SHAPES = {  # name: n -> (file name, bytes); n counts the repeated unit
    "html: <b>a</b> in one paragraph": lambda n: ("a.html", b"<p>" + b"<b>a</b> " * n + b"</p>"),
    "html: paragraphs": lambda n: ("a.html", b"<p>A dog <i>runs</i>.</p>\n" * n),
    "html: unterminated <!--": lambda n: ("a.html", b"<p>A dog.</p>" + b"<!--" * n),
    "html: unterminated <![": lambda n: ("a.html", b"<p>A dog.</p>" + b"<![" * n),
    "html: <a ' before one >": lambda n: ("a.html", b"<p>A dog.</p>" + b"<a x='" * n + b">"),
    "docx: runs in one paragraph": lambda n: (
        "a.docx",
        docx(b"<w:p>" + b'<w:r><w:t xml:space="preserve">a </w:t></w:r>' * n + b"</w:p>"),
    ),
    "text: lines": lambda n: ("a.txt", b"A dog runs.\n" * n),
}


def work(name: str, data: bytes) -> None:
    """What a request with this file costs, but the decoding: checked, then rendered."""
    fmt = {"html": "html", "docx": "docx", "txt": "text"}[name.rsplit(".", 1)[1]]
    job = Job(data=data, name=name, format=fmt)
    unbounded = Limits.unbounded(max_zip_ratio=float("inf"))
    run(check(job, unbounded), upper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", type=int, default=4000, help="the smallest size's units")
    args = parser.parse_args()
    sizes = [args.base * 2**k for k in range(6)]
    records, worst = [], 0.0
    for shape, make in SHAPES.items():
        medians = []
        for n in sizes:
            name, data = make(n)
            work(name, data)  # warm
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                work(name, data)
                times.append(time.perf_counter() - start)
            medians.append(statistics.median(times))
        ratios = [b / a for a, b in zip(medians, medians[1:], strict=False)]
        worst = max(worst, *ratios)
        print(f"{shape}: sizes {sizes[0]}..{sizes[-1]}")
        print("  seconds:", " ".join(f"{t:.4f}" for t in medians))
        print("  ratio per doubling:", " ".join(f"{r:.2f}" for r in ratios))
        records.append({"name": f"linear/{shape}", "sizes": sizes, "seconds": medians})
    print(f"worst ratio per doubling: {worst:.2f} (target <= 2.3)")
    save_records(records, "linear")


if __name__ == "__main__":
    main()
