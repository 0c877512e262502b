"""Markdown (nmt.documents.markdown_file): real sentences in every block Markdown has; its
syntax kept, its text translated, an identity translation rendering as the source does."""

from __future__ import annotations

import re

import pytest
from conftest import (
    document_result,
    identity_translator,
    reversed_translator,
    stand_in,
    uppercase_translator,
)
from markdown_it import MarkdownIt
from mdit_py_plugins.front_matter import front_matter_plugin

from nmt.errors import JobError
from nmt.jobs.check import check
from nmt.jobs.job import Job, Limits

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin)


def notes(s: list[str]) -> str:
    return f"""---
title: {s[0]}
---
# {s[1]} *now*

{s[2]} with **{s[3]}** and [{s[4]}](https://example.org/a_b "Title") and `git pull`, %s kept,
{s[5]} <https://example.org>.

- {s[6]}
- {s[7]} ![a photo](photo.png) ~~gone~~

| {s[8]} | {s[9]} |
|---|---|
| {s[10]} | *{s[11]}* |

> {s[12]}
> {s[13]}

```python
print("{s[14]}")
```

    indented code stays
"""


def translated(source: str, translate) -> str:
    return document_result(
        stand_in(translate), "markdown", data=source.encode(), name="a.md"
    ).data.decode()


def blocks(text: str) -> list[str]:
    return [t.type for t in MD.parse(text) if t.type != "inline"]


def rendered(text: str) -> str:
    return " ".join(MD.render(text).split())


@pytest.fixture
def sentences(overfit_pairs) -> list[str]:
    return [x.rstrip(".") for x in overfit_pairs[0][:15]]


def test_an_identity_translation_renders_as_the_source_does(sentences):
    source = notes(sentences)
    out = translated(source, identity_translator)
    assert rendered(out) == rendered(source)
    assert out.count("\n") < source.count("\n")  # the two-line paragraphs on one line each


def test_text_is_translated_and_syntax_code_and_front_matter_kept(sentences):
    source = notes(sentences)
    out = translated(source, uppercase_translator)
    assert blocks(out) == blocks(source)
    assert out.startswith(f"---\ntitle: {sentences[0]}\n---\n")  # front matter untouched
    assert f'```python\nprint("{sentences[14]}")\n```\n\n    indented code stays\n' in out
    assert f"# {sentences[1].upper()} *NOW*\n" in out
    assert '](https://example.org/a_b "Title")' in out and "`git pull`" in out and "%s" in out
    assert "![a photo](photo.png)" in out and "~~GONE~~" in out and "<https://example.org>" in out
    assert f"| {sentences[10].upper()} | *{sentences[11].upper()}* |" in out
    words = MD.parse(out)
    text = " ".join(t.content for t in words if t.type == "inline")
    for s in sentences[1:14]:
        assert s.upper() in text or s.upper().replace("_", "\\_") in text


def test_a_crossing_alignment_keeps_every_block_and_link(sentences):
    source = notes(sentences)
    out = translated(source, reversed_translator)
    assert blocks(out) == blocks(source)
    links = [c for t in MD.parse(out) if t.children for c in t.children if c.type == "link_open"]
    assert sorted(link.attrs["href"] for link in links) == [
        "https://example.org",
        "https://example.org/a_b",
    ]


def test_text_that_looks_like_syntax_comes_back_escaped():
    out = translated(
        "Use 2*3 and a_b [x]\n", lambda texts, numbers: [*uppercase_translator(texts, numbers)]
    )
    assert re.sub(r"\s", "", rendered(out)) == "<p>USE2*3ANDA_B[X]</p>"


def test_more_lines_than_segments_allowed_is_refused_before_parsing():
    with pytest.raises(JobError, match="max_file_segments=3") as refused:
        check(
            Job(data=b"a\n\nb\n\nc\n\nd\n", name="a.md", format="markdown"),
            Limits(max_file_segments=3),
        )
    assert refused.value.status == 413


def test_syntax_characters_past_max_file_tags_are_refused_before_parsing():
    """100,000 "[" cost markdown-it-py seconds: they are counted first."""
    with pytest.raises(JobError, match="max_file_tags=50000") as refused:
        check(Job(data=b"[" * 100_000, name="a.md", format="markdown"), Limits())
    assert refused.value.status == 413 and "\n" not in str(refused.value)
