"""The one door of the routes that translate: POST /translate, /translate_file,
/libretranslate/translate_file, /libretranslate/translate and /libretranslate/detect. Every
request passes it, in this order, before any costly work:
1. its body is read once, counted while it streams: past its route's limit (max_body_bytes,
   or max_file_bytes and a form's overhead for a file) it is a 413 at once, and the rest is
   read and dropped, never kept (a lingering close: `refuse`); past the bytes all bodies in
   flight may hold together (max_bodies_bytes, until their answers are sent) a 503;
2. its route's reader (`Reader`) turns the body into the route's request (422 for a
   malformed body);
3. its key is checked (401, 403: access.py), then its Job built (a request's glossary);
4. the job is checked against the limits (nmt.jobs.check, in a worker thread: parsing a
   document is CPU work, and the event loop only waits): 413, 415 or 422 naming the rule;
5. its requests and characters (a file's text, not its bytes) are counted against the rate
   limits (429). A refusal counts against limit_requests of the client's address, checked
   before step 1: refused requests too are bounded in the parsing they cost.
The route then finds what was read and checked in `scope["nmt"]` (an `Admitted`) and parses
nothing again. Refusals are one line in the route's shape: {"error"} under /libretranslate,
{"detail"} elsewhere; none is logged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from nmt.jobs.check import Plan, check
from nmt.jobs.job import Job, JobError, Limits
from nmt.serving.access import Access, TooManyRefused
from nmt.translation.sentences import SentenceSplitter

LIBRETRANSLATE = "/libretranslate"
FORM_OVERHEAD = 64 << 10  # a file's multipart form: its boundaries and other fields
LINGER_SECONDS = 10.0  # after a 413 for its size, a body is read this long (20 MB at 2 MB/s)
LINGER_BYTES = 64 << 20  # and this far; a client still sending after either may see a reset


@dataclass
class Asked:
    """What a reader made of a body: the route's own request (its fields), the job (or how
    to build it, called after the key check in a thread: a request's glossary is merged and
    lemmatised there, never for a client the key refuses, nor on the event loop), and the
    API key named in the body (LibreTranslate's `api_key`, /translate's too)."""

    request: object
    job: Job | Callable[[], Job]
    key: str | None = None


@dataclass
class Admitted:
    """What the door hands its route in scope["nmt"]: the request and its checked job."""

    request: object
    plan: Plan


# (body, content type) -> Asked, raising JobError for a malformed body
Reader = Callable[[bytes, str], Awaitable[Asked]]


@dataclass
class Route:
    reader: Reader
    max_body: int  # bytes
    setting: str  # the setting that bounds it, for the 413


class Door:
    """ASGI middleware: the steps of the module docstring for the POST routes in `routes`."""

    def __init__(
        self,
        app,
        *,
        routes: dict[str, Route],
        limits: Limits,
        access: Access | None,
        body_seconds: float = 30.0,
        max_bodies: int = 256 << 20,
        splitter: SentenceSplitter | None = None,
    ):
        self.app, self.routes, self.limits, self.access = app, routes, limits, access
        self.body_seconds = body_seconds
        self.bodies = Bodies(max_bodies)
        self.splitter = splitter  # the workers' (segment_max_words): the search priced per sentence

    async def __call__(self, scope, receive, send) -> None:
        route = self.routes.get(scope.get("path", "")) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        held = Held(self.bodies)
        try:
            await self.answer(scope, receive, send, route, held)
        finally:
            held.release()

    async def answer(self, scope, receive, send, route: Route, held: Held) -> None:
        """The module's steps, then the route, for one request; its body's bytes in `held`."""
        headers = dict(scope["headers"])
        shape = "error" if scope["path"].startswith(LIBRETRANSLATE) else "detail"
        bearer = headers.get(b"authorization", b"")
        key = bearer[7:].strip() if bearer[:7].lower() == b"bearer " else None
        address, body = client_address(scope), None
        try:
            if self.access is not None:  # before a byte of the body
                await run_in_threadpool(self.access.check_refusals, address)
                if key is not None:
                    self.access.check_key(key)
            body = await read_body(headers, receive, route, self.body_seconds, held)
            if body is None:  # the client left before sending it all
                return
            content_type = headers.get(b"content-type", b"").decode("latin-1")
            asked = await route.reader(body, content_type)
            key = key or (asked.key.encode() if asked.key else None)
            plan = await run_in_threadpool(self.admit, asked.job, key, address)
        except JobError as error:
            if self.access is not None and not isinstance(error, TooManyRefused):
                await run_in_threadpool(self.access.refused, address)
            unread = receive if body is None else None  # a body not read to its end
            extra = getattr(error, "headers", [])
            await refuse(send, error.status, {shape: str(error)}, unread, extra)
            return
        scope["nmt"] = Admitted(asked.request, plan)  # the same scope the route gets
        if scope["path"] == "/translate":  # JSON, whatever the client called it (curl -d)
            kept = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope["headers"] = [*kept, (b"content-type", b"application/json")]
        await self.app(scope, replaying(body, receive), send)

    def admit(self, job: Job | Callable[[], Job], key: bytes | None, address: str) -> Plan:
        """Steps 3 to 5 (in a thread: building a job's glossary, a document's parsing and a
        Redis store's answers take time)."""
        if self.access is not None:
            self.access.check_key(key)
        plan = check(job() if callable(job) else job, self.limits, self.splitter)
        if self.access is not None:
            self.access.admit(key, address, plan.characters)
        return plan


async def read_form(body: bytes, content_type: str, max_files: int, status: int):
    """A form body (urlencoded or multipart, its file parts spooled within the body's bound)
    as Starlette's FormData; JobError `status` for a body that is no such form."""
    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", content_type.encode())],
    }
    try:
        return await Request(scope, replaying(body, None)).form(max_files=max_files, max_fields=64)
    except (MultiPartException, ValueError, AssertionError) as error:
        raise JobError(status, f"the body is not a form: {error}") from None


def check_unicode(fields: dict, status: int) -> None:
    """JobError `status` (one line) for a field holding text that is no Unicode: a lone
    surrogate, which a JSON escape ("\\ud800") or a form's other charset (utf-7) can make,
    and which no UTF-8 answer, log line or header can carry."""
    for name, value in fields.items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise JobError(status, f"{name}: a lone surrogate is no text") from None


def client_address(scope) -> str:
    return (scope.get("client") or ("unknown",))[0]


class BodyTooBig(JobError):
    """A 413 (or a 503, 408) raised before the body has been read to its end."""


class Bodies:
    """The bytes of the bodies being read or answered now, all requests together, under a
    budget: what slow or many clients can make the server hold is bounded by a setting."""

    def __init__(self, budget: int):
        self.budget, self.held = budget, 0

    def check(self, size: int) -> None:
        if self.held + size > self.budget:
            busy = BodyTooBig(
                503, f"the bodies in flight would pass max_bodies_bytes={self.budget}: try again"
            )
            busy.headers = [(b"retry-after", b"1")]
            raise busy


class Held:
    """One request's share of `Bodies`, given back once its answer is sent."""

    def __init__(self, bodies: Bodies):
        self.bodies, self.size = bodies, 0

    def take(self, size: int) -> None:
        self.bodies.check(size)
        self.bodies.held += size
        self.size += size

    def release(self) -> None:
        self.bodies.held -= self.size
        self.size = 0


async def read_body(
    headers: dict, receive, route: Route, seconds: float = 30.0, held: Held | None = None
) -> bytes | None:
    """The whole body, or BodyTooBig as soon as it passes the route's limit or the bodies'
    budget (`held`; Content-Length tells first where it is given), or a 408 once it has taken
    `seconds` to arrive; None if the client left."""
    limit = route.max_body
    too_big = BodyTooBig(413, f"the body exceeds {route.setting}={limit}")
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_big
    if held is not None and length is not None and length.isdigit():
        held.bodies.check(int(length))
    chunks, size = [], 0
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                message = await receive()
        except TimeoutError:
            raise BodyTooBig(
                408, f"the body took over body_seconds={seconds:g} to arrive"
            ) from None
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            raise too_big
        if held is not None:
            held.take(len(chunks[-1]))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive):
    """An ASGI receive that gives `body`, already read, first, then what `receive` gives."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def refuse(send, status: int, answer: dict, unread=None, extra: list | None = None) -> None:
    """A JSON error response. Given `unread`, the receive of a body not read to its end, the
    answer is sent, then the rest of the body read and dropped before the response ends and
    the connection closes, as nginx's lingering close does: closing on a client that is still
    sending resets the connection, and most clients then report the reset, not the answer."""
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
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
