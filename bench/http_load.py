"""HTTP load from its own process: POST ``--events`` JSON events with ``--in-flight`` requests
open at once (httpx, keep-alive connections), then print one JSON line with the rate and the
p50/p99 latency. Used where wrk is not installed, so the client never shares the server's loop.

    python bench/http_load.py URL --events 3000 --in-flight 16 --tag run1 [--header 'K: V']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--tag", default="load")
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    headers["Content-Type"] = "application/json"
    bodies = [
        json.dumps(
            {
                "event_id": f"{args.tag}-{i}",
                "name": "order_placed",
                "contact": {"email": f"c{i % 500}@example.com"},
                "properties": {"total": i},
            }
        ).encode()
        for i in range(args.events)
    ]
    latencies: list[float] = []
    failures: list[str] = []
    retried: list[int] = []
    counter = iter(range(args.events))
    limits = httpx.Limits(max_connections=args.in_flight, max_keepalive_connections=args.in_flight)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            for i in counter:
                started = time.perf_counter()
                try:
                    response = await client.post(args.url, content=bodies[i], headers=headers)
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # A keep-alive connection the server closed: sent again on a new one (the
                    # event id makes a repeat harmless), counted.
                    retried.append(i)
                    response = await client.post(args.url, content=bodies[i], headers=headers)
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code >= 300:
                    failures.append(f"{response.status_code}: {response.text[:200]}")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.in_flight)))
        elapsed = time.perf_counter() - began
    print(
        json.dumps(
            {
                "rate": args.events / elapsed,
                "p50": pct(latencies, 0.5),
                "p99": pct(latencies, 0.99),
                "failures": len(failures),
                "retried": len(retried),
                "first_failure": failures[0] if failures else None,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
