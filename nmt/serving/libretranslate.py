"""LibreTranslate's API, under /libretranslate: point a LibreTranslate client at
`http://HOST:PORT/libretranslate/` and it works unchanged (tested with libretranslatepy).

- POST /libretranslate/translate: `q` (a string, or in JSON a list), `source` (the model's
  source language, or "auto"), `target` (its target language), `format` ("text" or "html"),
  `alternatives` (how many more translations, text only), `api_key` (checked when the
  server has keys: access.py), as JSON or as a form, as LibreTranslate takes them.
  Answer: {"translatedText": the translation (a list for a list), "alternatives": [...]
  when asked, "detectedLanguage": {"language", "confidence"} with source "auto"}.
- POST /libretranslate/translate_file: a multipart form of `file` (a suffix of the format
  table), `source`, `target`, `api_key`, as LibreTranslate takes it; the file is translated
  as POST /translate_file translates it, kept (`Downloads`) and answered with
  {"translatedFileUrl": its address under GET /libretranslate/download_file/...}, which
  LibreTranslate's clients fetch next.
- GET /libretranslate/languages: the model's pair, as LibreTranslate lists languages.
- POST /libretranslate/detect: `q` → [{"language", "confidence"}], best first, from py3langid
  restricted to the model's two languages (chosen by bench/bench_detect.py: as accurate as
  lingua on Multi30k, faster, a twentieth of its size).
Errors have LibreTranslate's shape, {"error": "one line"}: 400 for a body that is not JSON or
a form, a missing field, a language the model does not serve (naming the pair), a format or
an alternatives count it cannot take; the door's refusals (limits, keys) keep their status.
The door (door.py) reads each body with this module's readers and checks its job before the
route runs; its checked job runs through the server's dispatch (dispatch.py), in the same
batches and under the same limits as /translate's; language detection runs in a thread.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from omegaconf import OmegaConf
from starlette.concurrency import run_in_threadpool

from nmt.config import CONF_DIR, ServeConfig
from nmt.decoding.settings import DecodeConfig
from nmt.documents.formats import FORMATS
from nmt.jobs.job import Job, JobError
from nmt.serving.dispatch import Dispatch
from nmt.serving.door import Admitted, Reader, check_unicode, read_form
from nmt.serving.door import Asked as DoorAsked
from nmt.serving.files import translated_name
from nmt.serving.schema import TranslateRequest, request_job

PREFIX = "/libretranslate"
NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian"}
MAX_ALTERNATIVES = 10


@cache
def beam_preset() -> DecodeConfig:
    """The search of decode=beam: nmt/conf/decode/beam.yaml over DecodeConfig's defaults
    (greedy.yaml)."""
    settings = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "decode" / "beam.yaml"))
    settings.pop("defaults", None)
    return DecodeConfig(**settings)


def translate_body(texts: list[str], fmt: str, alternatives: int, search: DecodeConfig) -> dict:
    """The /translate request of LibreTranslate's: `texts` in format `fmt` and, for
    `alternatives`, the n best of a beam (the server's `search` where it is a beam, else with
    decode=beam's length penalty)."""
    body: dict = {"text": texts, "format": fmt}
    if alternatives:
        beam = max(search.beam_size if search.strategy == "beam" else 1, alternatives + 1)
        body["search"] = {"strategy": "beam", "beam_size": beam, "nbest": alternatives + 1}
        if search.strategy != "beam":
            body["search"]["len_penalty"] = beam_preset().len_penalty
    return body


class LanguageID:
    """py3langid over the model's languages: (language, confidence 0-100), best first. Its
    model (~0.4 CPU-s to decompress) loads at the first detection, not at every server's
    start; detections run in threads, so one loads it and the others wait for it."""

    def __init__(self, languages: list[str]):
        self.languages = languages
        self.identifier = None
        self.loading = threading.Lock()

    def rank(self, text: str) -> list[tuple[str, float]]:
        if self.identifier is None:
            with self.loading:
                if self.identifier is None:
                    from py3langid.langid import MODEL_FILE, LanguageIdentifier

                    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                    identifier.set_languages(self.languages)
                    self.identifier = identifier
        return [(lang, round(100 * p, 2)) for lang, p in self.identifier.rank(text)]


@dataclass
class LibreAsked:
    """A LibreTranslate translate request as read: the /translate body it stands for, whether
    `q` was a list, how many alternatives, and whether the source is to be detected."""

    body: dict
    listed: bool
    alternatives: int
    detect: bool


async def fields(body: bytes, content_type: str) -> dict:
    """The request's fields, from JSON or a form (`q` a list where given several times)."""
    if content_type.startswith("application/json"):
        try:
            found = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: "[" nested 50,000 deep
            raise JobError(400, "Invalid request: the body is not JSON") from None
        if not isinstance(found, dict):
            raise JobError(400, "Invalid request: the body must be a JSON object")
        check_unicode(found, 400)
        return found
    form = await read_form(body, content_type, max_files=4, status=400)
    given = {key: form.get(key) for key in form}
    if len(form.getlist("q")) > 1:
        given["q"] = form.getlist("q")
    await form.close()
    check_unicode(given, 400)
    return given


class LibreRoutes:
    """The work of the LibreTranslate routes of one server: their bodies read into jobs (the
    door's readers), and a checked request translated through `dispatch`."""

    def __init__(
        self,
        cfg: ServeConfig,
        src_lang: str,
        tgt_lang: str,
        search: DecodeConfig,
        dispatch: Dispatch,
    ):
        self.cfg, self.search, self.dispatch = cfg, search, dispatch
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.identify = LanguageID([src_lang, tgt_lang])
        self.pair = f"this server translates {src_lang} to {tgt_lang}"

    def checked(self, given: dict) -> tuple[list[str], int, str]:
        """The texts, alternatives and format of a /translate body's fields; JobError 400."""
        for name in ("q", "source", "target"):
            if given.get(name) in (None, ""):
                raise JobError(400, f"Invalid request: missing {name} parameter")
        q, source, target = given["q"], str(given["source"]), str(given["target"])
        texts = q if isinstance(q, list) else [q]
        if not all(isinstance(text, str) for text in texts):
            raise JobError(400, "Invalid request: q must be a string or a list of strings")
        try:
            alternatives = int(given.get("alternatives") or 0)
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 is inf
            raise JobError(400, "Invalid request: alternatives must be a number") from None
        fmt = str(given.get("format") or "text")
        if source != "auto" and (source, target) != (self.src_lang, self.tgt_lang):
            raise JobError(400, f"{source} to {target} is not available: {self.pair}")
        if target != self.tgt_lang:
            raise JobError(400, f"auto to {target} is not available: {self.pair}")
        if fmt not in ("text", "html"):
            raise JobError(400, f"Invalid request: format must be text or html, not {fmt!r}")
        if not 0 <= alternatives <= MAX_ALTERNATIVES:
            raise JobError(400, f"Invalid request: alternatives must be 0 to {MAX_ALTERNATIVES}")
        return texts, 0 if fmt == "html" else alternatives, fmt  # (alternatives: for text)

    async def read_translate(self, body: bytes, content_type: str) -> DoorAsked:
        given = await fields(body, content_type)
        texts, alternatives, fmt = self.checked(given)
        translate = translate_body(texts, fmt, alternatives, self.search)
        request = TranslateRequest.model_validate(translate)
        listed = isinstance(given["q"], list)
        asked = LibreAsked(translate, listed, alternatives, given["source"] == "auto")
        key = given.get("api_key")
        job = lambda: request_job(request, self.search, self.cfg)  # noqa: E731 - after the key
        return DoorAsked(asked, job, key if isinstance(key, str) else None)

    async def read_detect(self, body: bytes, content_type: str) -> DoorAsked:
        given = await fields(body, content_type)
        q = given.get("q")
        if not isinstance(q, str) or not q:
            raise JobError(400, "Invalid request: missing q parameter")
        key = given.get("api_key")
        return DoorAsked(q, Job(texts=[q]), key if isinstance(key, str) else None)

    async def translate(self, admitted: Admitted, receive) -> dict:
        """The answer to a checked request (`receive`: its client's, as Dispatch.run's)."""
        asked: LibreAsked = admitted.request
        detected = None
        if asked.detect:
            ranked = await run_in_threadpool(self.identify.rank, " ".join(asked.body["text"]))
            detected = {"language": ranked[0][0], "confidence": ranked[0][1]}
            if ranked[0][0] != self.src_lang:
                raise JobError(
                    400, f"{ranked[0][0]} to {self.tgt_lang} is not available: {self.pair}"
                )
        found = (await self.dispatch.run(admitted.plan, receive)).translations
        texts = [t.text for t in found]
        result: dict = {"translatedText": texts if asked.listed else texts[0]}
        if asked.alternatives:
            others = [[text for text, _ in t.alternatives[1:]] for t in found]
            result["alternatives"] = others if asked.listed else others[0]
        if detected:
            result["detectedLanguage"] = detected
        return result


class Downloads:
    """Translated files kept for their download: at most KEEP_FILES of them and KEEP_BYTES
    in all (the oldest go first), each for KEEP_SECONDS, under a random token; in this
    process's memory (one front process serves a server's routes)."""

    KEEP_FILES, KEEP_BYTES, KEEP_SECONDS = 64, 64 << 20, 600.0

    def __init__(self) -> None:
        self.kept: OrderedDict[str, tuple[float, str, bytes]] = OrderedDict()

    def put(self, name: str, media_type: str, data: bytes) -> str:
        token = secrets.token_urlsafe(16)
        self.kept[token] = (time.monotonic() + self.KEEP_SECONDS, media_type, data)
        while len(self.kept) > self.KEEP_FILES or (
            sum(len(d) for _, _, d in self.kept.values()) > self.KEEP_BYTES and len(self.kept) > 1
        ):
            self.kept.popitem(last=False)
        return token

    def get(self, token: str) -> tuple[str, bytes] | None:
        found = self.kept.get(token)
        if found is None or found[0] < time.monotonic():
            self.kept.pop(token, None)
            return None
        return found[1], found[2]


def add_libretranslate(
    app: FastAPI,
    cfg: ServeConfig,
    src_lang: str,
    tgt_lang: str,
    search: DecodeConfig,
    dispatch: Dispatch,
) -> dict[str, Reader]:
    """The routes of the module docstring on `app`; returns the door's readers of their
    bodies, by path."""
    libre = LibreRoutes(cfg, src_lang, tgt_lang, search, dispatch)

    @app.post(PREFIX + "/translate", tags=["LibreTranslate"])
    async def libretranslate_translate(request: Request):
        """LibreTranslate's POST /translate."""
        try:
            return await libre.translate(request.scope["nmt"], request.receive)
        except JobError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)

    @app.get(PREFIX + "/languages", tags=["LibreTranslate"])
    async def libretranslate_languages() -> list[dict]:
        """LibreTranslate's GET /languages: the model's two languages, the source's target."""
        return [
            {"code": src_lang, "name": NAMES.get(src_lang, src_lang), "targets": [tgt_lang]},
            {"code": tgt_lang, "name": NAMES.get(tgt_lang, tgt_lang), "targets": []},
        ]

    @app.post(PREFIX + "/detect", tags=["LibreTranslate"])
    async def libretranslate_detect(request: Request):
        """LibreTranslate's POST /detect, over the model's two languages (in a thread: the
        event loop only waits)."""
        ranked = await run_in_threadpool(libre.identify.rank, request.scope["nmt"].request)
        return [{"language": lang, "confidence": conf} for lang, conf in ranked]

    add_file_routes(app, dispatch, tgt_lang)
    return {PREFIX + "/translate": libre.read_translate, PREFIX + "/detect": libre.read_detect}


def add_file_routes(app: FastAPI, dispatch: Dispatch, tgt_lang: str) -> None:
    """LibreTranslate's POST /translate_file and the downloads it answers with."""
    downloads = Downloads()

    @app.post(PREFIX + "/translate_file", tags=["LibreTranslate"])
    async def libretranslate_translate_file(request: Request):
        """LibreTranslate's POST /translate_file: the file translated, kept for download."""
        admitted = request.scope["nmt"]
        plan = admitted.plan
        try:
            result = await dispatch.run(plan, request.receive)
        except JobError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        media_type = FORMATS[plan.job.format].media_type
        token = downloads.put(admitted.request, media_type, result.data)
        name = quote(translated_name(admitted.request, tgt_lang), safe="")
        url = str(request.base_url).rstrip("/") + f"{PREFIX}/download_file/{token}/{name}"
        return {"translatedFileUrl": url}

    @app.get(PREFIX + "/download_file/{token}/{name}", tags=["LibreTranslate"])
    async def libretranslate_download(token: str, name: str):
        """A file POST /libretranslate/translate_file translated (404 once it is gone)."""
        found = downloads.get(token)
        if found is None:
            return JSONResponse({"error": "no such file (kept 10 minutes)"}, status_code=404)
        media_type, data = found
        return Response(data, media_type=media_type)
