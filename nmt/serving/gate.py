"""The front door of `POST /translate`: every request is checked before it is queued for the
model, and refused with one line, {"detail": "..."}:
- 413 for a body over max_body_bytes (read no further), more than max_lines lines, or a line
  or prefix over max_line_chars characters; the message names the limit;
- 422 for a body that is not JSON, a missing or mistyped field, an unknown search setting, a
  prefix not in the shape of the text, or search settings that make no valid search.
A request that passes goes on to LitServe as JSON, which parses the same bytes again (that is
what its OpenAPI schema describes). The model never sees a bad request, so no batch fails for one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from nmt.config import DecodeConfig
from nmt.serving.schema import RequestError, TranslateRequest, parse_request, request_search

log = logging.getLogger("nmt.serve")


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_lines: int
    max_line_chars: int


def check_request(request: TranslateRequest, limits: Limits, default: DecodeConfig, backend: str):
    """Refuse (RequestError) a parsed request over the limits or with a bad prefix or search."""
    lines, prefixes = request.lines, request.prefixes
    if len(lines) > limits.max_lines:
        raise RequestError(413, f"{len(lines)} lines: the limit is max_lines={limits.max_lines}")
    if prefixes is not None:
        if isinstance(request.prefix, str) != isinstance(request.text, str) or len(prefixes) != len(
            lines
        ):
            raise RequestError(422, "prefix must have the shape of text: one prefix per line")
    for name, texts in (("line", lines), ("prefix", prefixes or [])):
        for i, text in enumerate(texts):
            if len(text) > limits.max_line_chars:
                raise RequestError(
                    413,
                    f"{name} {i + 1} has {len(text)} characters: the limit is "
                    f"max_line_chars={limits.max_line_chars}",
                )
    request_search(default, backend, request)


class RequestGate:
    """ASGI middleware checking POST `path` (see the module docstring)."""

    def __init__(self, app, *, path: str, limits: Limits, default: DecodeConfig, backend: str):
        self.app, self.path, self.limits = app, path, limits
        self.default, self.backend = default, backend

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await self.read_body(scope, receive)
            if body is None:  # the client left before sending it all
                return
            check_request(parse_request(body), self.limits, self.default, self.backend)
        except RequestError as error:
            await refuse(send, error.status, str(error))
            return
        except Exception as error:  # noqa: BLE001 - a bug of ours: still one line, and logged
            log.exception("the request gate failed")
            await refuse(send, 500, f"internal error: {type(error).__name__}")
            return
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        # The body is JSON whatever the client called it (curl -d says form data).
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        headers.append((b"content-type", b"application/json"))
        await self.app({**scope, "headers": headers}, replay, send)

    async def read_body(self, scope, receive) -> bytes | None:
        limit = self.limits.max_body_bytes
        too_big = RequestError(413, f"the body exceeds max_body_bytes={limit}")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise too_big
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                raise too_big
            if not message.get("more_body", False):
                return b"".join(chunks)


async def refuse(send, status: int, message: str) -> None:
    """A JSON error response {"detail": message}."""
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
