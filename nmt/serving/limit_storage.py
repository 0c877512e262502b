"""Where the server's rate limits are counted (`limits_storage=`): in this process
(memory://), or in a Redis store (redis://host:port/db, rediss:// with TLS) that every
replica behind one load balancer names, so that each key's requests are counted once.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from limits.errors import ConfigurationError
from limits.storage import Storage, storage_from_string

from nmt.errors import UsageError

SCHEMES = ("memory", "redis", "rediss")
REDIS_TIMEOUT_S = 2.0  # to connect to the store, and for each of its answers


def limit_storage(uri: str) -> Storage:
    """The limits Storage `uri` names, once it has answered: a UsageError naming
    `limits_storage=` (one line, any password hidden) for another scheme, a malformed URI
    or a store that does not answer."""
    setting = f"limits_storage={hide_password(uri)}"
    scheme = urlsplit(uri).scheme
    if scheme not in SCHEMES:
        raise UsageError(f"{setting}: use memory:// or redis://host:port/db (rediss:// for TLS)")
    options = {}
    if scheme != "memory":
        options = {"socket_connect_timeout": REDIS_TIMEOUT_S, "socket_timeout": REDIS_TIMEOUT_S}
    try:
        storage = storage_from_string(uri, **options)
    except (ConfigurationError, ValueError) as error:
        raise UsageError(f"{setting}: {error}") from None
    if not storage.check():
        raise UsageError(f"{setting} does not answer: is a redis-server listening there?")
    return storage


def hide_password(uri: str) -> str:
    """`uri` as it may be shown in a log: redis://:secret@host -> redis://:***@host."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
