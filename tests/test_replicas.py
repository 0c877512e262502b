"""Rate limits shared by replicas (nmt/serving/limit_storage.py): two storages on one real
redis-server, as two server processes would hold, count one key once; a store that does not
answer is refused at start-up in one line naming limits_storage.

Needs Debian's `redis-server` (.ci/run installs it): skipped without it, failed instead when
NMT_REQUIRE_REDIS=1."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import http_post
from limits import parse
from limits.strategies import MovingWindowRateLimiter
from test_serve import serving

from nmt.errors import UsageError
from nmt.serving.launch import free_port
from nmt.serving.limit_storage import limit_storage

pytestmark = pytest.mark.xdist_group("serve")

KEY = "k-replicas-0123456789abcdef"


@pytest.fixture(scope="module")
def redis_uri(tmp_path_factory) -> Iterator[str]:
    """A redis-server of its own on 127.0.0.1 and a free port, with nothing saved to disk;
    stopped at the end."""
    server = shutil.which("redis-server")
    if server is None:
        missing = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("NMT_REQUIRE_REDIS") == "1":
            pytest.fail(f"{missing}, and NMT_REQUIRE_REDIS=1 asks for it")
        pytest.skip(missing)
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    args = ["--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    with open(folder / "redis.log", "wb") as log:
        process = subprocess.Popen([server, *args], cwd=folder, stdout=log, stderr=log)
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        deadline = time.monotonic() + 20
        while not answers(client):
            assert process.poll() is None, (folder / "redis.log").read_text()
            assert time.monotonic() < deadline, "redis-server did not answer in 20 s"
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def alternated(limiters: list[MovingWindowRateLimiter], who: str, n: int) -> list[bool]:
    """`n` hits of 10/day for `who`, taking turns over `limiters`."""
    limit = parse("10/day")
    return [limiters[i % len(limiters)].hit(limit, who) for i in range(n)]


def test_two_replicas_count_one_key_once_in_redis(redis_uri):
    replicas = [MovingWindowRateLimiter(limit_storage(redis_uri)) for _ in range(2)]
    assert alternated(replicas, "client-a", 16) == [True] * 10 + [False] * 6
    assert replicas[1].hit(parse("10/day"), "client-b")  # another key counts on its own


def test_in_memory_each_replica_counts_alone():
    """What redis is for: memory:// gives each replica a count of its own (8 hits each)."""
    replicas = [MovingWindowRateLimiter(limit_storage("memory://")) for _ in range(2)]
    assert alternated(replicas, "client-a", 16) == [True] * 16


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("redis://127.0.0.1:{port}/0", "limits_storage=redis://127.0.0.1:{port}/0 does not answer"),
        ("redis://:s3cret@127.0.0.1:{port}", "limits_storage=redis://:***@127.0.0.1:{port} does"),
        ("memcached://127.0.0.1:{port}", "use memory:// or redis://host:port/db"),
        ("redis://127.0.0.1:{port}?db=x", "Invalid value for 'db'"),
    ],
)
def test_a_store_that_cannot_count_is_refused_in_one_line(uri, message):
    port = free_port()  # nothing listens there
    with pytest.raises(UsageError) as refused:
        limit_storage(uri.format(port=port))
    assert message.format(port=port) in str(refused.value)
    assert "\n" not in str(refused.value) and "s3cret" not in str(refused.value)


def test_two_servers_behind_one_store_refuse_the_eleventh_request(
    redis_uri, ct2_int8: Path, overfit_pairs, tmp_path
):
    """Two nmt.serve processes with the same keys file and limits_storage: 16 requests of one
    key, alternated between them, get 10 answers and 6 refusals (10/day, counted once). On
    the CTranslate2 backend, whose server starts no worker processes: the limits are the
    door's, before either engine."""
    keys = tmp_path / "keys.txt"
    keys.write_text(KEY + "\n")
    args = [
        "backend=ctranslate2",
        "workers=1",
        f"api_keys_file={keys}",
        "limit_requests=10/day",
        f"limits_storage={redis_uri}",
    ]
    headers = {"Authorization": f"Bearer {KEY}"}
    body = {"text": overfit_pairs[0][0]}
    with serving(ct2_int8, *args) as first, serving(ct2_int8, *args) as second:
        codes = [
            http_post(url + "/translate", json=body, headers=headers, timeout=60).status_code
            for url in [first, second] * 8
        ]
    assert codes == [200] * 10 + [429] * 6
