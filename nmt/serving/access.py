"""Who may translate, and how much: API keys and rate limits, off unless configured.

The door (door.py) asks `Access` twice for each request of a translating route:
- `check_key`, with keys (`api_keys_file`: one per line; blank lines, `#` comments and a
  byte-order mark ignored): a request names its key as `Authorization: Bearer KEY` or, as
  LibreTranslate's clients do, an `api_key` field (JSON or form, on every translating route).
  None given: 401; a wrong one: 403. Each given key is compared with every key in constant
  time (hmac.compare_digest, no early exit), and keys are never logged (a limit names a key
  by the first 8 hex digits of its SHA-256).
- `admit`, once the job is checked: limits (`limit_requests`, `limit_chars`: "60/minute",
  "100000/hour", the `limits` library's notation), per key where the server has keys, else
  per client address (a key that nothing checks would let a client pick a new window per
  request), in a sliding window of two counters per key kept in `limits_storage` (memory,
  or Redis shared by the server's replicas: limit_storage.py), which expire with it. Over
  either: 429 naming the limit, with Retry-After in seconds, and counted against none; more
  characters than a whole window: 413. Characters are the text the job translates (a file's
  text, not its bytes).
- `refused` counts each refusal against `limit_refused` (limit_requests unless set) in a
  window of the client's address of its own, and `check_refusals` answers 429 before the
  body is read once it is full: a client that only sends what is refused (bad keys,
  malformed bodies, limits passed) is held to it too, without counting against anyone's
  admitted requests.
- A key sent in the Authorization header is checked before the body is read.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import time
from pathlib import Path

from limits import parse
from limits.strategies import SlidingWindowCounterRateLimiter

from nmt.errors import UsageError
from nmt.jobs.job import JobError

log = logging.getLogger("nmt.serve")


def read_keys(path: str) -> list[bytes]:
    """The keys of an api_keys_file; UsageError (one line) when there are none."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark is no key
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8"
        raise UsageError(f"api_keys_file={path}: {reason}") from None
    keys = [line.strip() for line in text.splitlines()]
    keys = [key.encode() for key in keys if key and not key.startswith("#")]
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


class Refused(JobError):
    """A refusal with headers of its own (Retry-After)."""

    def __init__(self, status: int, message: str, headers: list | None = None):
        super().__init__(status, message)
        self.headers = headers or []


class TooManyRefused(Refused):
    """A 429 for an address whose refused requests fill limit_refused (not counted again)."""


class Access:
    """The keys and limits of the module docstring; `storage`: the limits library's."""

    def __init__(self, keys: list[bytes] | None, requests, chars, storage, refused=None):
        self.keys, self.refused_limit = keys, refused or requests  # limit_refused's default
        self.limits = [
            (name, item)
            for name, item in (("limit_requests", requests), ("limit_chars", chars))
            if item
        ]
        # a sliding window of two counters a key (O(keys), expiring with the window), not a
        # moving window's entry per unit charged (per character of limit_chars)
        self.limiter = SlidingWindowCounterRateLimiter(storage)

    def check_key(self, key: bytes | None) -> None:
        if self.keys is None:
            return
        if key is None:
            raise Refused(401, "an API key is required: Authorization: Bearer KEY (or api_key)")
        known = False
        for candidate in self.keys:  # every key compared: no early exit
            known |= hmac.compare_digest(key, candidate)
        if not known:
            raise Refused(403, "invalid API key")

    def check_refusals(self, address: str) -> None:
        """TooManyRefused (429) once the address's refused requests fill limit_refused: it
        is answered before its body is read, parsed or checked."""
        item = self.refused_limit
        who = "refused address " + address
        if item is not None and not self.guarded(lambda: self.limiter.test(item, who)):
            raise self.too_many(TooManyRefused, "limit_refused", item, who)

    def too_many(self, kind: type[Refused], name: str, item, who: str) -> Refused:
        """The 429 for `who` over the limit `name`, saying in Retry-After when its window
        lets it in again."""
        reset = self.limiter.get_window_stats(item, who).reset_time
        wait = max(1, math.ceil(reset - time.time()))
        message = f"over {name}={item} for this {who.split()[-2]}: retry in {wait} s"
        return kind(429, message, [(b"retry-after", str(wait).encode())])

    def refused(self, address: str) -> None:
        """Count a refused request of `address` against limit_refused (its own window)."""
        item = self.refused_limit
        if item is not None:
            self.guarded(lambda: self.limiter.hit(item, "refused address " + address))

    def guarded(self, call):
        """The store's answer; 503 (one line) where the store (Redis) failed, not the client."""
        try:
            return call()
        except Refused:  # the client's own refusal
            raise
        except Exception as error:  # noqa: BLE001
            log.warning("the rate-limit store failed: %s", type(error).__name__)
            raise Refused(503, "the rate limits cannot be counted now: try again") from None

    def admit(self, key: bytes | None, address: str, characters: int) -> None:
        """Count a request of `characters` against every limit, or refuse it counting none."""
        if self.keys is not None:  # a key checked above; without keys, any name would do
            who = "key " + hashlib.sha256(key).hexdigest()[:8]
        else:
            who = "address " + address
        costs = {"limit_requests": 1, "limit_chars": max(characters, 1)}
        self.guarded(lambda: self.count(who, costs))

    def count(self, who: str, costs: dict) -> None:
        for name, item in self.limits:
            if costs[name] > item.amount:
                raise Refused(413, f"{costs[name]} characters: over {name}={item} at once")
            if not self.limiter.test(item, who, cost=costs[name]):
                raise self.too_many(Refused, name, item, who)
        for name, item in self.limits:  # counted once every limit lets it through
            self.limiter.hit(item, who, cost=costs[name])
