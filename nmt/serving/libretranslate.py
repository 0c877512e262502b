"""LibreTranslate's API, under /libretranslate: point a LibreTranslate client at
`http://HOST:PORT/libretranslate/` and it works unchanged (tested with libretranslatepy).

- POST /libretranslate/translate: `q` (a string, or in JSON a list), `source` (the model's
  source language, or "auto"), `target` (its target language), `format` ("text" or "html"),
  `alternatives` (how many more translations, text only), `api_key` (checked when the
  server has keys: access.py), as JSON or as a form, as LibreTranslate takes them.
  Answer: {"translatedText": the translation (a list for a list), "alternatives": [...]
  when asked, "detectedLanguage": {"language", "confidence"} with source "auto"}.
- GET /libretranslate/languages: the model's pair, as LibreTranslate lists languages.
- POST /libretranslate/detect: `q` → [{"language", "confidence"}], best first, from py3langid
  restricted to the model's two languages (chosen by bench/bench_detect.py: as accurate as
  lingua on Multi30k, faster, a twentieth of its size).
Errors have LibreTranslate's shape, {"error": "one line"}: 400 for a missing field, a
language the model does not serve (naming the pair), a format or an alternatives count it
cannot take; the server's own refusals keep their status. Texts are translated by the
server's own POST /translate (loopback.py), in the same batches and under the same limits.
"""

from __future__ import annotations

from functools import cache

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from omegaconf import OmegaConf
from starlette.concurrency import run_in_threadpool

from nmt.config import CONF_DIR, ServeConfig
from nmt.decoding.settings import DecodeConfig
from nmt.serving.loopback import post_translate

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
    """py3langid over the model's languages: (language, confidence 0-100), best first."""

    def __init__(self, languages: list[str]):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        self.identifier.set_languages(languages)

    def rank(self, text: str) -> list[tuple[str, float]]:
        return [(lang, round(100 * p, 2)) for lang, p in self.identifier.rank(text)]


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def fields(request: Request) -> dict:
    """The request's fields, from JSON or a form (`q` a list where given several times)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = await request.json()
        except ValueError:
            raise Refused(400, "Invalid request: the body is not JSON") from None
        if not isinstance(body, dict):
            raise Refused(400, "Invalid request: the body must be a JSON object")
        return body
    form = await request.form()
    given = {key: form.get(key) for key in form}
    if len(form.getlist("q")) > 1:
        given["q"] = form.getlist("q")
    return given


def add_libretranslate(
    app: FastAPI,
    cfg: ServeConfig,
    src_lang: str,
    tgt_lang: str,
    search: DecodeConfig,
    internal: str,
) -> None:
    """The routes of the module docstring on `app`."""
    identify = LanguageID([src_lang, tgt_lang])
    pair = f"this server translates {src_lang} to {tgt_lang}"

    def translate(q, source: str, target: str, fmt: str, alternatives: int) -> dict:
        texts = q if isinstance(q, list) else [q]
        if not all(isinstance(text, str) for text in texts):
            raise Refused(400, "Invalid request: q must be a string or a list of strings")
        detected = None
        if source == "auto":
            ranked = identify.rank(" ".join(texts))
            detected = {"language": ranked[0][0], "confidence": ranked[0][1]}
            source = ranked[0][0]
        if (source, target) != (src_lang, tgt_lang):
            raise Refused(400, f"{source} to {target} is not available: {pair}")
        if fmt not in ("text", "html"):
            raise Refused(400, f"Invalid request: format must be text or html, not {fmt!r}")
        if not 0 <= alternatives <= MAX_ALTERNATIVES:
            raise Refused(400, f"Invalid request: alternatives must be 0 to {MAX_ALTERNATIVES}")
        if fmt == "html":
            alternatives = 0  # as LibreTranslate: alternatives are for text
        try:
            answer = post_translate(cfg, translate_body(texts, fmt, alternatives, search), internal)
        except HTTPException as error:
            raise Refused(error.status_code, str(error.detail)) from None
        found = answer["translation"]
        result: dict = {"translatedText": found if isinstance(q, list) else found[0]}
        if alternatives:
            others = [[h["text"] for h in nbest[1:]] for nbest in answer["nbest"]]
            result["alternatives"] = others if isinstance(q, list) else others[0]
        if detected:
            result["detectedLanguage"] = detected
        return result

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message.splitlines()[0]}, status_code=status)

    @app.post(PREFIX + "/translate", tags=["LibreTranslate"])
    async def libretranslate_translate(request: Request):
        """LibreTranslate's POST /translate."""
        try:
            given = await fields(request)
            for name in ("q", "source", "target"):
                if given.get(name) in (None, ""):
                    raise Refused(400, f"Invalid request: missing {name} parameter")
            try:
                alternatives = int(given.get("alternatives") or 0)
            except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 is inf
                raise Refused(400, "Invalid request: alternatives must be a number") from None
            return await run_in_threadpool(
                translate,
                given["q"],
                str(given["source"]),
                str(given["target"]),
                str(given.get("format") or "text"),
                alternatives,
            )
        except Refused as refused:
            return error(refused.status, str(refused))

    @app.get(PREFIX + "/languages", tags=["LibreTranslate"])
    async def libretranslate_languages() -> list[dict]:
        """LibreTranslate's GET /languages: the model's two languages, the source's target."""
        return [
            {"code": src_lang, "name": NAMES.get(src_lang, src_lang), "targets": [tgt_lang]},
            {"code": tgt_lang, "name": NAMES.get(tgt_lang, tgt_lang), "targets": []},
        ]

    @app.post(PREFIX + "/detect", tags=["LibreTranslate"])
    async def libretranslate_detect(request: Request):
        """LibreTranslate's POST /detect, over the model's two languages."""
        try:
            given = await fields(request)
            q = given.get("q")
            if not isinstance(q, str) or not q:
                raise Refused(400, "Invalid request: missing q parameter")
        except Refused as refused:
            return error(refused.status, str(refused))
        return [{"language": lang, "confidence": conf} for lang, conf in identify.rank(q)]
