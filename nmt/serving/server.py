"""`nmt.serve`'s HTTP server around TranslationAPI: for the torch backend LitServe (FastAPI
and uvicorn underneath, model worker processes), for CTranslate2 one process (inprocess.py:
its engine decodes in threads of its own, and LitServe's queues between processes cost it a
fifth of its throughput, docs/benchmarks.md).

Routes: POST /translate (batched into TranslationAPI.predict), POST /translate_file
(files.py), LibreTranslate's API under /libretranslate (libretranslate.py): each request of
these passes the door first (door.py: its body read once, bounded; its job checked against
the limits; its key and rate limits; all before any work). GET /metrics (metrics.py), GET
/health (200 "ok" while every model worker is up with the model loaded, else 503 saying how
many are: workers.py), GET /info (our ModelCard as "model", no server path), GET / (the
page, page.html), and FastAPI's /docs and /openapi.json.
"""

from __future__ import annotations

import html
from dataclasses import asdict, fields, replace
from importlib import resources
from importlib.metadata import version
from pathlib import PurePosixPath, PureWindowsPath

import litserve as ls
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse

from nmt.config import ModelConfig, RequestLimits, ServeConfig
from nmt.decoding.settings import check_search, describe_search
from nmt.documents.formats import FORMATS, TEXT_FORMATS
from nmt.errors import JobError, UsageError
from nmt.inference.loading import check_model, engine_class, max_tokens, read_card
from nmt.inference.search_choice import choose_search
from nmt.jobs.job import Limits
from nmt.serving.access import Access, parse_limit, read_keys
from nmt.serving.api import TranslationAPI
from nmt.serving.connections import Guard
from nmt.serving.dispatch import Departures, Dispatch, LitServeSubmit
from nmt.serving.door import FORM_OVERHEAD, Asked, Door, Route
from nmt.serving.files import add_file_route, read_file_form
from nmt.serving.inprocess import InProcessServer
from nmt.serving.libretranslate import PREFIX as LIBRE_PREFIX
from nmt.serving.libretranslate import add_libretranslate
from nmt.serving.limit_storage import limit_storage
from nmt.serving.metrics import Metrics, MetricsGate, add_metrics, share_worker_metrics
from nmt.serving.schema import TranslateRequest, TranslateResponse, response, translate_reader
from nmt.serving.workers import (
    ModelWorkers,
    monitor_stops_first,
    start_workers_by,
    watch_workers,
    worker_start,
)
from nmt.terms.glossary import GlossaryError, read_glossary
from nmt.translation.sentences import SentenceSplitter
from nmt.translation.settings import checked_rules

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe binds to


# ServeConfig's bounds on connections: each above 0
CONNECTION_BOUNDS = (
    "header_seconds",
    "body_seconds",
    "keep_alive_seconds",
    "max_bodies_bytes",
    "max_client_connections",
    "max_connections",
)


def check_serve(cfg: ServeConfig) -> None:
    """Refuse settings that cannot work before loading anything."""
    checked_rules(cfg, cfg.backend)
    check_model(cfg)
    if cfg.host not in HOSTS:
        raise UsageError(f"host must be one of {', '.join(HOSTS)}, not {cfg.host!r}")
    if not 1024 <= cfg.port <= 65535:
        raise UsageError(f"port must be in 1024..65535, not {cfg.port}")
    if cfg.format not in ("auto", *TEXT_FORMATS):
        raise UsageError(
            f"format must be auto or one of {', '.join(TEXT_FORMATS)} (what texts may be), "
            f"not {cfg.format!r}"
        )
    if cfg.glossary:
        try:
            read_glossary(cfg.glossary)
        except GlossaryError as error:
            raise UsageError(str(error)) from None
    for name in ["batch_requests", *CONNECTION_BOUNDS, *(f.name for f in fields(RequestLimits))]:
        value = getattr(cfg, name)
        if isinstance(value, float) and not value > 0:
            raise UsageError(f"{name} must be above 0, not {value}")
        if isinstance(value, int) and value < 1:
            raise UsageError(f"{name} must be at least 1, not {value}")
    if cfg.max_bodies_bytes < cfg.max_file_bytes + FORM_OVERHEAD:
        raise UsageError(
            f"max_bodies_bytes={cfg.max_bodies_bytes} must hold one file's body: at least "
            f"max_file_bytes + {FORM_OVERHEAD} (a form's overhead)"
        )
    if cfg.workers < 0 or cfg.threads < 0:
        raise UsageError("workers and threads must not be negative (0: one per core)")
    if cfg.cache_sentences < 0:
        raise UsageError(
            f"cache_sentences must not be negative (0: no cache), not {cfg.cache_sentences}"
        )
    if not 0 < cfg.batch_wait_ms < cfg.timeout * 1000:  # 0 would spin an idle worker
        raise UsageError(f"batch_wait_ms={cfg.batch_wait_ms} must be in (0, timeout*1000)")


def with_workers(cfg: ServeConfig) -> ServeConfig:
    """`cfg` with workers, threads and their start resolved: workers=0 is one per core on
    the CPU (each on cores/workers threads when threads=0), one on a GPU: the GPU and the
    cores as the backend sees them (CTranslate2's without importing torch); worker_start
    as workers.worker_start says."""
    engine = engine_class(cfg.backend)
    gpu = cfg.device.startswith("cuda") or (cfg.device == "auto" and engine.sees_gpu())
    cores = engine.cpu_threads()
    workers = cfg.workers or (1 if gpu else cores)
    threads = cfg.threads or max(1, cores // workers)
    start = worker_start(cfg.worker_start, gpu)
    return replace(cfg, workers=workers, threads=threads, worker_start=start)


def build_server(
    cfg: ServeConfig, overrides: list[str]
) -> tuple[ls.LitServer | InProcessServer, str]:
    """The server, not yet running, and a line saying what it serves with which search."""
    check_serve(cfg)
    cfg = with_workers(cfg)
    card = read_card(cfg)
    search, search_line = choose_search(card, cfg.decode, overrides)
    check_search(search, card.vocab_size)  # the default every request starts from, at start
    limits = Limits.of(cfg, ModelConfig(**card.shape))
    metadata = server_info(cfg, card, search, limits)
    routes: dict[str, Route] = {}  # the door's, filled in as the routes are added
    door = {"routes": routes, "limits": limits, "access": access(cfg)}
    door["body_seconds"], door["max_bodies"] = cfg.body_seconds, cfg.max_bodies_bytes
    door["splitter"] = SentenceSplitter(max_words=cfg.segment_max_words)
    metrics = Metrics()
    middlewares = [(Door, door), *outer_middlewares(cfg, metrics, routes)]
    if engine_class(cfg.backend).releases_gil:
        # one engine, workers x threads single-threaded decoders; `workers` batches at once
        api = TranslationAPI(replace(cfg, threads=cfg.workers * cfg.threads), overrides, card.name)
        server = InProcessServer(
            api, cfg.workers, cfg.batch_requests, cfg.batch_wait_ms / 1000, cfg.timeout, metadata
        )
        for middleware, settings in middlewares:
            server.app.add_middleware(middleware, **settings)
        dispatch = Dispatch(server.submit, cfg.max_lines, cfg.glossary)
        add_routes(server.app, cfg, card, search, dispatch, routes, metrics)
        metadata["routes"] = list(routes)  # /info's list: the door's own
        return server, f"{card.name}: {search_line}"
    if cfg.metrics:
        share_worker_metrics()  # the model workers' batch sizes reach /metrics
    workers, departures = ModelWorkers(cfg.workers), Departures()
    api = TranslationAPI(cfg, overrides, card.name, departures)
    server = ls.LitServer(
        api,
        accelerator=accelerator(cfg.device),
        devices=1,
        workers_per_device=cfg.workers,
        timeout=cfg.timeout,
        model_metadata=metadata,
        middlewares=middlewares,
        restart_workers=True,  # a worker that dies is replaced, not the server shut down
        callbacks=[workers],
    )
    server.uvicorn_graceful_timeout = cfg.drain_seconds  # how long its HTTP process drains
    start_workers_by(server, cfg.worker_start)
    watch_workers(server, workers)  # its requests answered, /health telling
    monitor_stops_first(server)
    # the works reach LitServe's workers through its queue, never through its own route
    without_route(server.app, api.api_path)
    dispatch = Dispatch(
        LitServeSubmit(server, api.api_path, departures), cfg.max_lines, cfg.glossary
    )
    add_routes(server.app, cfg, card, search, dispatch, routes, metrics)
    metadata["routes"] = list(routes)  # /info's list: the door's own
    return server, f"{card.name}: {search_line}"


def without_route(app, path: str) -> None:
    """Drop `app`'s routes at `path` (LitServe's own, for a route of ours in their place)."""
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != path]


def server_info(cfg: ServeConfig, card, search, limits: Limits) -> dict:
    """What /info says of the model and the server: shape, direction, tokenizer, backend,
    default search, batching, limits, formats, defaults of a request's fields, access."""
    return {
        "name": card.name,
        "ensemble": len(cfg.ensemble),
        "direction": f"{card.src_lang}-{card.tgt_lang}",
        "backend": cfg.backend,
        "shape": card.shape,
        "tokenizer": {"type": "sentencepiece", "vocab_size": card.vocab_size},
        "search": asdict(search),
        "search_text": describe_search(search),
        "trained": public_info(card.info),
        "batching": {
            "batch_requests": cfg.batch_requests,
            "batch_wait_ms": cfg.batch_wait_ms,
            "workers": cfg.workers,
            "threads": cfg.threads,
            "max_tokens": max_tokens(cfg),
        },
        "limits": asdict(limits),
        # what POST /translate_file (and LibreTranslate's) take: each format's suffixes
        "formats": {name: list(f.suffixes) for name, f in FORMATS.items()},
        # what a file request's "retranslate" defaults to, and the formats it applies to
        "retranslate": {
            "default": cfg.retranslate,
            "formats": [name for name, f in FORMATS.items() if f.holds_translations],
        },
        # what a request's "protect", "protect_patterns" and "numbers" default to
        "protect": {"kinds": list(cfg.protect), "patterns": list(cfg.protect_patterns)},
        "numbers": cfg.numbers,
        "glossary_entries": len(read_glossary(cfg.glossary)) if cfg.glossary else 0,
        # what a request's "glossary_exact" defaults to; None: this engine cannot (CTranslate2)
        "glossary_exact": cfg.glossary_exact if engine_class(cfg.backend).constrains else None,
        "access": {  # what a client must know (never the keys)
            "keys": cfg.api_keys_file is not None,
            "limit_requests": cfg.limit_requests,
            "limit_chars": cfg.limit_chars,
            "limit_refused": cfg.limit_refused or cfg.limit_requests,
        },
        "version": version("nmt"),
    }


def add_routes(app, cfg: ServeConfig, card, search, dispatch: Dispatch, routes: dict, metrics):
    """The routes of both servers (/translate, the page, files, LibreTranslate's API,
    /metrics when asked, one-line 422s), and the door's readers of every translating route's
    body."""

    rules = checked_rules(cfg, cfg.backend)  # every file's, checked at start-up

    async def read_file(body: bytes, content_type: str) -> Asked:
        return await read_file_form(body, content_type, cfg, rules, search)

    async def read_libre_file(body: bytes, content_type: str) -> Asked:
        languages = (card.src_lang, card.tgt_lang)
        return await read_file_form(body, content_type, cfg, rules, search, languages)

    add_translate_route(app, dispatch, card.name, engine_class(cfg.backend))
    add_page(app, card)
    add_file_route(app, dispatch, card.tgt_lang)
    readers = add_libretranslate(app, cfg, card.src_lang, card.tgt_lang, search, dispatch)
    read_translate = translate_reader(search, cfg)
    routes["/translate"] = Route(read_translate, cfg.max_body_bytes, "max_body_bytes")
    file_body = cfg.max_file_bytes + FORM_OVERHEAD
    routes["/translate_file"] = Route(read_file, file_body, "max_file_bytes")
    routes[LIBRE_PREFIX + "/translate_file"] = Route(read_libre_file, file_body, "max_file_bytes")
    for path, reader in readers.items():
        routes[path] = Route(reader, cfg.max_body_bytes, "max_body_bytes")
    if cfg.metrics:
        add_metrics(app, metrics, cfg.metrics_token)
    app.add_exception_handler(RequestValidationError, one_line_422)


def add_translate_route(app: FastAPI, dispatch: Dispatch, model_name: str, engine) -> None:
    """POST /translate: the door's checked request run by the workers, answered in its
    shape (its body documented as TranslateRequest, which the door has read)."""

    @app.post("/translate", response_model=TranslateResponse, openapi_extra=TRANSLATE_BODY)
    async def translate(request: Request):
        """Translate a text, or a list of texts, with the server's model."""
        admitted = request.scope["nmt"]
        try:
            result = await dispatch.run(admitted.plan, request.receive)
        except JobError as error:
            return JSONResponse({"detail": str(error)}, status_code=error.status)
        search = engine.runnable(admitted.plan.job.search)[0]
        return response(admitted.request, result.translations, model_name, engine.name, search)

    documented(app, TranslateRequest)


TRANSLATE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/TranslateRequest"}}
        },
    }
}


def documented(app: FastAPI, model) -> None:
    """`model`'s JSON schema among the app's OpenAPI components (a body the door reads)."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            found = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(found.pop("$defs", {}))
            components[model.__name__] = found
        return app.openapi_schema

    app.openapi = openapi


def uvicorn_settings(cfg: ServeConfig) -> dict:
    """What uvicorn holds for both servers: the connections at once and per client, the time
    a request's headers and an idle keep-alive may take, and whose X-Forwarded-For it reads
    (none unless trusted_proxies names them)."""
    proxies = {"proxy_headers": bool(cfg.trusted_proxies)}
    if cfg.trusted_proxies:
        proxies["forwarded_allow_ips"] = ",".join(cfg.trusted_proxies)
    guard = Guard(cfg.header_seconds, cfg.max_client_connections, cfg.trusted_proxies)
    return {
        "http": guard,  # the protocol, bounded (nmt/serving/connections.py)
        "limit_concurrency": cfg.max_connections,
        "timeout_keep_alive": cfg.keep_alive_seconds,
        **proxies,
    }


def access(cfg: ServeConfig) -> Access | None:
    """The keys and rate limits, where the settings ask for any."""
    keys = read_keys(cfg.api_keys_file) if cfg.api_keys_file else None
    requests = parse_limit("limit_requests", cfg.limit_requests)
    chars = parse_limit("limit_chars", cfg.limit_chars)
    refused = parse_limit("limit_refused", cfg.limit_refused)
    if keys is None and not requests and not chars and not refused:
        return None
    return Access(keys, requests, chars, limit_storage(cfg.limits_storage), refused)


def outer_middlewares(cfg: ServeConfig, metrics: Metrics, routes: dict) -> list[tuple]:
    """The metrics (around the door: they count its refusals too) and CORS, outermost last
    (Starlette runs the last added first)."""
    found = []
    if cfg.metrics:
        found.append((MetricsGate, {"metrics": metrics, "routes": routes}))
    if cfg.cors_origins:
        cors = {"allow_origins": list(cfg.cors_origins), "allow_methods": ["GET", "POST"]}
        found.append((CORSMiddleware, cors | {"allow_headers": ["Authorization", "Content-Type"]}))
    return found


def public_info(info):
    """A model's provenance without the paths of the machine it was made on: each absolute
    path (a source checkpoint, the averaged ones) as its file name alone."""
    if isinstance(info, dict):
        return {key: public_info(value) for key, value in info.items()}
    if isinstance(info, list):
        return [public_info(value) for value in info]
    if isinstance(info, str) and (PurePosixPath(info).is_absolute() or PureWindowsPath(info).drive):
        return PurePosixPath(info.replace("\\", "/")).name
    return info


def accelerator(device: str) -> str:
    return "auto" if device == "auto" else ("cpu" if device == "cpu" else "cuda")


def add_page(app: FastAPI, card) -> None:
    """Serve page.html at / (in place of LitServe's "litserve running")."""
    page = resources.files("nmt.serving").joinpath("page.html").read_text(encoding="utf-8")
    names = {"direction": f"{card.src_lang}-{card.tgt_lang}", "name": card.name}
    for key, value in names.items():
        page = page.replace("{{" + key + "}}", html.escape(value))
    routes = app.router.routes
    routes[:] = [r for r in routes if getattr(r, "path", None) != "/"]

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)


async def one_line_422(request: Request, error: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors, as one line (the gate answers most before they get here)."""
    errors = error.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"] if p != "body")
    message = str(first["msg"]).splitlines()[0]
    return JSONResponse({"detail": f"{where}: {message}" if where else message}, status_code=422)
