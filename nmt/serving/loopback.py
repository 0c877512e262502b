"""A request to this server's own POST /translate over the loopback address: how the file
route (files.py) and the LibreTranslate API (libretranslate.py) translate, so they share the
batching, the limits and the queue of every other request."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from fastapi import HTTPException

from nmt.config import ServeConfig


def post_translate(cfg: ServeConfig, body: dict, internal: str) -> dict:
    """The JSON answer of POST /translate to `body`; its refusal as an HTTPException with
    the same status and one-line detail. `internal`: the server's secret that lets its own
    calls past the keys and limits (access.py), which the calling request already passed."""
    host = "[::1]" if cfg.host == "::" else "127.0.0.1"
    request = urllib.request.Request(
        f"http://{host}:{cfg.port}/translate",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-NMT-Internal": internal},
    )
    try:
        with urllib.request.urlopen(request, timeout=cfg.timeout + 10) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as error:
        detail = json.loads(error.read() or b"{}").get("detail", error.reason)
        raise HTTPException(error.code, detail) from None
