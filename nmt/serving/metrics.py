"""Prometheus metrics at GET /metrics (`metrics=true`; behind `metrics_token` as a bearer
token when one is set), through prometheus-client, kept by the HTTP process:

- nmt_requests_total{route, status}: answered requests of the translating routes;
- nmt_request_seconds{route}: their latency, a histogram;
- nmt_requests_in_flight{route}: accepted and not yet answered (queued or decoding);
- nmt_request_texts{route}: texts (a file's segments) per admitted request, a histogram;
- nmt_characters_total: characters of the texts translated (a file's text, not its bytes).
And from the model workers, where the batches are made:
- nmt_batch_requests, nmt_batch_lines: requests and lines per decoded batch, histograms.
LitServe's model workers are processes of their own: they write these to files in a folder
(`PROMETHEUS_MULTIPROC_DIR`, prometheus-client's multiprocess mode, set for them by
`share_worker_metrics`) that the HTTP process reads at each scrape. The CTranslate2 server
decodes in the HTTP process, into `WORKER_REGISTRY` directly.
"""

from __future__ import annotations

import atexit
import hmac
import os
import shutil
import tempfile
import time
from functools import cache

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.multiprocess import MultiProcessCollector

TEXTS_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
LINES_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
WORKER_REGISTRY = CollectorRegistry()  # the batch histograms where decoding is in-process
MULTIPROCESS = "PROMETHEUS_MULTIPROC_DIR"


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nmt_requests", "Answered requests", ["route", "status"], registry=self.registry
        )
        self.seconds = Histogram(
            "nmt_request_seconds", "Request latency", ["route"], registry=self.registry
        )
        self.in_flight = Gauge(
            "nmt_requests_in_flight", "Requests not yet answered", ["route"], registry=self.registry
        )
        self.texts = Histogram(
            "nmt_request_texts",
            "Texts per request",
            ["route"],
            buckets=TEXTS_BUCKETS,
            registry=self.registry,
        )
        self.characters = Counter(
            "nmt_characters", "Characters sent to /translate", registry=self.registry
        )


class BatchMetrics:
    """What a model worker records of each batch it decodes."""

    def __init__(self):
        # in a worker process started with MULTIPROCESS set, values go to its files instead;
        # prometheus-client reads it on import, which a forked worker's server did before
        # setting it: read again
        values.ValueClass = values.get_value_class()
        self.requests = Histogram(
            "nmt_batch_requests",
            "Requests per decoded batch",
            buckets=TEXTS_BUCKETS,
            registry=WORKER_REGISTRY,
        )
        self.lines = Histogram(
            "nmt_batch_lines",
            "Lines per decoded batch",
            buckets=LINES_BUCKETS,
            registry=WORKER_REGISTRY,
        )

    def observe(self, requests: int, lines: int) -> None:
        self.requests.observe(requests)
        self.lines.observe(lines)


@cache
def batch_metrics() -> BatchMetrics:
    """This process's one BatchMetrics (a registry holds each name once)."""
    return BatchMetrics()


def share_worker_metrics() -> None:
    """Make the model worker processes started from now on write their batch metrics to a
    new folder the /metrics page reads; removed at exit. This process keeps its values in
    memory (prometheus-client reads the variable on import; BatchMetrics reads it again)."""
    folder = tempfile.mkdtemp(prefix="nmt-metrics-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ[MULTIPROCESS] = folder


def worker_metrics() -> bytes:
    """The model workers' metrics in Prometheus' text format, from their files or, where the
    decoding is in-process, from WORKER_REGISTRY."""
    folder = os.environ.get(MULTIPROCESS)
    if folder is None:
        return generate_latest(WORKER_REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)
    return generate_latest(registry)


class MetricsGate:
    """ASGI middleware: counts the requests of `routes` into `metrics`, around the door (it
    counts what the door refuses too); the texts and characters of an admitted request are
    read from what the door left in the scope, so the body is not read again."""

    def __init__(self, app, *, metrics: Metrics, routes: dict):
        # the door's own table of translating routes (filled in as they are added)
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or scope["method"] != "POST" or path not in self.routes:
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        m = self.metrics
        m.in_flight.labels(path).inc()
        start = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            m.in_flight.labels(path).dec()
            m.requests.labels(path, str(status)).inc()
            m.seconds.labels(path).observe(time.perf_counter() - start)
            admitted = scope.get("nmt")
            if admitted is not None:
                m.texts.labels(path).observe(len(admitted.plan.segments))
                if status == 200:
                    m.characters.inc(admitted.plan.characters)


def add_metrics(app: FastAPI, metrics: Metrics, token: str | None) -> None:
    @app.get("/metrics", include_in_schema=False)
    async def metrics_page(request: Request) -> Response:
        if token is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").encode()
            if not hmac.compare_digest(given, token.encode()):
                return JSONResponse({"detail": "the metrics need their token"}, status_code=401)
        page = generate_latest(metrics.registry) + worker_metrics()
        return Response(page, media_type=CONTENT_TYPE_LATEST)
