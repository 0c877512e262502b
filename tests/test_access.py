"""Keys, limits, CORS and metrics (nmt/serving/access.py, metrics.py), on a server started with
all of them: a missing
key gets 401, a wrong one 403 in the same time whatever it shares with a right one; a flood
over the limit gets 429 with Retry-After while another key is served; the routes' own calls
to /translate are neither refused nor counted; a browser's preflight from an allowed origin
passes; the metrics move as requests are made, behind their token."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import http_get, http_post
from test_serve import serving

from nmt.serving.libretranslate import PREFIX

pytestmark = pytest.mark.xdist_group("serve")

KEYS = [
    "k-alpha-0123456789abcdef0123456789abcdef",
    "k-beta-fedcba9876543210fedcba9876543210",
    "k-delta-for-the-metrics-test",
    "k-epsilon-for-the-page",
    "k-eta-for-the-log-test",
]


@pytest.fixture(scope="module")
def server_log(tmp_path_factory) -> Path:
    """The server's whole log: uvicorn's access log on (log_level=info)."""
    return tmp_path_factory.mktemp("log") / "serve.log"


@pytest.fixture(scope="module")
def server(model_pt: Path, server_log: Path, tmp_path_factory) -> Iterator[str]:
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("# the server's keys\n" + "\n".join(KEYS) + "\n")
    args = [
        f"api_keys_file={keys}",
        "limit_requests=5/day",
        "limit_chars=100000/day",
        "limit_refused=1000/minute",  # the tests below send a hundred refused requests
        "cors_origins=[http://example.org]",
        "metrics=true",
        "metrics_token=m-secret",
        "log_level=info",
    ]
    with serving(model_pt, *args, log_path=server_log) as url:
        yield url


def post(url: str, key: str | None, body: dict, path: str = "/translate") -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return http_post(url + path, json=body, headers=headers, timeout=60)


def test_keys_are_asked_for_checked_and_taken_from_either_place(server, overfit_pairs):
    line = overfit_pairs[0][0]
    missing = post(server, None, {"text": line})
    assert missing.status_code == 401 and "API key is required" in missing.json()["detail"]
    wrong = post(server, "k-gamma", {"text": line})
    assert wrong.status_code == 403 and wrong.json() == {"detail": "invalid API key"}
    assert post(server, KEYS[1], {"text": line}).status_code == 200
    lt = server + "/libretranslate/translate"
    body = {"q": line, "source": "en", "target": "de"}
    assert http_post(lt, json=body | {"api_key": "nope"}, timeout=60).json() == {
        "error": "invalid API key"
    }
    form = http_post(lt, data=body | {"api_key": KEYS[1]}, timeout=60)  # as libretranslatepy
    assert form.status_code == 200 and form.json()["translatedText"]
    assert http_get(server + "/health", timeout=10).status_code == 200  # not guarded


def test_a_wrong_key_in_the_header_is_refused_before_the_body_is_read(server):
    """A client that names a wrong key and then sends its body slowly is answered 403 at
    once: no body is read, or held, for a request whose key is known to be wrong."""
    import socket

    host, port = server.removeprefix("http://").split(":")
    start = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=20) as client:
        head = f"POST /translate HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer wrong\r\n"
        client.sendall((head + "Content-Length: 100000\r\n\r\n").encode() + b'{"text": "')
        answer = client.recv(4096)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert time.perf_counter() - start < 5


def test_a_wrong_key_takes_as_long_whatever_it_shares_with_a_right_one(server):
    """Near (all but its last character right) and far wrong keys, asked in pairs over one
    connection, each pair in turn near first and far first, so that the load of the machine
    (the other test workers) falls on both alike: the key's part of the pairs' differences
    (the mean of the two orders' medians, which cancels what being asked second adds) is
    under a millisecond, or 10% of the far key's median (what a timing attack could not tell
    apart)."""
    near, far = KEYS[0][:-1] + "0", "x" * len(KEYS[0])
    times: dict[str, list[float]] = {near: [], far: []}
    with httpx.Client(base_url=server, timeout=60) as client:  # one connection: less to time
        for i in range(60):
            for key in (near, far) if i % 2 else (far, near):
                headers = {"Authorization": f"Bearer {key}"}
                start = time.perf_counter()
                answer = client.post("/translate", json={"text": "A."}, headers=headers)
                assert answer.status_code == 403
                times[key].append(time.perf_counter() - start)
    differences = [n - f for n, f in zip(times[near], times[far], strict=True)]
    orders = [differences[6::2], differences[7::2]]  # far first, near first; after the first
    gap = abs(statistics.mean(statistics.median(order) for order in orders))
    medians = {key: statistics.median(values[6:]) for key, values in times.items()}
    assert gap < max(0.001, 0.1 * medians[far]), f"{gap * 1000:.2f} ms, medians {medians}"


def test_a_flood_over_the_limit_gets_429_while_another_key_is_served(server, overfit_pairs):
    line = overfit_pairs[0][1]
    answers = [post(server, KEYS[0], {"text": line}) for _ in range(7)]
    assert [a.status_code for a in answers[:5]] == [200] * 5
    over = answers[5]
    assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
    assert "over limit_requests=5 per 1 day for this key" in over.json()["detail"]
    assert post(server, KEYS[1], {"text": line}).status_code == 200


def test_a_routes_own_calls_are_not_refused_nor_counted(server, overfit_pairs):
    """A 20-line file goes to /translate in two calls of 16: one request, counted once."""
    text = "".join(line + "\n" for line in overfit_pairs[0][:20])
    files = {"file": ("notes.txt", text.encode())}
    headers = {"Authorization": f"Bearer {KEYS[1]}"}
    for _ in range(2):  # with the tests above, key 1 has used 3 of its 5 requests
        reply = http_post(server + "/translate_file", files=files, headers=headers, timeout=120)
        assert reply.status_code == 200, reply.text
        assert len(reply.text.splitlines()) == 20


def test_a_preflight_from_an_allowed_origin_passes(server):
    asked = {
        "Origin": "http://example.org",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    allowed = httpx.options(server + "/translate", headers=asked, timeout=10)
    assert allowed.headers["access-control-allow-origin"] == "http://example.org"
    other = httpx.options(server + "/translate", headers=asked | {"Origin": "http://evil.test"})
    assert "access-control-allow-origin" not in other.headers


def test_keys_are_never_logged(server, server_log, overfit_pairs):
    """Right and wrong keys in each place a request may carry one, with every request logged
    (log_level=info): no key's text reaches the log. (A key in the URL's query string is not
    read, and uvicorn would log it: the guide says so.)"""
    line = overfit_pairs[0][3]
    wrong = "k-zeta-not-a-key-0123456789"
    lt = server + "/libretranslate/translate"
    body = {"q": line, "source": "en", "target": "de"}
    for key in (KEYS[4], wrong):
        post(server, key, {"text": line})
        http_post(server + "/translate", json={"text": line, "api_key": key}, timeout=60)
        http_post(lt, json=body | {"api_key": key}, timeout=60)
        http_post(lt, data=body | {"api_key": key}, timeout=60)
    logged = server_log.read_text(errors="replace")
    assert '"POST /libretranslate/translate HTTP/1.1" 200' in logged  # requests are logged
    assert '"POST /translate HTTP/1.1" 403' in logged
    assert all(key not in logged for key in [*KEYS, wrong]), logged[-2000:]


def metric(url: str, name: str) -> float:
    page = http_get(url + "/metrics", headers={"Authorization": "Bearer m-secret"}, timeout=10)
    assert page.status_code == 200
    found = [line for line in page.text.splitlines() if line.startswith(name + " ")]
    return float(found[0].split()[-1]) if found else 0.0


def test_the_metrics_move_as_requests_are_made(server, overfit_pairs):
    assert http_get(server + "/metrics", timeout=10).status_code == 401
    ok = 'nmt_requests_total{route="/translate",status="200"}'
    refused = 'nmt_requests_total{route="/translate",status="403"}'
    names = [ok, refused, "nmt_characters_total", 'nmt_request_seconds_count{route="/translate"}']
    names += ["nmt_batch_requests_count", "nmt_batch_lines_sum"]  # from the model workers
    before = {name: metric(server, name) for name in names}
    texts = overfit_pairs[0][2:4]
    assert post(server, KEYS[2], {"text": texts}).status_code == 200
    assert post(server, "wrong", {"text": texts}).status_code == 403
    after = {name: metric(server, name) for name in names}
    assert after[ok] == before[ok] + 1 and after[refused] == before[refused] + 1
    assert after[names[3]] == before[names[3]] + 2
    assert after["nmt_characters_total"] == before["nmt_characters_total"] + sum(map(len, texts))
    assert after["nmt_batch_requests_count"] == before["nmt_batch_requests_count"] + 1
    assert after["nmt_batch_lines_sum"] == before["nmt_batch_lines_sum"] + len(texts)


def test_the_page_asks_for_a_key_and_shows_the_limits(server, tmp_path):
    from test_serve import CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    status = "document.getElementById('status').textContent"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(server + "/", timeout=30000)
            page.wait_for_selector("#key-label:not([hidden])")
            assert page.text_content("#access") == ("Limits: 5/day requests, 100000/day characters")
            page.uncheck("#live")
            page.fill("#source", "A man rides a bike.")
            page.press("#source", "Control+Enter")
            page.wait_for_function(f"{status}.startsWith('error 401')", timeout=30000)
            page.fill("#key", KEYS[3])
            page.press("#source", "Control+Enter")
            page.wait_for_function(f"{status}.includes(' s ·')", timeout=30000)
            assert page.text_content("#translation")
            page.screenshot(path=tmp_path / "keyed.png")
        finally:
            browser.close()


# The gates on their own, in front of an app that answers 200: no server, no model.


async def answer_ok(scope, receive, send) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def access_gate(**settings):
    """The server's door over `answer_ok`, with /translate's and LibreTranslate's readers, the
    default limits and Access (no keys, no limits unless given; in memory)."""
    from fastapi import FastAPI
    from limits.storage import MemoryStorage

    from nmt.config import DecodeConfig, ModelConfig, ServeConfig
    from nmt.jobs.job import Limits
    from nmt.serving.access import Access, parse_limit
    from nmt.serving.door import Door, Route
    from nmt.serving.libretranslate import add_libretranslate
    from nmt.serving.schema import translate_reader

    settings = {"keys": None, "requests": None, "chars": None} | settings
    for name in ("requests", "chars"):
        settings[name] = parse_limit(name, settings[name])
    cfg = ServeConfig(ckpt="model.pt", decode=DecodeConfig())
    readers = add_libretranslate(FastAPI(), cfg, "en", "de", DecodeConfig(), None)
    readers["/translate"] = translate_reader(DecodeConfig(), cfg)
    routes = {path: Route(read, 1 << 20, "max_body_bytes") for path, read in readers.items()}
    access = Access(**settings, storage=MemoryStorage())
    limits = Limits.of(cfg, ModelConfig(max_positions=1024))
    return Door(answer_ok, routes=routes, limits=limits, access=access)


def call(app, path: str, **request) -> httpx.Response:
    """POST `path` to the ASGI `app`, in this process."""
    import asyncio

    async def post():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            return await client.post(path, **request)

    return asyncio.run(post())


def test_without_keys_a_made_up_key_does_not_open_a_window_of_its_own():
    gate = access_gate(requests="2/day")
    statuses = [
        call(gate, "/translate", json={"text": "A."}, headers={"Authorization": f"Bearer {i}"})
        for i in range(3)
    ]
    assert [s.status_code for s in statuses] == [200, 200, 429]
    assert "for this address" in statuses[2].json()["detail"]


def test_characters_count_whatever_the_content_type_and_a_refusal_counts_for_nothing():
    """curl -d sends /translate's JSON as a form; a LibreTranslate client a multipart form. A
    request refused for its characters does not use one of the requests."""
    gate = access_gate(requests="3/day", chars="50/day")
    form = {"Content-Type": "application/x-www-form-urlencoded"}

    def translate(chars: int) -> int:
        body = json.dumps({"text": "x" * chars})
        return call(gate, "/translate", content=body, headers=form).status_code

    assert [translate(30), translate(30), translate(5), translate(5)] == [200, 429, 200, 200]
    assert translate(1) == 429  # the 4th request counted: 3 a day
    too_many = call(
        access_gate(chars="50/day"),
        "/libretranslate/translate",
        data={"q": "y" * 51, "source": "en", "target": "de"},
        files={"unused": ("a.txt", b"")},  # multipart/form-data
    )
    assert too_many.status_code == 413 and set(too_many.json()) == {"error"}
    assert "51 characters" in too_many.json()["error"]


def test_translates_json_names_its_key_as_the_guide_says():
    gate = access_gate(keys=[KEYS[0].encode()])
    for key, status in ((KEYS[0], 200), ("x", 403), (None, 401)):
        body = {"text": "A.", "api_key": key} if key else {"text": "A."}
        assert call(gate, "/translate", json=body).status_code == status


def test_a_multipart_form_names_its_key():
    gate = access_gate(keys=[KEYS[0].encode()])
    lt = {"q": "A.", "source": "en", "target": "de"}
    multipart = {"unused": ("a.txt", b"")}
    for key, status in ((KEYS[0], 200), ("x", 403)):
        reply = call(gate, PREFIX + "/translate", data=lt | {"api_key": key}, files=multipart)
        assert reply.status_code == status


def test_refused_requests_count_toward_limit_requests_and_then_go_unread():
    """An address whose refused requests fill limit_requests (limit_refused's default) is
    answered 429 before its body is read, even with a right key; admitted requests are not
    counted there."""
    gate = access_gate(keys=[KEYS[0].encode()], requests="3/day")
    right, wrong = {"Authorization": f"Bearer {KEYS[0]}"}, {"Authorization": "Bearer x"}
    assert call(gate, "/translate", json={"text": "A."}, headers=right).status_code == 200
    for _ in range(3):
        assert call(gate, "/translate", json={"text": "A."}, headers=wrong).status_code == 403
    blocked = call(gate, "/translate", content=b"{not JSON", headers=right)
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
    assert "over limit_refused=3 per 1 day for this address" in blocked.json()["detail"]
    busy = access_gate(keys=[KEYS[0].encode()], requests="3/day")
    codes = []
    for _ in range(4):
        codes.append(call(busy, "/translate", json={"text": "A."}, headers=right).status_code)
    assert codes == [200, 200, 200, 429]  # the 429 is this address's first refusal
    assert call(busy, "/translate", content=b"{", headers=right).status_code == 422  # second


def test_a_requests_glossary_is_built_only_for_a_key_that_passes(monkeypatch):
    """A client the key refuses costs no glossary work (its terms are never read, merged or
    lemmatised); one it admits gets its glossary, through either route."""
    from nmt.terms.glossary import Glossary

    built = []
    of_request = Glossary.of_request.__func__

    def counting(cls, pairs, exact=False):
        built.append(pairs)
        return of_request(cls, pairs, exact)

    monkeypatch.setattr(Glossary, "of_request", classmethod(counting))
    gate = access_gate(keys=[KEYS[0].encode()])
    terms = {"dog": "Hund"}
    body = {"text": "A dog.", "glossary": terms}
    for key, status in (("x", 403), (None, 401)):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        assert call(gate, "/translate", json=body, headers=headers).status_code == status
    assert built == []
    reply = call(gate, "/translate", json=body, headers={"Authorization": f"Bearer {KEYS[0]}"})
    assert reply.status_code == 200 and built == [terms]


def test_every_translating_request_is_counted_once_whatever_its_headers():
    """No header lets a request past the metrics (the routes call no route of their own:
    nmt.serving.dispatch); what is no translating route is not counted."""
    from nmt.serving.metrics import Metrics, MetricsGate

    metrics = Metrics()
    gate = MetricsGate(answer_ok, metrics=metrics, routes=["/translate"])

    counted = 'nmt_requests_total{route="/translate",status="200"}'

    def requests() -> float:
        from prometheus_client import generate_latest

        page = generate_latest(metrics.registry).decode().splitlines()
        return sum(float(line.split()[-1]) for line in page if line.startswith(counted))

    call(gate, "/translate", json={"text": ["A."]}, headers={"X-NMT-Internal": "secret"})
    assert requests() == 1
    call(gate, "/translate", json={"text": ["A."]})
    call(gate, "/translate_file", json={"text": ["A."]})
    assert requests() == 2
