"""How a route that runs a checked job (a file, a LibreTranslate request) has its texts
translated by the server's model, in the batches of every other request.

`Submit`: a /translate request (a dict) in, its answer (a dict) out, or JobError with the
refusal's status. The CTranslate2 server decodes in its own process and submits to its
batcher directly (InProcessServer.submit); LitServe's model workers are other processes, so
its routes hop to its own POST /translate over the loopback address (`hop`), with the
server's secret: the door lets the hop through unchecked, since the job it carries was checked
whole. `translator` turns a Submit into nmt.jobs.run's Translator.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from nmt.config import ServeConfig
from nmt.inference.alignment import parse_pharaoh
from nmt.jobs.job import Job, JobError
from nmt.jobs.run import Translator
from nmt.serving.door import INTERNAL
from nmt.translation.translated import Translation

Submit = Callable[[dict], dict]
# never through a proxy: users' texts and the secret stay on this machine
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def hop(cfg: ServeConfig, internal: str) -> Submit:
    """Submit through this server's own POST /translate (LitServe)."""
    host = "[::1]" if cfg.host == "::" else "127.0.0.1"

    def submit(body: dict) -> dict:
        request = urllib.request.Request(
            f"http://{host}:{cfg.port}/translate",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", INTERNAL.decode(): internal},
        )
        try:
            with DIRECT.open(request, timeout=cfg.timeout + 10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            detail = json.loads(error.read() or b"{}").get("detail", error.reason)
            raise JobError(error.code, str(detail)) from None

    return submit


def translator(submit: Submit, job: Job, max_lines: int) -> Translator:
    """A Translator that submits the job's texts, max_lines a request, all at once."""

    def translate(texts, numbers, prefixes, alignments, scores) -> list[Translation]:
        def body(chunk: list[str]) -> dict:
            return {
                "text": chunk,
                "alignments": alignments,
                "format": "text",
                "segment": job.segment,
                "protect": list(job.protect.kinds),
                "protect_patterns": list(job.protect.patterns),
                "numbers": job.protect.numbers,
            }

        chunks = [texts[i : i + max_lines] for i in range(0, len(texts), max_lines)]
        with ThreadPoolExecutor(max(1, min(len(chunks), 16))) as pool:
            replies = list(pool.map(lambda chunk: submit(body(chunk)), chunks))
        found = []
        for chunk, reply in zip(chunks, replies, strict=True):
            links = reply.get("alignments") or [""] * len(chunk)
            for text, out, pairs in zip(chunk, reply["translation"], links, strict=True):
                alignment = [parse_pharaoh(pairs)] if alignments else None
                found.append(Translation(text, alternatives=[(out, 0.0)], alignments=alignment))
        return found

    return translate
