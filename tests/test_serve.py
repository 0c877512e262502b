"""nmt.serve: served = offline, alone = batched, bad input answered in one line, failures
isolated, a fuzzed server still well, and the page in a real browser.

Servers run as `python -m nmt.serve` on 127.0.0.1 and a free port, each started once per
module and stopped at its end; every request has a timeout.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from conftest import (
    ROOT,
    compose,
    document_result,
    http_get,
    http_post,
    on_engine,
    run_module,
    translated_docx,
    translated_html,
    zygote_serve,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.config import DecodeConfig
from nmt.inference.output_text import best_text, model_line
from nmt.serving.launch import launched

pytestmark = pytest.mark.xdist_group("serve")  # one worker runs these: one set of servers

LIMITS = ["max_lines=16", "max_line_chars=400", "max_body_bytes=20000"]
CHROMIUM = "/usr/bin/chromium"


@contextmanager
def serving(
    ckpt: Path, *args: str, log_path: Path | None = None, start=zygote_serve
) -> Iterator[str]:
    """nmt.serve of `ckpt` on one thread, this checkout first on the path (nmt.serving.launch),
    without its sentence cache unless `args` say otherwise: each request is decoded, so the
    fault tests find their requests in flight (the cache has tests of its own). Forked from
    the zygote, unless `start` is launch's `started` (a cold start, as a user's). Its log
    goes to `log_path` if given."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = [f"ckpt={ckpt}", "threads=1", "cache_sentences=0", *args]
    with launched(args, env, log_path=log_path, start=start) as url:
        yield url


def post(url: str, body, timeout: float = 60) -> httpx.Response:
    """POST /translate: `body` as JSON, or bytes as they are."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http_post(url + "/translate", content=content, timeout=timeout)


@pytest.fixture(scope="module")
def server(model_pt: Path) -> Iterator[str]:
    """The overfit model served with cross-request batching on (a 20 ms wait)."""
    with serving(model_pt, "batch_wait_ms=20", *LIMITS) as url:
        yield url


@pytest.fixture(scope="module")
def lines(overfit_pairs) -> list[str]:
    """Real sentences the overfit model translates, with an empty one among them."""
    english = overfit_pairs[0][:12]
    return [*english[:5], "", *english[5:]]


@pytest.fixture(scope="module")
def offline(model_pt: Path, lines: list[str], tmp_path_factory) -> list[str]:
    """What `python -m nmt.translate` gives for `lines`, with the model's own search."""
    result = run_module(
        "nmt.translate",
        [f"ckpt={model_pt}"],
        tmp_path_factory.mktemp("offline"),
        stdin="".join(line + "\n" for line in lines).encode(),
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().splitlines()


def served_with(api, bodies: list[dict]) -> list:
    """TranslationAPI.predict on these request bodies, as a worker's batch of them."""
    from conftest import worker_answers

    return worker_answers(api, bodies)


@pytest.fixture(scope="module")
def api(model_pt: Path):
    """The server's LitServe API in this process, its model loaded (no HTTP)."""
    from nmt.serving.api import TranslationAPI

    cfg = compose("serve", [f"ckpt={model_pt}", "threads=1", "cache_sentences=0"])
    api = TranslationAPI(cfg, [], "overfit")
    api.setup("cpu")
    return api


def test_a_worker_loads_the_lemma_dictionaries_as_it_starts(model_pt: Path):
    """A request's glossary never waits for them (a fresh machine builds them first)."""
    from nmt.serving.api import TranslationAPI
    from nmt.terms import lemmas

    lemmas.dictionaries.cache_clear()
    lemmas.lemmatizer.cache_clear()
    cfg = compose("serve", [f"ckpt={model_pt}", "threads=1", "cache_sentences=0"])
    TranslationAPI(cfg, [], "overfit").setup("cpu")
    assert lemmas.dictionaries().loaded == {"en", "de"}


# --- the API: served = offline, the shape, the search, the model ---


def test_served_translations_are_the_offline_ones_in_the_shape_asked(server, lines, offline):
    answer = post(server, {"text": lines}).json()
    assert answer["translation"] == offline
    assert answer["translation"][5] == ""  # the empty line stays empty
    assert answer["model"].startswith("multi30k_cpu (model.pt")
    assert answer["search"]["strategy"] == "beam" and answer["search"]["beam_size"] == 5
    assert answer["search_text"] == "beam 5, GNMT length penalty 1.4"  # the model's own
    one = post(server, {"text": lines[0]}).json()
    assert one["translation"] == offline[0] and one["nbest"] is None


def test_per_request_search_prefix_and_nbest_match_the_offline_search(
    server, overfit_engine, lines
):
    """A request's fields on top of the model's search; the fields its strategy does not read
    go back to their defaults, so requests that search alike are batched together."""
    from nmt.decoding.settings import without_unread

    own = overfit_engine.search
    cases = [
        ({"strategy": "greedy"}, without_unread(replace(own, strategy="greedy"))),
        ({"beam_size": 3, "nbest": 3}, replace(own, beam_size=3, nbest=3)),
        (
            {"strategy": "sample", "seed": 7, "nbest": 2},
            without_unread(replace(own, strategy="sample", seed=7, nbest=2)),
        ),
    ]
    assert cases[0][1].beam_size == 1 and cases[0][1].len_penalty is None
    text = [line for line in lines if line][:4]
    for settings_, search in cases:
        answer = post(server, {"text": text, "search": settings_}).json()
        assert DecodeConfig(**answer["search"]) == search
        expected = overfit_engine.translate(text, search)
        assert answer["translation"] == best_text(overfit_engine.tokenizer, expected)
        if search.nbest > 1:
            for got, hyps in zip(answer["nbest"], expected, strict=True):
                texts = overfit_engine.tokenizer.decode([h.tokens for h in hyps])
                assert [h["text"] for h in got] == [model_line(t) for t in texts]
                assert [h["score"] for h in got] == pytest.approx([h.score for h in hyps], abs=1e-4)
    again = post(server, {"text": text, "search": cases[2][0]}).json()
    assert again["nbest"] == answer["nbest"]  # a seed repeats its samples
    prefix = "Ein"
    answer = post(server, {"text": text[0], "prefix": prefix}).json()
    expected = overfit_engine.translate([text[0]], own, prefixes=[prefix])
    assert answer["translation"] == best_text(overfit_engine.tokenizer, expected)[0]
    assert answer["translation"].startswith(prefix)


def test_health_info_and_the_openapi_schema(server, model_pt):
    health = http_get(server + "/health", timeout=10)
    assert health.status_code == 200 and health.text == "ok"
    info = http_get(server + "/info", timeout=10).json()["model"]
    assert info["direction"] == "en-de" and info["backend"] == "torch"
    assert info["shape"]["d_model"] == 64 and info["tokenizer"]["vocab_size"] == 500
    assert info["search_text"] == "beam 5, GNMT length penalty 1.4"
    assert "path" not in info and str(model_pt) not in json.dumps(info) and info["version"]
    limits = info["limits"]
    assert (limits["max_body_bytes"], limits["max_lines"], limits["max_line_chars"]) == (
        20000,
        16,
        400,
    )
    assert (limits["max_file_bytes"], limits["max_file_segments"]) == (2_000_000, 5000)
    assert info["protect"] == {
        "kinds": ["urls", "emails", "code", "variables", "numbers"],
        "patterns": [],
    }
    assert info["numbers"] == "keep"  # numbers come back as written unless one asks
    assert info["glossary_exact"] is False  # torch: a request may ask for exact terms
    assert info["retranslate"] == {"default": False, "formats": ["po", "xliff"]}
    assert info["routes"] == [  # the translating routes, as the door and metrics read them
        "/translate",
        "/translate_file",
        "/libretranslate/translate_file",
        "/libretranslate/translate",
        "/libretranslate/detect",
    ]
    schema = http_get(server + "/openapi.json", timeout=10).json()
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("/TranslateRequest")
    assert "beam_size" in schema["components"]["schemas"]["SearchSettings"]["properties"]


# --- cross-request batching: alone = batched ---


def test_a_line_is_translated_alike_alone_or_batched_with_other_requests(api, lines):
    bodies = [{"text": line} for line in lines] + [{"text": lines[3:9]}, {"text": []}]
    alone = [served_with(api, [body])[0] for body in bodies]
    together = served_with(api, bodies)
    assert together == alone
    assert together[0]["translation"] and together[-1]["translation"] == []


def flat_numbers(tree) -> list[float]:
    """Every number in a JSON tree, in order (None counts as nan)."""
    if isinstance(tree, dict):
        return [x for value in tree.values() for x in flat_numbers(value)]
    if isinstance(tree, list):
        return [x for value in tree for x in flat_numbers(value)]
    return [float("nan") if tree is None else tree] if not isinstance(tree, str) else []


def test_scores_on_request_are_the_engines_own_alone_or_batched(api, overfit_engine, lines):
    """`"scores": true` adds each line's scores (the engine's `score` of its translation);
    other requests of the same batch get none."""
    bodies = [
        {"text": lines, "scores": True},
        {"text": lines[0]},
        {"text": lines[1], "scores": True},
    ]
    together = served_with(api, bodies)
    alone = [served_with(api, [body])[0] for body in bodies]
    batched = [flat_numbers(a.pop("scores", None)) for a in together]
    single = [flat_numbers(a.pop("scores", None)) for a in alone]
    assert together == alone  # all but the scores exactly; the scores to float rounding
    for got, want in zip(batched, single, strict=True):
        assert got == pytest.approx(want, abs=1e-5, nan_ok=True)
    together = served_with(api, bodies)
    answer = together[0]
    assert together[1].get("scores") is None and answer["scores"][5] is None  # the empty line
    own = overfit_engine.search
    best = [h[0].tokens if h else [] for h in overfit_engine.translate(lines, own)]
    expected = overfit_engine.score(lines, best)
    for text, got, rated in zip(answer["translation"], answer["scores"], expected, strict=True):
        if rated is None:
            continue
        assert [w["word"] for w in got["words"]] == text.split()
        # the server's come from the search, these from force-decoding: equal to rounding
        assert [w["probability"] for w in got["words"]] == pytest.approx(rated.word_probs, abs=1e-4)
        assert got["log_prob_per_token"] == pytest.approx(rated.mean_log_prob, abs=1e-4)
        assert got["confidence"] is None  # this model was never calibrated
    assert together[2]["scores"] == answer["scores"][1]


def test_the_output_checks_are_served_as_offline(api, overfit_engine, lines):
    """Each text's warnings (nmt.inference.output_checks) come with the answer, [] for a clean
    one: a URL the model cannot write is reported missing, as offline."""
    from nmt.translation.texts import translate_texts

    planted = [lines[0], f"{lines[1]} See https://example.org/x1", ""]
    answer = served_with(api, [{"text": planted, "scores": True, "protect": []}])[0]
    offline = translate_texts(overfit_engine, planted, overfit_engine.search)
    assert answer["warnings"] == [t.warnings for t in offline]
    assert answer["warnings"][0] == [] and answer["warnings"][2] == []
    assert "missing https://example.org/x1" in answer["warnings"][1]
    assert served_with(api, [{"text": lines[0]}])[0]["warnings"] == []


def test_protected_spans_are_served_as_offline_and_requests_protecting_differently_apart(
    api, overfit_engine, lines
):
    """By default the server protects every kind of span (as translate does); a request may
    name its own kinds and patterns, and is then decoded apart from those naming others."""
    from nmt.terms.spans import DEFAULT_RULES, Rules
    from nmt.translation.texts import translate_texts

    planted = [f"{lines[1]} See https://example.org/x1", f"Order ACME-2000 for {lines[2]}"]
    mine = {"text": planted, "protect": ["urls"], "protect_patterns": ["ACME-[0-9]+"]}
    default, own, none = served_with(
        api, [{"text": planted}, mine, {"text": planted, "protect": []}]
    )
    for answer, rules in (
        (default, DEFAULT_RULES),
        (own, Rules(("urls",), ("ACME-[0-9]+",))),
        (none, Rules()),
    ):
        offline = translate_texts(overfit_engine, planted, overfit_engine.search, protect=rules)
        assert answer["translation"] == [t.text for t in offline]
        assert answer["warnings"] == [t.warnings for t in offline]
    assert "https://example.org/x1" in default["translation"][0]
    assert "ACME-2000" in own["translation"][1]


def test_numbers_as_written_come_through_every_door_as_offline(server, overfit_engine, api):
    """/translate (kept, and localized on request), /translate_file and LibreTranslate's
    /translate each carry a number as written whole, as translate_texts does offline."""
    from test_written_numbers import SENTENCES, spans_of

    from nmt.terms.spans import DEFAULT_RULES, Rules
    from nmt.translation.texts import translate_texts

    own = api.search
    for mode in ("keep", "localize"):
        reply = post(server, {"text": SENTENCES, "numbers": mode})
        assert reply.status_code == 200, reply.text
        rules = Rules(DEFAULT_RULES.kinds, (), mode)
        offline = translate_texts(overfit_engine, SENTENCES, own, protect=rules)
        assert reply.json()["translation"] == [t.text for t in offline]
    kept = [t.text for t in translate_texts(overfit_engine, SENTENCES, own, protect=DEFAULT_RULES)]
    for line, text in zip(SENTENCES, kept, strict=True):
        assert all(text.count(n) == line.count(n) for n in spans_of(line)), (line, text)
    upload = {"file": ("prices.txt", "".join(f"{x}\n" for x in SENTENCES).encode())}
    reply = http_post(server + "/translate_file", files=upload, timeout=120)
    assert reply.status_code == 200 and reply.content.decode().splitlines() == kept
    body = {"q": SENTENCES, "source": "en", "target": "de"}
    reply = http_post(server + "/libretranslate/translate", json=body, timeout=120)
    assert reply.json()["translatedText"] == kept


def test_a_requests_glossary_is_served_as_offline_with_the_terms_it_used(
    api, overfit_engine, overfit_pairs
):
    from nmt.terms.glossary import Glossary
    from nmt.translation.texts import translate_texts

    lines = overfit_pairs[0][:2]
    terms = {"bushes": "Sträucher"}
    mine, plain = served_with(api, [{"text": lines, "glossary": terms}, {"text": lines}])
    offline = translate_texts(
        overfit_engine, lines, overfit_engine.search, glossary=Glossary.of_request(terms)
    )
    assert mine["translation"] == [t.text for t in offline]
    assert mine["terms"] == [[{"source": "bushes", "target": "Sträucher", "used": True}], []]
    assert plain["terms"] == [[], []] and "Sträucher" not in plain["translation"][0]


def test_a_requests_exact_terms_are_served_as_offline_and_refused_before_the_work(
    api, overfit_engine, overfit_pairs
):
    """ "glossary_exact": true: the terms as hard constraints, as translate's glossary_exact;
    a server whose engine has no constrained search, or a request whose search is no beam,
    gets a 422 from the request's reading, before any decoding."""
    from dataclasses import replace as replaced

    from nmt.jobs.job import JobError
    from nmt.serving.schema import TranslateRequest, request_job
    from nmt.terms.glossary import Glossary
    from nmt.translation.texts import translate_texts

    lines = overfit_pairs[0][:3]
    terms = {"bushes": "Sträucher", "hard hats": "Helmen"}
    (exact,) = served_with(api, [{"text": lines, "glossary": terms, "glossary_exact": True}])
    offline = translate_texts(
        overfit_engine, lines, overfit_engine.search, glossary=Glossary.of_request(terms, True)
    )
    assert exact["translation"] == [t.text for t in offline]
    assert "Helmen" in exact["translation"][1].replace("Schutzhelmen", "")
    assert [[t["used"] for t in ts] for ts in exact["terms"]] == [[True], [True], []]
    request = TranslateRequest.model_validate(
        {"text": "A.", "glossary": terms, "glossary_exact": True}
    )
    with pytest.raises(JobError, match=r"the ctranslate2 engine has no constrained"):
        request_job(request, api.search, replaced(api.cfg, backend="ctranslate2"))
    greedy = TranslateRequest.model_validate(
        {**request.model_dump(exclude_none=True), "search": {"strategy": "greedy"}}
    )
    with pytest.raises(JobError, match="need a beam search of 2 beams"):
        request_job(greedy, api.search, api.cfg)
    no_terms = TranslateRequest.model_validate({"text": "A.", "glossary_exact": True})
    assert request_job(no_terms, api.search, replaced(api.cfg, backend="ctranslate2")).texts


def test_a_pasted_document_is_translated_sentence_by_sentence_in_its_shape(
    api, overfit_engine, lines
):
    """The server cuts each text into sentences (segment=sentences, the default) and keeps
    its line breaks and spacing; "segment": "lines" translates each text whole, as before;
    both as nmt.documents.translate_texts does offline, alone or batched."""
    from nmt.translation.texts import translate_texts

    document = f"# {lines[0]}\n\n  {lines[1]}  {lines[2]}\n- {lines[3]}\n"
    bodies = [
        {"text": document},
        {"text": [document, lines[4]], "segment": "lines"},
        {"text": document, "segment": "sentences", "alignments": True},
    ]
    together = served_with(api, bodies)
    assert together == [served_with(api, [body])[0] for body in bodies]
    own = api.search
    cut = translate_texts(overfit_engine, [document], own, alignments=True)[0]
    whole = translate_texts(overfit_engine, [document, lines[4]], own, "lines")
    assert together[0]["translation"] == cut.text
    assert together[2]["translation"] == cut.text and cut.text.count("\n") == 4
    assert together[1]["translation"] == [t.text for t in whole]
    assert together[2]["alignments"] == " ".join(f"{s}-{t}" for s, t in cut.alignments[0])
    from nmt.jobs.job import JobError
    from nmt.serving.schema import parse_request

    with pytest.raises(JobError, match="segment"):
        parse_request(json.dumps({"text": document, "segment": "words"}).encode())


def test_an_html_request_gets_its_page_back_translated_as_offline(api, overfit_engine, lines):
    """ "format": "html" translates each text as a page (nmt.documents.markup), batched with
    text requests yet as offline and alone."""

    page = f"<h1>{lines[0]}</h1>\n<p>{lines[1]} <b>{lines[2]}</b></p>"
    bodies = [{"text": [page, lines[3]], "format": "html"}, {"text": lines[3]}]
    together = served_with(api, bodies)
    assert together == [served_with(api, [body])[0] for body in bodies]
    offline = translated_html(overfit_engine, [page, lines[3]], api.search)
    assert together[0]["translation"] == [t.text for t in offline]
    assert (
        together[0]["translation"][0].startswith("<h1>") and "<b>" in together[0]["translation"][0]
    )


def unzipped(data: bytes) -> dict[str, bytes] | bytes:
    """A zip file's parts by name; any other file as it is."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return data
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {name: archive.read(name) for name in archive.namelist()}


def test_a_file_comes_back_translated_as_offline(server, api, overfit_engine, overfit_pairs):
    """POST /translate_file: a Markdown, an HTML and a Word file, each translated as its texts
    are offline (in requests of max_lines=16 texts to /translate); bad files refused."""
    from test_docx import texts, word_file

    s, own = overfit_pairs[0], api.search

    def upload(name: str, data: bytes) -> httpx.Response:
        return http_post(server + "/translate_file", files={"file": (name, data)}, timeout=120)

    markdown = "".join(f"- {x}\n" if i % 4 else f"\n# {x}\r\n" for i, x in enumerate(s[:20]))
    reply = upload("notes.md", markdown.encode())
    assert reply.status_code == 200, reply.text
    disposition = "attachment; filename=\"notes.de.md\"; filename*=UTF-8''notes.de.md"
    assert reply.headers["content-disposition"] == disposition
    offline = on_engine(overfit_engine, own)
    expected = document_result(offline, "markdown", data=markdown.encode(), name="notes.md")
    assert reply.content == expected.data and reply.content.decode().count("\r\n") == 5
    page = f"<h1>{s[0]}</h1>\n<p>{s[1]} <b>{s[2]}</b> <a href='x'>{s[3]}</a></p>\n"
    reply = upload("page.html", page.encode())
    assert reply.text == translated_html(overfit_engine, [page], own)[0].text
    word = word_file(s)
    reply = upload("letter.docx", word)
    assert texts(reply.content) == texts(translated_docx(overfit_engine, word, own))
    from test_epub import book, parts
    from test_pptx import deck
    from test_pptx import texts as slide_texts
    from test_subtitles import subrip, web_vtt

    offline = on_engine(overfit_engine, own)
    for name, data in [
        ("film.srt", subrip(s[:6])),
        ("film.vtt", web_vtt(s[:6])),
        ("book.epub", book(s[:6])),
        ("deck.pptx", deck(s[:7])),
        ("app.po", b'msgid "%d dogs."\nmsgstr ""\n\nmsgid "A man sleeps."\nmsgstr ""\n'),
    ]:
        reply = upload(name, data)
        assert reply.status_code == 200, reply.text
        fmt = name.rsplit(".", 1)[1]
        expected = document_result(offline, fmt, data=data, name=name).data
        # LibreTranslate's route: the same file, kept for the address it answers with
        libre = http_post(
            server + "/libretranslate/translate_file",
            files={"file": (name, data)},
            data={"source": "auto", "target": "de"},
            timeout=120,
        )
        assert libre.status_code == 200, libre.text
        url = libre.json()["translatedFileUrl"]
        assert url.startswith(server + "/libretranslate/download_file/")
        assert url.endswith(name.replace(".", ".de.", 1))
        # the same file (a zip's parts: python-pptx stamps each part with the time it wrote it)
        assert unzipped(http_get(url, timeout=30).content) == unzipped(reply.content)
        if fmt == "epub":  # the chapters' bodies (its short titles loop, batched or not)
            got, want = parts(reply.content), parts(expected)
            for chapter in ("EPUB/c0.xhtml", "EPUB/c1.xhtml"):
                assert got[chapter].split(b"<body>")[1] == want[chapter].split(b"<body>")[1]
        elif fmt == "pptx":
            assert slide_texts(reply.content) == slide_texts(expected)
        else:
            assert reply.content == expected, name
    # a catalogue's translated message kept, or asked (`retranslate`) done again, both routes
    done = b'msgid "A man sleeps."\nmsgstr "Schon."\n\nmsgid "A dog."\nmsgstr ""\n'
    asks = [(False, {}), (True, {"retranslate": "true"}), (False, {"retranslate": "false"})]
    for asked, form in asks:
        expected = document_result(offline, "po", data=done, name="a.po", retranslate=asked).data
        assert (b'msgstr "Schon."' in expected) is not asked
        reply = http_post(
            server + "/translate_file", files={"file": ("a.po", done)}, data=form, timeout=120
        )
        assert reply.content == expected, reply.text
        libre = http_post(
            server + "/libretranslate/translate_file",
            files={"file": ("a.po", done)},
            data={"source": "en", "target": "de"} | form,
            timeout=120,
        )
        assert http_get(libre.json()["translatedFileUrl"], timeout=30).content == expected
    reply = http_post(
        server + "/translate_file", files={"file": ("a.po", done)}, data={"retranslate": "yes"}
    )
    assert reply.status_code == 422 and reply.json() == {"detail": "retranslate: true or false"}
    wrong = http_post(
        server + "/libretranslate/translate_file",
        files={"file": ("a.srt", b"")},
        data={"source": "en", "target": "fr"},
        timeout=30,
    )
    assert wrong.status_code == 400 and wrong.json() == {
        "error": "en to fr is not available: en to de"
    }
    gone = http_get(server + "/libretranslate/download_file/nothing/a.srt", timeout=30)
    assert gone.status_code == 404
    for name, data, status, message in [
        ("a.pdf", b"%PDF", 415, "unsupported file type '.pdf'"),
        ("a.docx", b"not a zip", 422, "not a .docx file"),
        ("a.txt", b"\xff\xfe", 422, "not UTF-8"),
        ("a.txt", b"A man.\n" + b"a" * 401, 413, "segment 2 has 401 characters"),
    ]:
        reply = upload(name, data)
        assert reply.status_code == status and message in reply.json()["detail"], reply.text


def test_libretranslate_clients_get_the_servers_translations(server, api, overfit_engine, lines):
    """LibreTranslate's API under /libretranslate: its own Python client (libretranslatepy)
    gets translate's translations; a list, alternatives, source auto, html and LibreTranslate's
    errors over JSON."""
    from libretranslatepy import LibreTranslateAPI

    from nmt.translation.texts import translate_texts

    own = api.search
    client = LibreTranslateAPI(server + "/libretranslate")
    assert (
        client.translate(lines[0], "en", "de")
        == translate_texts(overfit_engine, [lines[0]], own)[0].text
    )
    assert client.languages() == [
        {"code": "en", "name": "English", "targets": ["de"]},
        {"code": "de", "name": "German", "targets": []},
    ]
    assert client.detect(lines[1])[0]["language"] == "en"
    url = server + "/libretranslate/translate"
    body = {"q": lines[:3], "source": "auto", "target": "de", "alternatives": 2}
    reply = http_post(url, json=body, timeout=60).json()
    three = translate_texts(overfit_engine, lines[:3], replace(own, beam_size=5, nbest=3))
    assert reply["translatedText"] == [t.alternatives[0][0] for t in three]
    assert reply["alternatives"] == [[text for text, _ in t.alternatives[1:]] for t in three]
    assert reply["detectedLanguage"]["language"] == "en"
    page = f"<p>{lines[0]} <b>{lines[1]}</b></p>"
    body = {"q": page, "source": "en", "target": "de", "format": "html"}
    reply = http_post(url, json=body, timeout=60).json()
    assert reply["translatedText"] == translated_html(overfit_engine, [page], own)[0].text
    for body, message in [
        ({"q": "A man.", "source": "fr", "target": "de"}, "fr to de is not available"),
        ({"q": "A man.", "source": "en", "target": "es"}, "en to es is not available"),
        ({"source": "en", "target": "de"}, "missing q parameter"),
        ({"q": "A man.", "source": "en", "target": "de", "alternatives": 99}, "alternatives"),
        ({"q": "A.", "source": "en", "target": "de", "alternatives": float("inf")}, "a number"),
        ({"q": ["A man."] * 17, "source": "en", "target": "de"}, "max_lines=16"),
    ]:
        headers = {"Content-Type": "application/json"}  # json.dumps writes inf as Infinity
        reply = http_post(url, content=json.dumps(body), headers=headers, timeout=60)
        assert reply.status_code in (400, 413), reply.text
        assert message in reply.json()["error"] and "\n" not in reply.json()["error"]


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_libretranslate_alternatives_ask_a_search_the_server_takes(strategy):
    """Whatever the server's own search, the n best it asks for is a beam /translate runs."""
    from nmt.decoding.settings import search_problem
    from nmt.serving.libretranslate import translate_body
    from nmt.serving.schema import parse_request, request_search

    default = DecodeConfig(strategy=strategy)
    if strategy == "beam":
        default = replace(default, beam_size=4, len_penalty=1.0)
    body = translate_body(["A man."], "text", 2, default)
    search = request_search(default, parse_request(json.dumps(body).encode()))
    assert search_problem(search) is None
    assert (search.strategy, search.nbest) == ("beam", 3)
    assert search.len_penalty == (1.0 if strategy == "beam" else 0.6)  # decode=beam's


def test_a_text_file_splits_into_lines_at_newlines_alone_as_translate_reads_it():
    """A .txt's lines end at "\n" (a "\r" before it kept with its break), as translate's
    input does, so a file splits alike through every door; a form feed or U+2028 stays
    inside its line, and the file comes back byte for byte around the translations."""
    from nmt.jobs.check import check
    from nmt.jobs.job import Job, Limits
    from nmt.jobs.run import run
    from nmt.translation.translated import Translation

    def upper(texts, numbers, prefixes, alignments, scores):
        return [Translation(text, alternatives=[(text.upper(), 0.0)]) for text in texts]

    data = "one\x0ctwo\nthree\u2028four\r\n\nfive"
    plan = check(Job(data=data.encode(), name="a.txt"), Limits.unbounded())
    assert plan.segments == ["one\x0ctwo", "three\u2028four", "five"]
    assert run(plan, upper).data.decode() == data.upper()


def test_the_ctranslate2_backend_serves_its_offline_translations(ct2_int8, lines):
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.serving.api import TranslationAPI

    api = TranslationAPI(
        compose("serve", [f"ckpt={ct2_int8}", "backend=ctranslate2", "threads=1"]), [], "x"
    )
    api.setup("cpu")
    assert api.search.length_norm == "power"  # the GNMT penalty, as CTranslate2 runs it
    offline = CTranslate2Engine(ct2_int8, "cpu", "default", 1, 1024)
    expected = best_text(offline.tokenizer, offline.translate(lines, api.search))
    bodies = [{"text": line} for line in lines] + [{"text": lines}]
    served = served_with(api, bodies)
    assert [answer["translation"] for answer in served[:-1]] == expected
    assert served[-1]["translation"] == expected
    assert served[0]["backend"] == "ctranslate2"


def test_a_search_is_checked_whole_against_the_servers_default(api) -> None:
    """Fields a request leaves out come from the default; what they add up to is checked by
    the engine, once, and refused with a 422 for the requests that asked for it."""
    from dataclasses import fields as dataclass_fields

    from nmt.serving.api import Refusal
    from nmt.serving.schema import SearchSettings, TranslateRequest, request_search

    assert set(SearchSettings.model_fields) == {f.name for f in dataclass_fields(DecodeConfig)}
    greedy = DecodeConfig()  # a default with no length penalty and one hypothesis
    request = TranslateRequest.model_validate({"text": "A.", "search": {"strategy": "beam"}})
    assert request_search(greedy, request).len_penalty is None
    bad = [
        ({"beam_size": 2, "nbest": 3}, "nbest=3 exceeds beam_size=2"),
        ({"strategy": "sample", "temperature": 0.0, "nbest": 3}, "temperature 0"),
    ]
    bodies = [{"text": "A man.", "search": fields} for fields, _ in bad] + [{"text": "A man."}]
    answers = served_with(api, bodies)
    for answer, (_, message) in zip(answers, bad, strict=False):
        assert isinstance(answer, Refusal) and message in answer
        assert route_answer(answer) == (422, str(answer))
    assert answers[-1]["translation"]


def test_extreme_but_valid_settings_translate_on_both_backends(api, ct2_f32, lines):
    """Settings at the edges a backend could trip on: a top-k above the vocabulary, min_len
    past the length limit, a temperature so small that only the best token is left."""
    from nmt.serving.api import Failure, TranslationAPI

    out = ct2_f32.path
    ct2 = TranslationAPI(
        compose("serve", [f"ckpt={out}", "backend=ctranslate2", "threads=1"]), [], "x"
    )
    ct2.setup("cpu")
    greedy = served_with(api, [{"text": lines[0], "search": {"strategy": "greedy"}}])[0]
    bodies = [
        {"text": lines[0], "search": {"strategy": "sample", "top_k": 100_000, "seed": 1}},
        {"text": lines[0], "search": {"min_len": 1000}},
        {"text": lines[0], "search": {"strategy": "sample", "temperature": 1e-30, "seed": 1}},
    ]
    for server_api in (api, ct2):
        answers = served_with(server_api, bodies)
        assert not any(isinstance(a, Failure) for a in answers), answers
        assert answers[1]["translation"]  # the length limit ends it
    assert served_with(api, bodies[2:])[0]["translation"] == greedy["translation"]


def test_concurrent_requests_get_their_own_translations(server, lines, offline):
    def one(i: int) -> str:
        return post(server, {"text": lines[i % len(lines)]}).json()["translation"]

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(48)))
    assert got == [offline[i % len(lines)] for i in range(48)]


def test_a_failure_inside_a_batch_fails_only_its_request(api, lines, monkeypatch):
    from nmt.serving.api import Failure

    translate = api.engine.translate

    def failing(batch_lines, *args, **kwargs):
        if any("kaboom" in line for line in batch_lines):
            raise RuntimeError("a fault in this batch\nsecond line")
        return translate(batch_lines, *args, **kwargs)

    monkeypatch.setattr(api.engine, "translate", failing)
    bodies = [{"text": lines[0]}, {"text": ["kaboom", lines[1]]}, {"text": [lines[2], lines[3]]}]
    answers = served_with(api, bodies)
    assert isinstance(answers[1], Failure)
    assert answers[0] == served_with(api, [bodies[0]])[0]
    assert answers[2] == served_with(api, [bodies[2]])[0]
    assert route_answer(answers[1]) == (
        500,
        "translation failed: RuntimeError a fault in this batch",
    )


def test_a_poisoned_request_among_eight_is_found_in_halves(api, lines, monkeypatch):
    """The call of eight works fails on one: they are decoded again in halves (4 + 4, then
    2 + 2, then 1 + 1 around it): 7 calls, not the 9 of one at a time, and each of the
    others gets its own translation."""
    from nmt.serving.api import Failure

    translate, calls = api.engine.translate, []

    def failing(batch_lines, *args, **kwargs):
        calls.append(len(batch_lines))
        if any("kaboom" in line for line in batch_lines):
            raise RuntimeError("a fault in this batch")
        return translate(batch_lines, *args, **kwargs)

    bodies = [{"text": lines[i]} for i in range(8)]
    alone = [served_with(api, [body])[0] for body in bodies]
    bodies[5] = {"text": "kaboom"}
    monkeypatch.setattr(api.engine, "translate", failing)
    answers = served_with(api, bodies)
    assert isinstance(answers[5], Failure)
    assert [a for i, a in enumerate(answers) if i != 5] == alone[:5] + alone[6:]
    assert calls == [8, 4, 4, 2, 1, 1, 2], calls  # all, halves, the poisoned half's halves...


def route_answer(failure) -> tuple[int, str]:
    """What a route answers for a worker's Failure (nmt.serving.dispatch): its status and
    its one line, {"detail": line}."""
    from nmt.errors import JobError
    from nmt.serving.dispatch import answered_texts

    with pytest.raises(JobError) as refused:
        answered_texts(failure)
    return refused.value.status, str(refused.value)


# --- bad input: one line, 413 or 422, and nothing broken ---

BAD = [
    (b'{"text": ', 422, "Invalid JSON"),
    (b"\xff\xfe", 422, "Invalid JSON"),
    ({"txt": "A man."}, 422, "text: Field required"),
    ({"text": 5}, 422, "text"),
    ({"text": ["A man.", 5]}, 422, "text"),
    ([{"text": "A man."}], 422, "Input should be an object"),
    ({"text": "A man.", "beam": 4}, 422, "beam: Extra inputs are not permitted"),
    ({"text": "A man.", "search": {"beam": 4}}, 422, "unknown search setting 'beam'"),
    ({"text": "A man.", "search": {"beam_size": "4"}}, 422, "search.beam_size"),
    ({"text": "A man.", "search": {"beam_size": 0}}, 422, "search.beam_size"),
    ({"text": "A man.", "search": {"beam_size": 100000}}, 422, "less than or equal to 64"),
    ({"text": "A man.", "search": {"strategy": "best"}}, 422, "search.strategy"),
    ({"text": "A man.", "search": {"temperature": 0.5}}, 422, "temperature does nothing"),
    ({"text": "A man.", "search": {"beam_size": 2, "nbest": 3}}, 422, "exceeds beam_size=2"),
    ({"text": "A man.", "search": {"max_len_a": 0, "max_len_b": 0}}, 422, "both 0"),
    ({"text": "A man.", "search": {"strategy": "sample", "seed": 2**32}}, 422, "search.seed"),
    (
        {"text": "A man.", "search": {"strategy": "sample", "temperature": 0, "nbest": 2}},
        422,
        "temperature 0",
    ),
    ({"text": "A man.", "search": {"top_p": 0}}, 422, "search.top_p"),
    ({"text": "A man.", "search": {"term_bonus": -1}}, 422, "search.term_bonus"),
    ({"text": ["A man.", "B."], "prefix": "Ein"}, 422, "prefix must have the shape of text"),
    ({"text": ["A man."] * 17}, 413, "max_lines=16"),
    ({"text": ["A man.", "a" * 401]}, 413, "line 2 has 401 characters"),
    ({"text": "A man.", "prefix": "E" * 401}, 413, "max_line_chars=400"),
    ({"text": "a " * 15000}, 413, "max_body_bytes=20000"),
    ({"text": "<p>A man.</p>", "format": "xml"}, 422, "format"),
    ({"text": "<p>A man.</p>", "format": "html", "scores": True}, 422, "drop scores"),
    ({"text": "<p>A.</p>", "format": "html", "search": {"nbest": 2}}, 422, "drop nbest"),
    ({"text": "A.", "protect": ["links"]}, 422, "protect.0"),
    ({"text": "A.", "protect": "urls"}, 422, "protect"),
    ({"text": "A.", "protect_patterns": ["(x"]}, 422, "is no pattern"),
    ({"text": "A.", "protect_patterns": [""]}, 422, "matches the empty text"),
    ({"text": "A.", "protect_patterns": ["(a)\\1"]}, 422, "no pattern RE2 runs"),
    ({"text": "A.", "glossary": {"bike": " "}}, 422, "an empty target term"),
    ({"text": "A.", "glossary": ["bike", "Rad"]}, 422, "glossary"),
    (
        {"text": "A.", "glossary": {"a": "b"}, "glossary_exact": True, "search": {"beam_size": 1}},
        422,
        "exact glossary terms (glossary_exact) need a beam search of 2 beams or more",
    ),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD)
def test_bad_requests_get_a_one_line_4xx(server, body, status, message):
    reply = post(server, body)
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    assert message in detail


def test_every_number_a_search_field_takes_is_bounded_for_a_request():
    """A search field the schema leaves unbounded would reach DecodeConfig's own check only
    after validation (a 500), or let one request take the machine: every int and float field
    has its BOUNDS."""
    from dataclasses import fields
    from typing import get_type_hints

    from nmt.serving.schema import BOUNDS

    hints = get_type_hints(DecodeConfig)
    numbers = {f.name for f in fields(DecodeConfig) if hints[f.name] in (int, float, float | None)}
    assert "term_bonus" in numbers and numbers <= set(BOUNDS), numbers - set(BOUNDS)


def test_a_disconnected_client_and_a_timed_out_request_affect_only_themselves(
    model_pt, lines, offline
):
    """A request not translated within `timeout` gets a 504: one still queued, and one being
    decoded (its decoding stops between two batches); a client that leaves mid-request is
    dropped; the others are answered, and the server stays well."""
    with serving(model_pt, "timeout=1", "batch_requests=1", "max_lines=64") as url:
        slow = {"text": lines * 4, "search": {"min_len": 150, "max_len_b": 150}}
        with ThreadPoolExecutor(4) as pool:
            hog = pool.submit(post, url, slow)
            time.sleep(0.3)  # the hog is being decoded: these wait in the queue
            queued = [pool.submit(post, url, {"text": line}) for line in lines[:3]]
            stopped = hog.result()
            assert stopped.status_code == 504 and "timeout=1" in stopped.json()["detail"]
            assert {q.result().status_code for q in queued} <= {200, 504}
        body = json.dumps({"text": lines[:3]}).encode()
        for cut in (False, True):  # leave after the whole request, and halfway through it
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:
                head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
                s.sendall(head.encode() + (body[: len(body) // 2] if cut else body))
        assert http_get(url + "/health", timeout=10).status_code == 200
        assert post(url, {"text": lines}).json()["translation"] == offline


@pytest.mark.parametrize("backend", ["torch", "ctranslate2"])
def test_a_client_that_leaves_stops_its_decoding(backend, request, model_pt, lines, tmp_path):
    """On both servers the decoding of a request whose client has gone stops at its next
    batch, long before its timeout (the worker logs why it stopped); the server answers on."""
    ckpt = model_pt if backend == "torch" else request.getfixturevalue("ct2_f32").path
    log = tmp_path / "serve.log"
    settings = ["timeout=60", "batch_requests=1", "max_lines=256", "max_tokens=256"]
    with serving(ckpt, f"backend={backend}", "workers=1", *settings, log_path=log) as url:
        slow = {"text": lines * 16, "search": {"min_len": 150, "max_len_b": 150}}
        body = json.dumps(slow).encode()
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:
            head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            s.sendall(head.encode() + body)
            time.sleep(1)  # its decoding is under way
        deadline = time.monotonic() + 30
        while "their clients left" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.1)
        assert post(url, {"text": lines[:2]}).status_code == 200


def bodies() -> st.SearchStrategy:
    """Request bodies, mostly wrong: any JSON, objects with our keys and stray ones, search
    settings of every type (valid values kept small so decoding stays quick), raw bytes."""
    scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    anything = st.recursive(
        scalar,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=8,
    )
    small = (
        st.integers(-2, 6)
        | st.floats(-1, 3)
        | st.sampled_from(["greedy", "beam", "sample", "gnmt", "power", "x"])
    )
    search = st.dictionaries(
        st.sampled_from(
            [
                "strategy",
                "beam_size",
                "nbest",
                "len_penalty",
                "length_norm",
                "temperature",
                "top_k",
                "top_p",
                "seed",
                "min_len",
                "max_len_b",
                "beem",
            ]
        ),
        small | anything,
        max_size=4,
    )
    text = st.text(max_size=60) | st.lists(st.text(max_size=60), max_size=20) | anything
    request = st.fixed_dictionaries(
        {"text": text}, optional={"search": search | anything, "prefix": text, "extra": anything}
    )
    as_json = (request | anything).map(lambda body: json.dumps(body).encode())
    return as_json | st.binary(max_size=200)


def test_a_fuzzed_server_still_answers_health_and_translates(server, lines, offline):
    statuses: dict[int, int] = {}
    client = httpx.Client(timeout=60)

    @settings(
        max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(bodies())
    def answer_in_one_line(body: bytes) -> None:
        reply = client.post(server + "/translate", content=body)
        statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
        assert reply.status_code in (200, 413, 422), reply.text
        answer = reply.json()
        if reply.status_code == 200:
            text = json.loads(body)["text"]
            shape = len(text) if isinstance(text, list) else None
            got = answer["translation"]
            assert (len(got) if isinstance(got, list) else None) == shape
        else:
            assert isinstance(answer["detail"], str) and "\n" not in answer["detail"]

    answer_in_one_line()
    client.close()
    assert sum(statuses.values()) >= 200 and statuses.get(200) and statuses.get(422)
    assert http_get(server + "/health", timeout=10).status_code == 200
    assert post(server, {"text": lines}).json()["translation"] == offline


# --- the page, in a real browser ---


def test_the_page_translates_as_you_type_shows_alignments_and_takes_files(
    server, api, overfit_engine, overfit_pairs, tmp_path
):
    """The page in Debian's chromium: typing gives translate's segment=sentences output (its
    limits shown first); hovering a word marks its aligned source words; words are shaded by
    probability; a click lists the line's 5 best; Ctrl+Enter and the copy button work; a
    line the output checks flag is underlined with its warnings; an uploaded page comes back
    as the offline one. Screenshots in tmp_path."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("NMT_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} not found (CI installs Debian's chromium)")
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    from nmt.terms.glossary import Glossary
    from nmt.terms.spans import DEFAULT_RULES
    from nmt.translation.texts import translate_texts

    s, own = overfit_pairs[0], api.search
    typed = f"{s[0]} {s[1]}\n{s[2]}"
    expected = translate_texts(overfit_engine, typed.split("\n"), own, alignments=True, scores=True)
    best5 = translate_texts(overfit_engine, [s[2]], replace(own, beam_size=5, nbest=5))[0]
    html_file = tmp_path / "page.html"
    html_file.write_text(f"<h1>{s[3]}</h1>\n<p>{s[4]} <b>{s[5]}</b></p>\n")
    wait = "([id, text]) => document.getElementById(id).textContent === text"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
            page = context.new_page()
            sent = []  # the bodies the page posts to /translate

            def record(request):
                if request.method == "POST" and request.url.endswith("/translate"):
                    sent.append(request.post_data_json)

            page.on("request", record)
            fetched = []  # every URL the page loads: none outside the server
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(server + "/", timeout=30000)
            page.wait_for_function(
                "document.getElementById('meter').textContent.includes('/ 16 lines')"
            )
            page.type("#source", typed, delay=5)  # as you type: debounced, newer cancels older
            text = "\n".join(t.text for t in expected)
            page.wait_for_function(wait, arg=["translation", text], timeout=30000)
            status = page.text_content("#status")
            assert "beam 5, GNMT length penalty 1.4" in status and "torch" in status
            # hovering a word marks the source words it is aligned to
            links = expected[0].alignments[0]
            target = next(t for _, t in links)
            page.hover(f"#translation .line[data-line='0'] .w >> nth={target}")
            marked = page.eval_on_selector_all("#backdrop mark", "ms => ms.map(m => m.dataset.w)")
            assert sorted(marked) == sorted(f"0:{src}" for src, t in links if t == target)
            page.screenshot(path=tmp_path / "hover.png", full_page=True)
            shades = page.eval_on_selector_all(
                "#translation .line[data-line='0'] .w", "ws => ws.map(w => w.className)"
            )
            for shade, p_word in zip(shades, expected[0].scores.word_probs, strict=True):
                want = "low2" if p_word < 0.2 else "low1" if p_word < 0.5 else "ok"
                assert (
                    shade.removesuffix(" hl") == f"w {want}"
                    or min(abs(p_word - 0.2), abs(p_word - 0.5)) < 1e-3
                )
            # keyboard and screen readers: every control labelled, the outputs announced, a
            # line reached by Tab and opened by Enter like a button
            unlabelled = page.eval_on_selector_all(
                "textarea, input, select, button",
                "es => es.filter(e => !(e.labels && e.labels.length) && !e.getAttribute("
                "'aria-label') && !e.textContent.trim()).map(e => e.id)",
            )
            assert unlabelled == []
            assert page.get_attribute("#translation", "aria-live") == "polite"
            assert page.get_attribute("#status", "role") == "status"
            line1 = "#translation .line[data-line='1']"
            assert page.get_attribute(line1, "role") == "button"
            page.focus("#copy")
            for _ in range(20):  # Shift+Tab back from Copy to the last line
                if page.evaluate("document.activeElement.dataset.line") == "1":
                    break
                page.keyboard.press("Shift+Tab")
            assert page.evaluate("document.activeElement.dataset.line") == "1"
            page.keyboard.press("Enter")
            page.wait_for_selector("#alternatives li")
            page.evaluate("document.getElementById('alternatives').hidden = true")
            page.evaluate("document.getElementById('alternatives').innerHTML = ''")
            # a click on a line lists its 5 best
            page.click("#translation .line[data-line='1']")
            page.wait_for_selector("#alternatives li")
            found = page.eval_on_selector_all(
                "#alternatives li", "ls => ls.map(l => l.firstChild.textContent.trim())"
            )
            assert found == [text for text, _ in best5.alternatives]
            page.screenshot(path=tmp_path / "alternatives.png", full_page=True)
            # Ctrl+Enter, with translation as you type off; the copy button
            page.uncheck("#live")
            page.fill("#source", s[6])
            page.press("#source", "Control+Enter")
            alone = translate_texts(overfit_engine, [s[6]], own)[0].text
            page.wait_for_function(wait, arg=["translation", alone], timeout=30000)
            page.click("#copy")
            assert page.evaluate("navigator.clipboard.readText()") == alone
            # a line whose URL the protection put in by the alignment (the overfit model never
            # saw a placeholder): underlined, its warnings on hover
            lost = f"{s[7]} See https://example.org/x1"
            warned = translate_texts(overfit_engine, [lost], own, protect=DEFAULT_RULES)[0]
            assert "https://example.org/x1" in warned.text
            page.fill("#source", lost)
            page.press("#source", "Control+Enter")
            page.wait_for_function(wait, arg=["translation", warned.text], timeout=30000)
            line = "#translation .line[data-line='0']"
            assert "flagged" in page.get_attribute(line, "class").split()
            assert page.get_attribute(line, "aria-description") == "; ".join(warned.warnings)
            assert any(w.startswith("span 'https://example.org/x1' ") for w in warned.warnings)
            # a glossary typed in its box: the server's translation with those terms, and
            # which it used
            page.click("details summary")
            page.fill("#glossary", "bushes = Sträucher")
            page.fill("#source", s[0])
            page.press("#source", "Control+Enter")
            terms = Glossary.of_request({"bushes": "Sträucher"})
            with_terms = translate_texts(
                overfit_engine, [s[0]], own, protect=DEFAULT_RULES, glossary=terms
            )[0]
            assert "Sträucher" in with_terms.text
            page.wait_for_function(wait, arg=["translation", with_terms.text], timeout=30000)
            assert page.text_content("#terms") == "terms used: 1 of 1 (bushes → Sträucher)"
            # the exact-form box: the request asks for hard constraints, the answer is theirs
            exact = translate_texts(
                overfit_engine,
                [s[0]],
                own,
                protect=DEFAULT_RULES,
                glossary=Glossary.of_request({"bushes": "Sträucher"}, exact=True),
            )[0]
            with page.expect_request(
                lambda r: (
                    r.url.endswith("/translate")
                    and (r.post_data_json or {}).get("glossary_exact") is True
                )
            ):
                page.check("#exact")
            page.wait_for_function(wait, arg=["translation", exact.text], timeout=30000)
            page.uncheck("#exact")
            page.fill("#glossary", "bushes Sträucher")
            page.press("#source", "Control+Enter")
            page.wait_for_function(
                "document.getElementById('status').textContent.includes('glossary line 1')"
            )
            page.fill("#glossary", "")
            # a file: uploaded, translated by the server, offered for download
            page.set_input_files("#file", str(html_file))
            page.wait_for_selector("#download:not([hidden])", timeout=30000)
            assert page.get_attribute("#download", "download") == "page.de.html"
            content = page.evaluate(
                "async () => await (await fetch(document.getElementById('download').href)).text()"
            )
            assert content == translated_html(overfit_engine, [html_file.read_text()], own)[0].text
            page.screenshot(path=tmp_path / "file.png", full_page=True)
            # the "translate again" box: a catalogue's translated message is done again
            catalogue = tmp_path / "app.po"
            catalogue.write_bytes(b'msgid "A man sleeps."\nmsgstr "Schon."\n')
            assert not page.is_checked("#retranslate")  # the server's default (/info)
            page.check("#retranslate")
            page.set_input_files("#file", str(catalogue))
            page.wait_for_selector("#download[download='app.de.po']", timeout=30000)
            content = page.evaluate(
                "async () => await (await fetch(document.getElementById('download').href)).text()"
            )
            offline = on_engine(overfit_engine, own)
            again = document_result(offline, "po", data=catalogue.read_bytes(), retranslate=True)
            assert content.encode() == again.data and "Schon." not in content
            # it asks for text whatever the server's format (format=html answers documents)
            assert len(sent) >= 3 and all(body["format"] == "text" for body in sent), sent
            # a failure that is not JSON still ends in one line, not a page stuck translating
            page.route(
                "**/translate_file",
                lambda route: route.fulfill(status=500, body="Internal Server Error"),
            )
            other = tmp_path / "other.html"
            other.write_text("<p>A dog.</p>")
            page.set_input_files("#file", str(other))
            failed = "error 500: Internal Server Error"
            page.wait_for_function(wait, arg=["status", failed], timeout=10000)
        finally:
            browser.close()
    outside = [u for u in fetched if not u.startswith((server, "data:", "blob:"))]
    assert fetched and outside == []  # no font, script or style from elsewhere: works offline
    assert all((tmp_path / n).stat().st_size > 1000 for n in ("hover.png", "file.png"))


# --- the command line ---


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["host=example.com"], "host must be one of"),
        (["port=80"], "port must be in 1024..65535"),
        (["batch_requests=0"], "batch_requests must be at least 1"),
        (["format=docx"], "format must be auto or one of text, html"),
    ],
)
def test_serve_refuses_bad_settings_in_one_line(model_pt, tmp_path, args, message):
    result = run_module("nmt.serve", [f"ckpt={model_pt}", *args], tmp_path, timeout=60)
    err = result.stderr.decode().strip().splitlines()
    assert (
        result.returncode == 2 and err[-1].startswith("nmt.serve: error: ") and message in err[-1]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["header_seconds=0"], "header_seconds must be above 0"),
        (["max_client_connections=0"], "max_client_connections must be at least 1"),
        (["max_bodies_bytes=1000000"], "max_bodies_bytes=1000000 must hold one file's body"),
    ],
)
def test_connection_bounds_that_cannot_work_are_refused_before_loading(model_pt, args, message):
    """check_serve, as `nmt.serve` runs it first (the command's one line: the test above)."""
    from nmt.errors import UsageError
    from nmt.serving.server import check_serve

    with pytest.raises(UsageError, match=message):
        check_serve(compose("serve", [f"ckpt={model_pt}", *args]))


def test_model_workers_fork_on_the_cpu_and_spawn_on_a_gpu(model_pt):
    """worker_start=auto forks the torch server's workers on the CPU and spawns them on a GPU
    (CUDA does not survive a fork), where fork is refused; the forked and spawned workers
    themselves: test_serve_faults."""
    from nmt.errors import UsageError
    from nmt.serving.server import with_workers

    def start(*args: str) -> str:
        return with_workers(compose("serve", [f"ckpt={model_pt}", *args])).worker_start

    assert start("device=cpu") == start("device=cpu", "worker_start=fork") == "fork"
    assert start("device=cuda") == start("worker_start=spawn") == "spawn"
    with pytest.raises(UsageError, match="worker_start=fork cannot serve on a GPU"):
        start("device=cuda", "worker_start=fork")
    with pytest.raises(UsageError, match="worker_start must be one of auto, fork, spawn"):
        start("worker_start=thread")
