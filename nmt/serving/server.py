"""`nmt.serve`'s HTTP server around TranslationAPI: for the torch backend LitServe (FastAPI
and uvicorn underneath, model worker processes), for CTranslate2 one process (inprocess.py:
its engine decodes in threads of its own, and LitServe's queues between processes cost it a
fifth of its throughput, docs/benchmarks.md).

Routes: POST /translate (checked by RequestGate, then batched into TranslationAPI.predict),
POST /translate_file (files.py: a file's texts through /translate), LibreTranslate's API
under /libretranslate (libretranslate.py), GET /metrics (metrics.py), GET /health (200 "ok"
while every model worker is up with the model loaded, else 503 saying how many are:
workers.py), GET /info (our ModelCard as "model"), GET / (the page,
page.html), and FastAPI's /docs and /openapi.json.
"""

from __future__ import annotations

import html
import secrets
from dataclasses import asdict, replace
from importlib import resources
from importlib.metadata import version

import litserve as ls
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse

from nmt.cli import UsageError
from nmt.config import ServeConfig
from nmt.decoding.settings import check_search, describe_search
from nmt.inference.loading import check_model, engine_class, max_tokens, read_card
from nmt.inference.search_choice import choose_search
from nmt.serving.access import AccessGate, parse_limit, read_keys
from nmt.serving.api import TranslationAPI
from nmt.serving.files import add_file_route
from nmt.serving.gate import Limits, RequestGate
from nmt.serving.inprocess import InProcessServer
from nmt.serving.libretranslate import add_libretranslate
from nmt.serving.metrics import Metrics, MetricsGate, add_metrics, share_worker_metrics
from nmt.serving.workers import ModelWorkers, watch_workers

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe binds to


def check_serve(cfg: ServeConfig) -> None:
    """Refuse settings that cannot work before loading anything."""
    check_model(cfg)
    if cfg.host not in HOSTS:
        raise UsageError(f"host must be one of {', '.join(HOSTS)}, not {cfg.host!r}")
    if not 1024 <= cfg.port <= 65535:
        raise UsageError(f"port must be in 1024..65535, not {cfg.port}")
    if cfg.format == "docx":
        raise UsageError("format=docx is translate's: the server's texts are text or html")
    for name in ("batch_requests", "max_body_bytes", "max_lines", "max_line_chars"):
        if getattr(cfg, name) < 1:
            raise UsageError(f"{name} must be at least 1, not {getattr(cfg, name)}")
    if cfg.workers < 0 or cfg.threads < 0:
        raise UsageError("workers and threads must not be negative (0: one per core)")
    if cfg.cache_sentences < 0:
        raise UsageError(
            f"cache_sentences must not be negative (0: no cache), not {cfg.cache_sentences}"
        )
    if not 0 < cfg.batch_wait_ms < cfg.timeout * 1000:  # 0 would spin an idle worker
        raise UsageError(f"batch_wait_ms={cfg.batch_wait_ms} must be in (0, timeout*1000)")


def with_workers(cfg: ServeConfig) -> ServeConfig:
    """`cfg` with workers and threads resolved: workers=0 is one per core on the CPU (each on
    cores/workers threads when threads=0), one on a GPU."""
    import torch

    gpu = cfg.device.startswith("cuda") or (cfg.device == "auto" and torch.cuda.is_available())
    cores = torch.get_num_threads()
    workers = cfg.workers or (1 if gpu else cores)
    return replace(cfg, workers=workers, threads=cfg.threads or max(1, cores // workers))


def build_server(
    cfg: ServeConfig, overrides: list[str]
) -> tuple[ls.LitServer | InProcessServer, str]:
    """The server, not yet running, and a line saying what it serves with which search."""
    check_serve(cfg)
    cfg = with_workers(cfg)
    card = read_card(cfg)
    search, search_line = choose_search(card, cfg.decode, overrides)
    check_search(search, card.vocab_size)  # the default every request starts from, at start
    limits = Limits(cfg.max_body_bytes, cfg.max_lines, cfg.max_line_chars)
    metadata = {
        "name": card.name,
        "path": cfg.ckpt,
        "ensemble": cfg.ensemble,
        "direction": f"{card.src_lang}-{card.tgt_lang}",
        "backend": cfg.backend,
        "shape": card.shape,
        "tokenizer": {"type": "sentencepiece", "vocab_size": card.vocab_size},
        "search": asdict(search),
        "search_text": describe_search(search),
        "trained": card.info,
        "batching": {
            "batch_requests": cfg.batch_requests,
            "batch_wait_ms": cfg.batch_wait_ms,
            "workers": cfg.workers,
            "threads": cfg.threads,
            "max_tokens": max_tokens(cfg),
        },
        "limits": asdict(limits),
        "files": {"max_file_bytes": cfg.max_file_bytes, "max_file_segments": cfg.max_file_segments},
        "access": {  # what a client must know (never the keys)
            "keys": cfg.api_keys_file is not None,
            "limit_requests": cfg.limit_requests,
            "limit_chars": cfg.limit_chars,
        },
        "version": version("nmt"),
    }
    gate = {"path": "/translate", "limits": limits, "default": search, "format": cfg.format}
    internal = secrets.token_urlsafe(24)  # marks the routes' own calls to /translate
    metrics = Metrics()
    access = access_settings(cfg, internal, metrics)
    if engine_class(cfg.backend).releases_gil:
        # one engine, workers x threads single-threaded decoders; `workers` batches at once
        api = TranslationAPI(replace(cfg, threads=cfg.workers * cfg.threads), overrides, card.name)
        server = InProcessServer(
            api, cfg.workers, cfg.batch_requests, cfg.batch_wait_ms / 1000, cfg.timeout, metadata
        )
        server.app.add_middleware(RequestGate, **gate)
        for middleware, settings in access:
            server.app.add_middleware(middleware, **settings)
        add_routes(server.app, cfg, card, search, internal, metrics, metadata)
        return server, f"{card.name}: {search_line}"
    if cfg.metrics:
        share_worker_metrics()  # the model workers' batch sizes reach /metrics
    workers = ModelWorkers(cfg.workers)
    server = ls.LitServer(
        TranslationAPI(cfg, overrides, card.name),
        accelerator=accelerator(cfg.device),
        devices=1,
        workers_per_device=cfg.workers,
        timeout=cfg.timeout,
        model_metadata=metadata,
        middlewares=[(RequestGate, gate), *access],
        restart_workers=True,  # a worker that dies is replaced, not the server shut down
        callbacks=[workers],
    )
    server.uvicorn_graceful_timeout = cfg.drain_seconds  # how long its HTTP process drains
    watch_workers(server, workers)  # its requests answered, /health telling
    add_routes(server.app, cfg, card, search, internal, metrics, metadata)
    return server, f"{card.name}: {search_line}"


def add_routes(app, cfg: ServeConfig, card, search, internal: str, metrics, metadata) -> None:
    """The routes beside /translate, the same for both servers: the page, files,
    LibreTranslate's API, /metrics when asked, and one-line 422s."""
    add_page(app, metadata)
    add_file_route(app, cfg, card.tgt_lang, internal)
    add_libretranslate(app, cfg, card.src_lang, card.tgt_lang, search, internal)
    if cfg.metrics:
        add_metrics(app, metrics, cfg.metrics_token)
    app.add_exception_handler(RequestValidationError, one_line_422)


def access_settings(cfg: ServeConfig, internal: str, metrics: Metrics) -> list[tuple]:
    """The keys and limits gate, the metrics and CORS, as (middleware, settings), when
    configured, innermost first (Starlette runs the last added first)."""
    found = []
    keys = read_keys(cfg.api_keys_file) if cfg.api_keys_file else None
    requests = parse_limit("limit_requests", cfg.limit_requests)
    chars = parse_limit("limit_chars", cfg.limit_chars)
    if keys is not None or requests or chars:
        settings = {"keys": keys, "requests": requests, "chars": chars, "internal": internal}
        found.append((AccessGate, settings | {"max_body": cfg.max_file_bytes}))
    if cfg.metrics:  # outermost: it counts what the gates refuse too
        settings = {"metrics": metrics, "internal": internal, "max_body": cfg.max_file_bytes}
        found.append((MetricsGate, settings))
    if cfg.cors_origins:
        cors = {"allow_origins": list(cfg.cors_origins), "allow_methods": ["GET", "POST"]}
        found.append((CORSMiddleware, cors | {"allow_headers": ["Authorization", "Content-Type"]}))
    return found


def accelerator(device: str) -> str:
    return "auto" if device == "auto" else ("cpu" if device == "cpu" else "cuda")


def add_page(app: FastAPI, metadata: dict) -> None:
    """Serve page.html at / (in place of LitServe's "litserve running")."""
    page = resources.files("nmt.serving").joinpath("page.html").read_text(encoding="utf-8")
    for key in ("direction", "name"):
        page = page.replace("{{" + key + "}}", html.escape(metadata[key]))
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
