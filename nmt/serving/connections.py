"""What uvicorn's HTTP protocol leaves unbounded, for both servers: how long a connection may
take to send a request's headers, and how many connections one client address may hold.

uvicorn arms its keep-alive timer only after a first answer and cancels it on any byte, so a
connection that sends nothing, or a header a byte every few seconds, is held forever, and a
client that opens hundreds of them holds that many file descriptors. Here:
- a connection must complete a request's headers within `header_seconds` of opening, or of
  its previous answer: else a 408 and it is closed (the door bounds the body: body_seconds);
- a client address may hold `per_client` connections at once; the next is answered 429 and
  closed before a byte of it is read. Proxies named in trusted_proxies are not counted: the
  clients behind one share its address.
uvicorn takes `Guard` as its `http` protocol factory (nmt.serving.server.uvicorn_settings).
"""

from __future__ import annotations

from collections import Counter

from uvicorn.protocols.http.auto import AutoHTTPProtocol


def early_answer(status: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes its connection: `status` ("408 Request Timeout")
    and a one-line JSON body."""
    body = ('{"detail": "' + message + '"}').encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class Guard:
    """The bounds, and the connections each client address holds now (one server's)."""

    def __init__(self, header_seconds: float, per_client: int, exempt: list[str]):
        self.header_seconds, self.per_client = header_seconds, per_client
        self.exempt = frozenset(exempt)
        self.held: Counter[str] = Counter()

    def __call__(self, **uvicorn_arguments) -> GuardedProtocol:
        return GuardedProtocol(self, **uvicorn_arguments)

    def take(self, address: str) -> bool:
        """Count a new connection from `address`; False (not counted) past per_client."""
        if address in self.exempt:
            return True
        if self.held[address] >= self.per_client:
            return False
        self.held[address] += 1
        return True

    def release(self, address: str) -> None:
        if address in self.exempt:
            return
        self.held[address] -= 1
        if self.held[address] <= 0:
            del self.held[address]  # no state kept for a client that has gone


class GuardedProtocol(AutoHTTPProtocol):
    """uvicorn's own protocol (httptools, else h11) with the module's two bounds."""

    def __init__(self, guard: Guard, **uvicorn_arguments):
        super().__init__(**uvicorn_arguments)
        self.guard, self.address, self.header_timer = guard, None, None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        address = self.client[0] if self.client else "unknown"
        if not self.guard.take(address):
            many = f"more than max_client_connections={self.guard.per_client} from one address"
            transport.write(early_answer("429 Too Many Requests", many))
            transport.close()
            return
        self.address = address
        self.arm()

    def arm(self) -> None:
        self.header_timer = self.loop.call_later(self.guard.header_seconds, self.headers_late)

    def headers_late(self) -> None:
        """No request's headers within header_seconds (none under way): a 408, closed."""
        self.header_timer = None
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            late = f"no request within header_seconds={self.guard.header_seconds:g}"
            self.transport.write(early_answer("408 Request Timeout", late))
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.header_timer is not None:
            self.header_timer.cancel()
        if not self.transport.is_closing():
            self.arm()  # the next request's headers, from now

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
        if self.address is not None:
            self.guard.release(self.address)
            self.address = None
        super().connection_lost(exc)
