"""nmt.serve backend=ctranslate2: the in-process server (nmt/serving/inprocess.py) over HTTP.
Served = offline (alone and concurrent), the same one-line 4xx as the torch server, /health,
/info, the page, the OpenAPI schema. The batching rule itself: test_serve_batching.py."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, http_get, http_post, translated_html, zygote_serve
from test_serve import BAD, LIMITS, post

from nmt.inference.output_text import best_text
from nmt.serving.launch import launched

pytestmark = pytest.mark.xdist_group("serve")


@pytest.fixture(scope="module")
def server(ct2_int8: Path) -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = [f"ckpt={ct2_int8}", "backend=ctranslate2", "workers=2", "threads=1", *LIMITS]
    with launched(args, env, start=zygote_serve) as url:
        yield url


@pytest.fixture(scope="module")
def lines(overfit_pairs) -> list[str]:
    return [*overfit_pairs[0][:5], "", *overfit_pairs[0][5:12]]


@pytest.fixture(scope="module")
def offline(ct2_int8: Path, lines: list[str]) -> list[str]:
    """The exported model's own search, offline, on one thread."""
    from nmt.config import DecodeConfig
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.search_choice import choose_search

    engine = CTranslate2Engine(ct2_int8, "cpu", "default", 1, 1024)
    search, _ = choose_search(engine.card, DecodeConfig(), [])
    return best_text(engine.tokenizer, engine.translate(lines, search))


def test_served_alone_together_and_concurrently_is_offline(server, lines, offline):
    answer = post(server, {"text": lines}).json()
    assert answer["translation"] == offline and answer["backend"] == "ctranslate2"
    assert answer["translation"][5] == ""

    def one(i: int) -> str:
        return post(server, {"text": lines[i % len(lines)]}).json()["translation"]

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(48)))
    assert got == [offline[i % len(lines)] for i in range(48)]


def test_scores_on_request_over_http(server, lines, offline):
    answer = post(server, {"text": lines[:2], "scores": True}).json()
    assert answer["translation"] == offline[:2]
    for text, scores in zip(answer["translation"], answer["scores"], strict=True):
        assert [w["word"] for w in scores["words"]] == text.split()
        assert all(0.0 < w["probability"] <= 1.0 for w in scores["words"])
    assert post(server, {"text": lines[0], "scores": "yes"}).status_code == 422


def test_alignments_on_request_are_translates_own(server, ct2_int8, lines, offline):
    from nmt.config import DecodeConfig
    from nmt.inference.alignment import pharaoh
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.search_choice import choose_search

    engine = CTranslate2Engine(ct2_int8, "cpu", "default", 1, 1024)
    search, _ = choose_search(engine.card, DecodeConfig(), [])
    expected = [
        pharaoh(h[0].alignment) if h else ""
        for h in engine.translate(lines, search, alignments=True)
    ]
    answer = post(server, {"text": lines, "alignments": True}).json()
    assert answer["translation"] == offline and answer["alignments"] == expected
    one = post(server, {"text": lines[0], "alignments": True}).json()
    assert one["alignments"] == expected[0]
    assert post(server, {"text": lines[0]}).json().get("alignments") is None


def test_html_and_files_are_served_as_offline(server, ct2_int8, overfit_pairs):
    """ "format": "html" and POST /translate_file on the in-process server, as the exported
    model translates them offline."""
    from nmt.config import DecodeConfig
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.search_choice import choose_search

    engine = CTranslate2Engine(ct2_int8, "cpu", "default", 1, 1024)
    search, _ = choose_search(engine.card, DecodeConfig(), [])
    s = overfit_pairs[0]
    page = f"<p>{s[0]} <em>{s[1]}</em></p>\n<ul><li>{s[2]}</li></ul>"
    expected = translated_html(engine, [page], search)[0].text
    assert post(server, {"text": page, "format": "html"}).json()["translation"] == expected
    files = {"file": ("page.htm", page.encode())}
    reply = http_post(server + "/translate_file", files=files, timeout=60)
    assert reply.status_code == 200 and reply.text == expected


def test_numbers_as_written_are_served_as_offline(server, ct2_int8):
    """Numbers as written, kept and localized, as the exported model carries them offline."""
    from test_written_numbers import SENTENCES

    from nmt.config import DecodeConfig
    from nmt.inference.ct2_engine import CTranslate2Engine
    from nmt.inference.search_choice import choose_search
    from nmt.terms.spans import DEFAULT_RULES, Rules
    from nmt.translation.texts import translate_texts

    engine = CTranslate2Engine(ct2_int8, "cpu", "default", 1, 1024)
    search, _ = choose_search(engine.card, DecodeConfig(), [])
    for mode in ("keep", "localize"):
        rules = Rules(DEFAULT_RULES.kinds, (), mode)
        expected = [t.text for t in translate_texts(engine, SENTENCES, search, protect=rules)]
        reply = post(server, {"text": SENTENCES, "numbers": mode})
        assert reply.status_code == 200 and reply.json()["translation"] == expected, reply.text
    assert "$4,99" in expected[1] and "10:45" in expected[0]


@pytest.mark.parametrize(("body", "status", "message"), BAD[::3] + BAD[-4:])
def test_bad_requests_get_the_same_one_line_4xx(server, body, status, message):
    reply = post(server, body)
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and message in detail


def test_health_info_page_and_schema(server, ct2_int8):
    assert http_get(server + "/health", timeout=10).text == "ok"
    info = http_get(server + "/info", timeout=10).json()["model"]
    assert info["backend"] == "ctranslate2" and str(ct2_int8) not in json.dumps(info)
    assert info["batching"]["workers"] == 2
    limits = info["limits"]
    assert (limits["max_body_bytes"], limits["max_lines"], limits["max_line_chars"]) == (
        20000,
        16,
        400,
    )
    page = http_get(server + "/", timeout=10)
    assert page.status_code == 200 and "en-de" in page.text
    schema = http_get(server + "/openapi.json", timeout=10).json()
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("/TranslateRequest")
