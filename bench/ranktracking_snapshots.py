"""Bytes per stored results page (RT-70), against the provider's own answer for the same page.

For N keywords the simulator builds a 100-result page (seeded features, and every fifth keyword
with an AI Overview, a local pack, videos and "people also ask"), decoded by the production client
code and stored as the engine stores it. Printed: the provider's ``task_get`` JSON of the page (the
baseline: what storing the answer as received would cost), the snapshot as plain JSON, and the
stored (compressed) snapshot — mean, median and largest — and the time to encode and decode one.

Run: ``.venv/bin/python bench/ranktracking_snapshots.py [N]``
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import msgspec
from msgspec.structs import replace

from app.engines.ranktracking.explain import snapshot
from app.integrations.serp import SerpTaskResult
from app.integrations.serp.results import serp_result
from app.integrations.serp.wire import WireSerpResult, decode_envelope
from app.sandbox.serp import SerpSimulator


def _page(sim: SerpSimulator, keyword: str) -> bytes:
    """The provider's ``task_get`` answer for ``keyword`` (desktop, depth 100), as sent."""
    posted, _ = sim.post_tasks(
        "serp",
        [{"keyword": keyword, "location_code": 2840, "language_code": "en", "depth": 100}],
    )
    answer, _ = sim.task_get("serp", posted["tasks"][0]["id"])
    return msgspec.json.encode(answer)


_WORDS = [
    "best",
    "cheap",
    "guide",
    "review",
    "buy",
    "sale",
    "women",
    "men",
    "running",
    "leather",
    "summer",
    "size",
    "2026",
    "top",
]


def _diverse(result: SerpTaskResult, rng: random.Random) -> SerpTaskResult:
    """The same page with varied paths (2–4 segments, a numeric id, a query string on some), as
    real result pages have; the simulator's paths repeat the keyword and compress too well."""

    def path() -> str:
        parts = ["-".join(rng.sample(_WORDS, rng.randint(2, 5))) for _ in range(rng.randint(2, 4))]
        tail = f"?ref={rng.randint(1, 99999)}" if rng.random() < 0.2 else ""
        return "/".join(parts) + f"-{rng.randint(1000, 999999)}" + tail

    items = [
        replace(i, url=f"https://{i.domain}/{path()}") if i.url and i.domain else i
        for i in result.items
    ]
    return replace(result, items=items)


def main(n: int) -> None:
    sim = SerpSimulator(seed=7)
    provider: list[int] = []
    plain: list[int] = []
    stored: list[int] = []
    diverse: list[int] = []
    rng = random.Random(11)
    encode_s = decode_s = 0.0
    for i in range(n):
        keyword = f"keyword {i} shoes"
        if i % 5 == 0:
            sim.script(keyword, features=["ai_overview", "local_pack", "video", "people_also_ask"])
        body = _page(sim, keyword)
        provider.append(len(body))
        envelope = decode_envelope(body, WireSerpResult, "task_get")
        assert envelope.tasks
        result = serp_result(envelope.tasks[0])
        t0 = time.perf_counter()
        snap = snapshot.of_result(result)
        blob = snapshot.encode(snap)
        t1 = time.perf_counter()
        snapshot.decode(blob)
        t2 = time.perf_counter()
        encode_s += t1 - t0
        decode_s += t2 - t1
        plain.append(len(msgspec.json.encode(snap)))
        stored.append(len(blob))
        diverse.append(len(snapshot.encode(snapshot.of_result(_diverse(result, rng)))))

    def line(name: str, sizes: list[int]) -> str:
        return (
            f"{name:<34} mean {statistics.mean(sizes):8.0f} B  median "
            f"{statistics.median(sizes):8.0f} B  max {max(sizes):8d} B"
        )

    print(f"{n} pages of 100 organic results")
    print(line("provider task_get JSON (baseline)", provider))
    print(line("snapshot, plain JSON", plain))
    print(line("snapshot, stored (zlib)", stored))
    print(line("stored, with varied URL paths", diverse))
    base = statistics.mean(provider)
    print(
        f"stored / baseline: {statistics.mean(stored) / base:.1%} (varied paths: {statistics.mean(diverse) / base:.1%})"
    )
    print(f"encode {encode_s / n * 1e6:.0f} µs, decode {decode_s / n * 1e6:.0f} µs per page")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
