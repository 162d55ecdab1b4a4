"""What the rate limits cost a request: the same API read with the limits off, in the process and
in Redis, in the same run.

    .venv/bin/python bench/rate_limit_overhead.py [--requests 2000] \\
        [--redis redis://127.0.0.1:6379/0] [--skip-redis]

A fresh SQLite file in a temporary folder holds one workspace and its API key. Three apps share it,
each with a runtime of its own, differing only in their rate limits:

* **off**: every ``RATE_LIMIT_*_BURST`` 0 (no bucket, no headers);
* **in-process**: the embedded default's buckets (no ``REDIS_URL``);
* **Redis**: the server mode's buckets, one Lua script call per request (``REDIS_URL``).

The limits that are on have bursts no run can spend, so every request is allowed and the figure is
the check's cost (taking two tokens, the ``RateLimit-*`` headers), not refusals. ``--requests``
times, one ``GET /api/v1/api-keys`` with the key goes to each app in turn through the ASGI
interface (no sockets: nothing but the app is measured), the order rotating, so that a change in
the machine's load hits every variant alike; each variant's latencies (p50, p90, mean) are
printed, with the p50's difference from **off**.

Then, in the same process, the limiters alone: one ``take`` of a key's and a workspace's bucket,
in the process (20,000 in a row) and in Redis (2,000 in a row, a round trip each).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from cryptography.fernet import Fernet

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.db.session import Database
from app.platform import service
from app.platform.rate_limits import Bucket, InProcessRateLimiter, Limit
from app.platform.rate_limits_redis import RedisRateLimiter
from app.runtime import Runtime
from app.settings import load_settings
from app.web.app import create_app
from app.wiring import assemble

UNSPENDABLE = "1000000000"
LIMITS_OFF = {
    f"RATE_LIMIT_{who}_{kind}_BURST": "0"
    for who in ("KEY", "WORKSPACE")
    for kind in ("READ", "WRITE")
}
LIMITS_ON = {
    f"RATE_LIMIT_{who}_{kind}_BURST": UNSPENDABLE
    for who in ("KEY", "WORKSPACE")
    for kind in ("READ", "WRITE")
}


async def create_key(runtime: Runtime) -> str:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Bench", now=now)
        created = await service.create_workspace(
            uow.session, runtime.secrets, organisation_id=org.id, name="Bench", now=now
        )
        _, key = await service.create_api_key(
            uow.session, workspace_id=created.workspace.id, name="bench", now=now
        )
    return key


async def one_request(client: httpx.AsyncClient, key: str, limited: bool) -> float:
    """Microseconds one request took."""
    started = time.perf_counter()
    response = await client.get("/api/v1/api-keys", headers={"Authorization": f"Bearer {key}"})
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"unexpected answer {response.status_code}: {response.text}")
    if limited != ("ratelimit-limit" in response.headers):
        raise SystemExit("the rate limit headers are not where they should be")
    return elapsed * 1e6


async def takes(limiter: Any, count: int) -> float:
    """Microseconds per ``take`` of a key's and a workspace's bucket."""
    buckets = [
        Bucket("key:1:read", Limit(10**9, 10**6)),
        Bucket("workspace:1:read", Limit(10**9, 10**6)),
    ]
    started = time.perf_counter()
    for _ in range(count):
        verdict = await limiter.take(buckets)
        if verdict is None or not verdict.allowed:
            raise SystemExit(f"the limiter did not allow the request: {verdict}")
    return (time.perf_counter() - started) / count * 1e6


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sweepline-bench-"))
    url = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    await upgrade(url)
    base = {
        "DATABASE_URL": url,
        "ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SESSION_SECRET": "bench-session-secret-0123456789abcdef",
        "KEY_FILE": str(folder / "keys.json"),
        "SMTP_PORT": "1",
        "LOG_LEVEL": "WARNING",
    }
    namespace = f"sweepline-bench-{uuid.uuid4().hex[:8]}"
    variants: dict[str, dict[str, str]] = {
        "off": {**base, **LIMITS_OFF},
        "in-process": {**base, **LIMITS_ON},
    }
    if not args.skip_redis:
        variants["Redis"] = {
            **base,
            **LIMITS_ON,
            "REDIS_URL": args.redis,
            "ARQ_QUEUE_NAME": namespace,
        }
    db: Database | None = None
    runtimes: list[Runtime] = []
    clients: dict[str, httpx.AsyncClient] = {}
    for name, environ in variants.items():
        settings = load_settings(environ)
        db = db or Database(settings.database)
        runtime = assemble(settings, SystemClock(), db=db)
        runtimes.append(runtime)
        clients[name] = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(settings, runtime, background=False)),
            base_url="http://bench",
        )
    key = await create_key(runtimes[0])
    names = list(variants)
    for name in names:  # warm up: connections, caches, the script loaded into Redis
        for _ in range(50):
            await one_request(clients[name], key, name != "off")
    results: dict[str, list[float]] = {name: [] for name in names}
    for n in range(args.requests):
        # Interleaved, the order rotating: a change in the machine's load hits every variant.
        order = names[n % len(names) :] + names[: n % len(names)]
        for name in order:
            results[name].append(await one_request(clients[name], key, name != "off"))
    print(f"{args.requests} GET /api/v1/api-keys per variant, interleaved")
    print(f"{'limits':<12} {'p50 µs':>8} {'vs off':>8} {'p90 µs':>8} {'mean µs':>8}")
    off = statistics.median(results["off"])
    for name in names:
        values = sorted(results[name])
        p50 = statistics.median(values)
        p90 = values[int(len(values) * 0.9)]
        print(
            f"{name:<12} {p50:>8.0f} {p50 - off:>+8.0f} {p90:>8.0f} "
            f"{statistics.fmean(values):>8.0f}"
        )
    print("\none take of two buckets (a key's and a workspace's)")
    in_process = InProcessRateLimiter(time.monotonic)
    print(f"{'in-process':<12} {await takes(in_process, 20_000):>8.1f} µs")
    if not args.skip_redis:
        redis_limiter = RedisRateLimiter(
            args.redis, namespace, timeout=2.0, monotonic=time.monotonic
        )
        try:
            await takes(redis_limiter, 50)
            print(f"{'Redis':<12} {await takes(redis_limiter, 2_000):>8.1f} µs")
        finally:
            await redis_limiter.aclose()

    for client in clients.values():
        await client.aclose()
    for runtime in runtimes:
        await runtime.resources.aclose()
        await runtime.queue.aclose()
    if db is not None:
        await db.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--skip-redis", action="store_true")
    asyncio.run(main(parser.parse_args()))
