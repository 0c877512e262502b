"""format=html (nmt.documents.markup): the text of a page translated, its tags kept, placed on
the aligned target words, on both engines; the parser that gives its source back exactly."""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser

import pytest
from conftest import (
    document_result,
    html_pages,
    run_module,
    stand_in,
    translated_html,
    uppercase_translator,
    word_translator,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.decoding.settings import DecodeConfig
from nmt.documents.html_tree import MAX_DEPTH, Element, MarkupError, Raw, Text, parse, tag_tree
from nmt.documents.markup import Pages, Segment, plan
from nmt.documents.tag_projection import Span, project
from nmt.translation.texts import translate_texts
from nmt.translation.translated import Translation

GREEDY = DecodeConfig(strategy="greedy")
TAG = re.compile(r"<[^>]*>")


@pytest.fixture(scope="module", params=["torch", "ctranslate2"])
def engine(request, overfit_engine, ct2_f32):
    return overfit_engine if request.param == "torch" else ct2_f32


# --- the tree: every byte back, whatever the input ---

PIECES = st.sampled_from(
    [
        "<p>", "</p>", "<b>", "</b>", "<a href='x?a=1&amp;b=2'>", "</a>", "<br>", "<img src=a/>",
        "<!-- note -->", "<!DOCTYPE html>", "<script>if (a<b) f();</script>", "</div>", "<li>",
        "&amp;", "&lt;", "&#233;", "&nbsp", "text", " ", "\n", "<", ">", "</", "<?pi?>",
        "<![CDATA[x]]>",
        "<span class=\"notranslate\">", "</span>", "<P>", "<b/>", "\t",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_the_tree_gives_its_source_back_byte_for_byte(source):
    assert str(parse(source)) == source


def test_the_tree_nests_as_written():
    root = parse("<div><p>A <b>dog<i>!</i></b></p>text<br><p>B</div>tail</a>")
    div = root.children[0]
    assert [c.tag for c in div.children if hasattr(c, "tag")] == ["p", "br", "p"]
    assert tag_tree(div.children[0]) == ("p", (), (("b", (), (("i", (), ()),)),))
    assert str(root.children[-1]) == "</a>"  # a stray end tag is kept as text
    assert div.children[-1].end == ""  # the last <p> is closed by </div>


def test_end_tags_html_lets_a_page_leave_out_are_implied():
    """An unclosed <li>, <td>, <tr>, <p> or <option> ends where the next one (or, for <p>, a
    block) starts, as browsers read it: siblings, not a staircase of children."""
    source = (
        "<ul><li>one<li>two <b>bold<li>three<ul><li>x<li>y</ul></ul><p>a<p>b<div>c</div>"
        "<table><tr><td>1<td>2<tr><td>3</table><select><option>a<option>b</select>"
    )
    root = parse(source)
    assert str(root) == source
    ul, p1, p2, div, table, select = root.children
    assert [c.tag for c in ul.children] == ["li", "li", "li"]
    assert tag_tree(ul.children[2]) == ("li", (), (("ul", (), (("li", (), ()), ("li", (), ()))),))
    assert (p1.tag, p2.tag, div.tag) == ("p", "p", "div")
    assert [[c.tag for c in tr.children] for tr in table.children] == [["td", "td"], ["td"]]
    assert [c.tag for c in select.children] == ["option", "option"]


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (
            '<p>Buy the <span class="notranslate">Acme Pro</span> today</p>',
            '<p>BUY THE <span class="notranslate">Acme Pro</span> TODAY</p>',
        ),
        (
            '<p>Mail <a translate="no">x@y.com</a>.</p>',
            '<p>MAIL <a translate="no">x@y.com</a>.</p>',
        ),
        ("<p>A dog <img src=x></p>", "<p>A DOG <img src=x></p>"),
        ("<p>A dog<img src=x> runs</p>", "<p>A DOG<img src=x> RUNS</p>"),
    ],
)
def test_an_element_with_no_words_keeps_the_spaces_it_had(page, expected):
    """A brand name kept untranslated, an address, an image: spaced as in the source, not
    glued onto the word before it."""

    assert html_pages(uppercase_translator, [page])[0].text == expected


def test_a_long_page_of_unclosed_paragraphs_translates_and_deep_nesting_is_one_error():

    page = "<p>A dog runs." * 990
    assert html_pages(uppercase_translator, [page])[0].text == "<p>A DOG RUNS." * 990
    with pytest.raises(ValueError, match="nests its elements too deeply"):
        html_pages(uppercase_translator, ["<span>" * 5000 + "A dog." + "</span>" * 5000])


# --- hostile markup: read in linear time, as text or comments, or refused in one line ---

MALFORMED = [
    "x <![ y",  # html.parser: AssertionError
    "<p>Hi <![x]> there</p>",  # (a bogus comment, as browsers read it)
    "<p>A <![CDATA[b]]> c <![if !IE]>d<![endif]></p>",
    "<!--" * 300,  # CVE-2025-6069's shapes: each searched for to the end of the input
    "<p>a</p>" + "<!--a>" * 300,  # a comment nothing closes, before a ">"
    "<![" * 300,
    "<?" * 300,
    "</" * 300,
    "<!" * 300,
    "<a b='" * 300,
    "<p>" + "<a x='" * 300 + ">",
    "<script>" + "</" * 300,
    "<p>A dog &amp runs <",
]


@pytest.mark.parametrize("page", MALFORMED)
def test_malformed_markup_is_text_or_a_comment_and_comes_back_byte_for_byte(page):

    assert str(parse(page)) == page
    html_pages(uppercase_translator, [page])  # no AssertionError, no RecursionError


HOSTILE = st.sampled_from(
    ["<!--", "-->", "--", "<![", "]]>", "<![CDATA[", "<?", "</", "<!", "<a b='", "'", '"', "=",
     ">", "<", "<script>", "</script>", "<p>", "<b>", "</b>", "x", " ", "\n", "&#", "&a", "\x00"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(HOSTILE, max_size=40).map("".join), st.text(max_size=40)))
def test_any_markup_is_read_byte_for_byte_or_refused_in_one_line(source):
    try:
        root = parse(source)
    except MarkupError as error:
        assert "\n" not in str(error)
    else:
        assert str(root) == source


def test_an_unclosed_construct_is_text_and_a_marked_section_a_comment():

    assert [s.text for s in Pages.plan(["x <![ y"]).segments] == ["x <![ y"]
    hi = parse("<p>Hi <![x]> there</p>").children[0]
    assert [type(c) for c in hi.children] == [Text, Raw, Text] and str(hi.children[1]) == "<![x]>"
    found = html_pages(uppercase_translator, ["<p>Hi <![x]> there</p>"])[0].text
    assert found == "<p>HI <![x]> THERE</p>"  # kept as written, where it was
    root = parse("<p>a</p>" + "<!--a>" * 3)
    assert [str(c) for c in root.children] == ["<p>a</p>", "<!--a>" * 3]
    assert [type(c) for c in root.children] == [Element, Text]


def test_a_comment_with_no_end_after_it_is_never_searched_for_one(monkeypatch):
    """html.parser searches the rest of the input for the end of each `<!--` (quadratic on a
    page of them, CVE-2025-6069): only the one comment that has an end is searched."""
    searched = []
    search = HTMLParser.parse_comment

    def counted(self, i, report=1):
        searched.append(i)
        return search(self, i, report)

    monkeypatch.setattr(HTMLParser, "parse_comment", counted)
    page = "<!-- closed --><p>a</p>" + "<!--a>" * 500 + "<!--" * 500
    root = parse(page)
    assert str(root) == page and len(searched) == 1
    assert [type(c) for c in root.children] == [Raw, Element, Text]


def test_elements_nested_deeper_than_max_depth_are_one_markup_error():

    deepest = "<span>" * MAX_DEPTH + "A dog." + "</span>" * MAX_DEPTH
    assert html_pages(uppercase_translator, [deepest])[0].text == deepest.replace(
        "A dog.", "A DOG."
    )  # every walk of the tree (plan, spans, projection, rendering) within the stack
    for page in ("<b>" * (MAX_DEPTH + 1), "<div>" * 10_000):
        with pytest.raises(MarkupError, match=f"more than {MAX_DEPTH} inside") as refused:
            Pages.plan([page])
        assert "\n" not in str(refused.value)


def test_pages_are_parsed_once_counted_then_rendered_around_their_translations():
    documents = [
        "<p>A <b>big <i>dog</i></b> runs.<img src=x></p><p>Two men.</p>",
        "<pre>kept</pre>",
        "<ul><li>One <a href=x>cat</a></ul>",
    ]
    pages = Pages.plan(documents)
    assert [s.text for s in pages.segments] == ["A big dog runs.", "Two men.", "One cat"]
    counts = [(s.word_count, s.tag_count) for s in pages.segments]
    assert counts == [(4, 3), (2, 0), (2, 1)]  # b, i (inside b) and the image
    found = uppercase_translator([s.text for s in pages.segments], [1, 1, 3])
    assert [t.text for t in pages.render(found)] == [  # as translate_pages gave before Pages
        "<p>A <b>BIG <i>DOG</i></b> RUNS.<img src=x></p><p>TWO MEN.</p>",
        "<pre>kept</pre>",
        "<ul><li>ONE <a href=x>CAT</a></ul>",
    ]


def test_many_tags_in_one_word_keep_their_order_and_little_punctuation_outside():
    """Tags side by side in one word share it; the punctuation a tag leaves outside it is
    a few characters of its word, never the rest of a long word (linear, not quadratic)."""

    page = "<p>" + "<b>a</b>" * 2000 + "</p>"
    (segment,) = Pages.plan([page]).segments
    assert (segment.word_count, segment.tag_count) == (1, 2000)
    assert all(not s.head and not s.tail for s in segment.spans)
    found = html_pages(uppercase_translator, [page])[0].text
    assert found == "<p><b>" + "A" * 2000 + "</b>" + "<b></b>" * 1999 + "</p>"
    (quoted,) = Pages.plan(['<p>"<b>Hi</b>" and ' + "!" * 40 + "<i>x</i></p>"]).segments
    assert [(s.head, s.tail) for s in quoted.spans] == [('"', '"'), ("", "")]


# --- where tags go: the projection, with alignments given ---


def test_a_tag_goes_around_the_target_words_aligned_to_its_words():
    spans = [Span({1, 2}), Span(set(), at=4)]  # "a <b>big dog</b> runs<img>"
    project(spans, [(0, 0), (1, 2), (2, 1), (3, 3)], source_count=4, target_count=4)
    assert spans[0].target == (1, 3)  # reordered words, one contiguous range
    assert spans[1].target == (4, 4)  # after the last source word's target


def test_children_stay_inside_their_parent_and_siblings_do_not_cross():
    child = Span({2})
    parent = Span({0, 1}, children=[child])  # source-nested; the alignment sends 2 outside
    sibling = Span({3})
    project([parent, sibling], [(0, 0), (1, 1), (2, 4), (3, 1)], 4, 5)
    assert parent.target == (0, 2)
    assert parent.target[0] <= child.target[0] <= child.target[1] <= parent.target[1]
    assert sibling.target[0] >= parent.target[1]  # starts where the earlier ends


def test_an_unaligned_word_borrows_its_nearest_aligned_neighbour():
    spans = [Span({1})]
    project(spans, [(0, 0), (2, 3)], 3, 4)
    assert spans[0].target == (0, 1)  # word 1 unaligned: word 0's (the earlier on a tie)


DOC = (
    '<div>\n  <p>The "<b>big</b>" dog runs <a href="/p?a=1&amp;b=2">to the <i>park</i></a>.'
    '<img src=a.png></p>\n<pre>keep\n  this</pre><p translate="no">Not this.</p>'
    "<script>if (a<b) f();</script>\n</div>"
)


def render_with(document: str, target: str, links: list[tuple[int, int]]) -> str:
    (segment,) = [p for p in plan(parse(document)) if isinstance(p, Segment)]
    rendered = segment.render(
        Translation(segment.text, alternatives=[(target, 0)], alignments=[links])
    )
    return "".join(rendered if isinstance(p, Segment) else p for p in plan(parse(document)))


def test_a_page_keeps_its_markup_around_the_aligned_words():
    out = render_with(
        DOC,
        'Der "große" Hund läuft zum Park & See.',
        [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 4), (6, 5), (6, 6), (6, 7)],
    )
    assert out == (
        '<div>\n  <p>Der "<b>große</b>" Hund läuft <a href="/p?a=1&amp;b=2">zum '
        "<i>Park &amp; See</i></a>.<img src=a.png></p>\n<pre>keep\n  this</pre>"
        '<p translate="no">Not this.</p><script>if (a<b) f();</script>\n</div>'
    )  # punctuation outside a tag stays outside; & escaped; untouched blocks copied


def test_a_point_clipped_into_a_word_a_tag_end_splits_leaves_the_word_whole():
    """A word glued across a tag's end (`A</b>&amp;`) whose tag's image, spaced in the source,
    lands inside it when the words are reordered: the image goes in, no space with it (a
    draw of the property below)."""
    page = "<div><p>A <b> <img src=x>  <img src=x> A</b>&amp; A </p></div>"
    out = render_with(page, "A A& A", [(2, 0), (1, 1), (0, 2)])
    assert words_of(out) == ["A", "A&amp;", "A"], out
    assert tag_tree(parse(out), ordered=False) == tag_tree(parse(page), ordered=False)


REORDERINGS = st.sampled_from(["same", "reversed", "shuffled"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_page_translated_with_any_word_order_keeps_its_tree(data):
    """Generated pages; each segment "translated" into its words reordered (and one word
    dropped or added): the output parses back to the same tags, each tag once."""
    inline = st.sampled_from(["b", "i", "em", "a href='#x'", "span class=c", "code"])
    words = st.sampled_from(["A", "dog", "runs.", "Two", "men", '"play"', "&amp;", "on", "grass"])

    def run(depth: int) -> str:
        parts = []
        for _ in range(data.draw(st.integers(1, 4))):
            kind = data.draw(
                st.sampled_from(["word", "word", "tag", "point"] if depth < 3 else ["word"])
            )
            if kind == "word":
                parts.append(data.draw(words) + data.draw(st.sampled_from([" ", "", "  "])))
            elif kind == "point":
                # spaced: a point inside a word has no order to keep
                point = data.draw(st.sampled_from(["<img src=x>", "<!-- c -->", "<a name=n></a>"]))
                parts.append(f" {point} ")
            else:
                tag = data.draw(inline)
                parts.append(f"<{tag}>{run(depth + 1)}</{tag.split()[0]}>")
        return "".join(parts)

    blocks = [
        f"<{b}>{run(0)}</{b}>"
        for b in data.draw(st.lists(st.sampled_from(["p", "li", "h2"]), min_size=1, max_size=3))
    ]
    document = "<div>" + "\n".join(blocks) + "</div>"
    order = data.draw(REORDERINGS)
    extra = data.draw(st.booleans())
    pieces = plan(parse(document))
    out = []
    for piece in pieces:
        if not isinstance(piece, Segment):
            out.append(piece)
            continue
        source = piece.text.split()
        index = list(range(len(source)))
        if order == "reversed":
            index.reverse()
        elif order == "shuffled":
            index = data.draw(st.permutations(index))
        target = [source[i] for i in index] + (["noch"] if extra else [])
        links = [(s, t) for t, s in enumerate(index)]
        out.append(
            piece.render(
                Translation(piece.text, alternatives=[(" ".join(target), 0)], alignments=[links])
            )
        )
    translated = "".join(out)
    assert tag_tree(parse(translated), ordered=False) == tag_tree(parse(document), ordered=False)
    if order == "same":
        assert tag_tree(parse(translated)) == tag_tree(parse(document))
    added = ["noch"] * sum(isinstance(p, Segment) for p in pieces) if extra else []
    assert sorted(words_of(translated)) == sorted(words_of(document) + added)


def words_of(html: str) -> list[str]:
    return TAG.sub("", html).split()


# --- end to end, both engines ---


def test_the_text_of_a_translated_page_is_the_plain_translation(engine, overfit_pairs):
    """What the model reads is the plain text: stripping the tags from the translated page
    gives the plain text's own translation; each tag lands on its aligned words."""
    s = overfit_pairs[0]
    link = wrap(s[3], 0, 'a href="x"')
    page = (
        f"<html><head><title>{s[0]}</title></head><body>\n<h1>{s[1]}</h1>\n"
        f"<p>{wrap(s[2], 1, 'b')} {link}</p>\n<ul><li>{s[4]}</li></ul><pre>{s[5]}</pre>"
        "</body></html>\n"
    )
    (found,) = translated_html(engine, [page], GREEDY)
    plain = translate_texts(engine, [s[0], s[1], f"{s[2]} {s[3]}", s[4]], GREEDY, alignments=True)
    blocks = re.findall(r"<(title|h1|p|li)>(.*?)</\1>", found.text)
    assert [TAG.sub("", text) for _, text in blocks] == [escape(t.text, quote=False) for t in plain]
    assert f"<pre>{s[5]}</pre>" in found.text and found.text.endswith("</html>\n")
    assert tag_tree(parse(found.text), ordered=False) == tag_tree(parse(page), ordered=False)
    # the <b> around the paragraph's source word 1: around that word's aligned target words
    words = plain[2].text.split()
    aligned = sorted(t for source, t in plain[2].alignments[0] if source == 1)
    if aligned:
        bold = re.search(r"<b>(.*?)</b>", found.text).group(1)
        assert bold == escape(" ".join(words[aligned[0] : aligned[-1] + 1]), quote=False)


def wrap(sentence: str, index: int, tag: str) -> str:
    words = sentence.split()
    words[index] = f"<{tag}>{words[index]}</{tag.split()[0]}>"
    return " ".join(words)


def test_translate_format_html_writes_the_page_and_refuses_what_it_cannot_write(
    model_pt, overfit_pairs, tmp_path
):
    page = tmp_path / "page.html"
    page.write_text(f"<p>{wrap(overfit_pairs[0][0], 1, 'em')}</p>\n<p>{overfit_pairs[0][1]}</p>\n")
    out = tmp_path / "out.html"
    args = [f"ckpt={model_pt}", f"input={page}", "format=html", "decode=greedy"]
    done = run_module("nmt.translate", [*args, f"output={out}"], tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    html = out.read_text()
    assert html.count("<p>") == 2 and html.count("<em>") == 1 and html.endswith("</p>\n")
    refused = run_module("nmt.translate", [*args, "nbest=2"], tmp_path)
    assert refused.returncode != 0
    last = refused.stderr.decode().strip().splitlines()[-1]
    assert last.endswith("format html answers with documents alone: drop nbest")


@pytest.mark.parametrize(
    ("page", "written"),
    [
        (
            "<html><head><title>A dog</title></head><body><p>A dog runs.</p></body></html>",
            '<html><head><meta charset="utf-8"><title>',
        ),
        (
            '<HTML><HEAD><META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=iso-8859-1">'
            "</HEAD><P>A dog runs.</P>",
            'CONTENT="text/html; charset=utf-8">',
        ),
        ("<head><meta charset='windows-1252'></head><p>A dog runs.</p>", "<meta charset='utf-8'>"),
        ("<p>A dog runs.</p>", "<p>Aß dogß runs.ß</p>"),  # a fragment: no head to say it in
    ],
)
def test_an_html_file_says_it_is_utf_8_so_its_umlauts_open_as_written(page, written):
    """English pages are often ASCII with no charset or a Latin one, which their German in
    UTF-8 would contradict; a browser opening the file would show "Ã\x9f" for "ß"."""
    german = word_translator(lambda word: word + "ß")
    data = document_result(stand_in(german), "html", data=page.encode(), name="a.html").data
    out = data.decode("utf-8")
    assert written in out and "ß" in out
    assert len(re.findall("charset", out, re.IGNORECASE)) == ("head" in page.lower())
