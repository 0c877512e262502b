"""Who may translate, and how much: API keys and rate limits, off unless configured.

An ASGI middleware in front of the routes that translate (POST /translate, /translate_file,
/libretranslate/translate and /detect):
- keys (`api_keys_file`: one per line, `#` comments): a request names its key as
  `Authorization: Bearer KEY` or, as LibreTranslate's clients do, an `api_key` field. None
  given: 401; a wrong one: 403. Each given key is compared with every key in constant time
  (hmac.compare_digest, no early exit), and keys are never logged (a limit names a key by
  the first 8 hex digits of its SHA-256).
- limits (`limit_requests`, `limit_chars`: "60/minute", "100000/hour", the `limits`
  library's notation): per key where the server has keys, else per client address (a key
  that nothing checks would let a client pick a new window per request), in a moving window
  (`limits`' MovingWindowRateLimiter, in memory). Over either: 429 naming the limit, with
  Retry-After in seconds, and counted against none; more characters than a whole window:
  413. Characters are those of the texts, read as the route reads them (a file's bytes).
A route's own requests to /translate (loopback.py) carry a per-server secret header and pass:
they were counted as the request that made them. Errors are one line, in the route's shape
({"error"} under /libretranslate, {"detail"} elsewhere).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from pathlib import Path

from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from nmt.cli import UsageError
from nmt.serving.gate import replaying
from nmt.serving.libretranslate import PREFIX, Refused, fields

GUARDED = ("/translate", "/translate_file", PREFIX + "/translate", PREFIX + "/detect")
INTERNAL = b"x-nmt-internal"


def read_keys(path: str) -> list[bytes]:
    """The keys of an api_keys_file; UsageError (one line) when there are none."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise UsageError(f"api_keys_file={path}: {error.strerror}") from None
    keys = [line.strip().encode() for line in lines if line.strip() and not line.startswith("#")]
    if not keys:
        raise UsageError(f"api_keys_file={path} holds no key")
    return keys


def parse_limit(name: str, text: str | None):
    if not text:
        return None
    try:
        return parse(text)
    except ValueError:
        raise UsageError(f"{name}={text!r}: a rate like 60/minute or 100000/hour") from None


def json_object(body: bytes) -> dict:
    """A JSON object's fields (empty when the body is not one)."""
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


async def body_fields(scope, body: bytes) -> dict:
    """The fields the guarded route of `scope` reads from `body` (empty where it cannot):
    /translate's JSON whatever the content type says (its gate reads it so); a LibreTranslate
    route's JSON or form, urlencoded or multipart; /translate_file's form fields but its file."""
    if scope["path"] == "/translate":
        return json_object(body)
    request = Request(scope, replaying(body, disconnected))
    try:
        if scope["path"].startswith(PREFIX):
            return await fields(request)
        form = await request.form()
        found = {key: value for key, value in form.items() if isinstance(value, str)}
        await form.close()
        return found
    except (Refused, MultiPartException, HTTPException, ValueError):
        return {}


async def disconnected() -> dict:
    return {"type": "http.disconnect"}


def characters(path: str, fields: dict, body: bytes) -> int:
    if path == "/translate_file":
        return len(body)
    texts = fields.get("q" if path.startswith(PREFIX) else "text", "")
    texts = texts if isinstance(texts, list) else [texts]
    return sum(len(t) for t in texts if isinstance(t, str))


class AccessGate:
    """The middleware of the module docstring."""

    def __init__(self, app, *, keys, requests, chars, internal: str, max_body: int):
        self.app, self.keys, self.internal, self.max_body = app, keys, internal.encode(), max_body
        self.limits = [
            (name, item)
            for name, item in (("limit_requests", requests), ("limit_chars", chars))
            if item
        ]
        self.limiter = MovingWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in GUARDED:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if hmac.compare_digest(headers.get(INTERNAL, b""), self.internal):
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0
        while True:  # the body, for the api_key field and the characters (bounded)
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body or not message.get("more_body", False):
                break
        body = b"".join(chunks)
        path = scope["path"]
        fields = await body_fields(scope, body)
        key = self.key(headers, fields)
        refusal = self.check(key, scope, path, fields, body)
        if refusal is not None:
            await self.refuse(send, path, *refusal)
            return
        await self.app(scope, replaying(body, receive, size > self.max_body), send)

    @staticmethod
    def key(headers: dict, fields: dict) -> bytes | None:
        bearer = headers.get(b"authorization", b"")
        if bearer[:7].lower() == b"bearer ":
            return bearer[7:].strip()
        given = fields.get("api_key")
        return given.encode() if isinstance(given, str) and given else None

    def check(self, key, scope, path, fields, body) -> tuple | None:
        """(status, message, headers) of a refusal, or None."""
        if self.keys is not None:
            if key is None:
                return 401, "an API key is required: Authorization: Bearer KEY (or api_key)", []
            known = False
            for candidate in self.keys:  # every key compared: no early exit
                known |= hmac.compare_digest(key, candidate)
            if not known:
                return 403, "invalid API key", []
        if self.keys is not None:  # a key checked above; without keys, any name would do
            who = "key " + hashlib.sha256(key).hexdigest()[:8]
        else:
            who = "address " + (scope.get("client") or ("unknown",))[0]
        costs = {"limit_requests": 1, "limit_chars": max(characters(path, fields, body), 1)}
        for name, item in self.limits:
            if costs[name] > item.amount:
                return 413, f"{costs[name]} characters: over {name}={item} at once", []
            if not self.limiter.test(item, who, cost=costs[name]):
                reset = self.limiter.get_window_stats(item, who).reset_time
                wait = max(1, math.ceil(reset - time.time()))
                message = f"over {name}={item} for this {who.split()[0]}: retry in {wait} s"
                return 429, message, [(b"retry-after", str(wait).encode())]
        for name, item in self.limits:  # counted once every limit lets it through
            self.limiter.hit(item, who, cost=costs[name])
        return None

    async def refuse(self, send, path: str, status: int, message: str, headers: list) -> None:
        field = "error" if path.startswith(PREFIX) else "detail"
        body = json.dumps({field: message}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
