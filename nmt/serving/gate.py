"""The front door of `POST /translate`: every request is checked before it is queued for the
model, and refused with one line, {"detail": "..."}:
- 413 for a body over max_body_bytes (the rest is read and dropped, not parsed), more than
  max_lines lines, or a line or prefix over max_line_chars characters; the message names the
  limit;
- 422 for a body that is not JSON, a missing or mistyped field, an unknown search setting or
  one out of bounds, a setting its strategy ignores, or a prefix not in the shape of the text.
A request that passes goes on to LitServe as JSON, which parses the same bytes again (that is
what its OpenAPI schema describes). Whether its search is a search as a whole (nbest within the
beam, say) the engine checks, once (`nmt.serving.api` answers 422).
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress
from dataclasses import dataclass

from nmt.decoding.settings import DecodeConfig
from nmt.serving.schema import RequestError, TranslateRequest, parse_request, refused_fields

log = logging.getLogger("nmt.serve")

LINGER_SECONDS = 10.0  # after a 413 for its size, a body is read this long (20 MB at 2 MB/s)
LINGER_BYTES = 64 << 20  # and this far; a client still sending after either may see a reset


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    max_lines: int
    max_line_chars: int


def check_request(
    request: TranslateRequest, limits: Limits, default: DecodeConfig, server_format: str = "text"
):
    """Refuse (RequestError) a parsed request over the limits, with a bad prefix, or with a
    search setting its strategy ignores."""
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
    refused = refused_fields(request, default)
    if refused:
        raise RequestError(422, refused)
    if (request.format or server_format) == "html":
        nbest = request.search.nbest if request.search and request.search.nbest else default.nbest
        for name, asked in (
            ("prefix", request.prefix is not None),
            ("scores", request.scores),
            ("alignments", request.alignments),
            ("search.nbest", nbest > 1),
        ):
            if asked:
                raise RequestError(422, f"format html answers with documents alone: drop {name}")


class RequestGate:
    """ASGI middleware checking POST `path` (see the module docstring)."""

    def __init__(self, app, *, path: str, limits: Limits, default: DecodeConfig, format: str):
        self.app, self.path, self.limits, self.default = app, path, limits, default
        self.format = format  # the server's format=, for requests that name none

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await self.read_body(scope, receive)
            if body is None:  # the client left before sending it all
                return
            check_request(parse_request(body), self.limits, self.default, self.format)
        except RequestError as error:
            unread = receive if isinstance(error, BodyTooBig) else None  # the rest of the body
            await refuse(send, error.status, str(error), unread)
            return
        except Exception as error:  # noqa: BLE001 - a bug of ours: still one line, and logged
            log.exception("the request gate failed")
            await refuse(send, 500, f"internal error: {type(error).__name__}")
            return
        replay = replaying(body, receive)
        # The body is JSON whatever the client called it (curl -d says form data).
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
        headers.append((b"content-type", b"application/json"))
        await self.app({**scope, "headers": headers}, replay, send)

    async def read_body(self, scope, receive) -> bytes | None:
        limit = self.limits.max_body_bytes
        too_big = BodyTooBig(413, f"the body exceeds max_body_bytes={limit}")
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


def replaying(body: bytes, receive, more_body: bool = False):
    """An ASGI receive that gives `body`, already read, first, then what `receive` gives."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more_body}
        return await receive()

    return replay


class BodyTooBig(RequestError):
    """A 413 raised before the body has been read to its end."""


async def refuse(send, status: int, message: str, unread=None) -> None:
    """A JSON error response {"detail": message}.

    Given `unread`, the receive of a body not read to its end, the answer is sent, then the
    rest of the body read and dropped before the response ends and the connection closes, as
    nginx's lingering close does: closing on a client that is still sending resets the
    connection, and most clients then report the reset, not the answer."""
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if unread is not None:
        headers.append((b"connection", b"close"))  # what is left past the bounds is never read
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": unread is not None})
    if unread is not None:
        await drain(unread)
        await send({"type": "http.response.body", "body": b""})


async def drain(receive) -> None:
    """Read and drop the rest of a request's body, within LINGER_SECONDS and LINGER_BYTES."""
    dropped = 0
    with suppress(TimeoutError):
        async with asyncio.timeout(LINGER_SECONDS):
            while dropped <= LINGER_BYTES:
                message = await receive()
                dropped += len(message.get("body", b""))
                if not message.get("more_body", False):  # its end, or the client left
                    return
