"""RT-75: the SERP simulator answers scripted SERP features in the provider's documented advanced
shapes, the same way every time, and the production client reads the pages they link to."""

from __future__ import annotations

from typing import Any

import msgspec

from app.integrations.serp.results import serp_result
from app.integrations.serp.wire import WireSerpResult, decode_envelope
from app.sandbox.serp import SerpSimulator

FEATURES = ["ai_overview", "featured_snippet", "local_pack", "video", "people_also_ask", "images"]


def _page(sim: SerpSimulator, keyword: str) -> dict[str, Any]:
    posted, _ = sim.post_tasks(
        "serp",
        [{"keyword": keyword, "location_code": 2840, "language_code": "en", "depth": 100}],
    )
    answer, _ = sim.task_get("serp", posted["tasks"][0]["id"])
    return answer


def test_rt75_documented_feature_items_deterministically() -> None:
    sim = SerpSimulator(seed=5)
    sim.script("trail shoes", features=FEATURES, ai_references=["cited.org", "other.net"])
    answer = _page(sim, "trail shoes")
    page = answer["tasks"][0]["result"][0]
    items = page["items"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_type.setdefault(item["type"], []).append(item)
    assert set(page["item_types"]) == {*FEATURES, "organic"}
    assert len(by_type["organic"]) == 100
    assert [i["rank_absolute"] for i in items] == list(range(1, len(items) + 1))

    (ai,) = by_type["ai_overview"]
    assert ai["domain"] is None
    assert [r["type"] for r in ai["references"]] == ["ai_overview_reference"] * 2
    assert [r["domain"] for r in ai["references"]] == ["cited.org", "other.net"]
    assert all(r["url"].startswith(f"https://{r['domain']}/") for r in ai["references"])
    assert ai["items"][0]["type"] == "ai_overview_element"

    (snippet,) = by_type["featured_snippet"]
    assert snippet["domain"] == by_type["organic"][0]["domain"].removeprefix("www.")
    pack = by_type["local_pack"]
    assert [p["rank_group"] for p in pack] == [1, 2, 3]
    assert pack[0]["domain"] == by_type["organic"][1]["domain"].removeprefix("www.")
    assert all("cid" in p and p["rating"]["rating_type"] == "Max5" for p in pack)
    (video,) = by_type["video"]
    assert {v["type"] for v in video["items"]} == {"video_element"}
    assert all(v["url"].startswith("https://www.youtube.com/watch?v=") for v in video["items"])
    (paa,) = by_type["people_also_ask"]
    answers = [e for q in paa["items"] for e in q["expanded_element"]]
    assert {q["type"] for q in paa["items"]} == {"people_also_ask_element"}
    assert [a["type"] for a in answers] == ["people_also_ask_expanded_element"] * 2

    # Deterministic: the same page for the same keyword, in another simulator with the seed.
    again = SerpSimulator(seed=5)
    again.script("trail shoes", features=FEATURES, ai_references=["cited.org", "other.net"])
    assert _page(again, "trail shoes")["tasks"][0]["result"][0]["items"] == items

    # The client keeps what each item links to.
    envelope = decode_envelope(msgspec.json.encode(answer), WireSerpResult, "task_get")
    assert envelope.tasks is not None
    result = serp_result(envelope.tasks[0])
    parsed = {i.type: i for i in result.items}
    assert [s.domain for s in parsed["ai_overview"].sources] == ["cited.org", "other.net"]
    assert parsed["ai_overview"].domains() == ["cited.org", "other.net"]
    assert parsed["video"].domains() == ["youtube.com"]
    assert len(parsed["people_also_ask"].sources) == 2
