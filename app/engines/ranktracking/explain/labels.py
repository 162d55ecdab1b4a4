"""Plain-language names of the provider's SERP item types."""

from __future__ import annotations

LABELS = {
    "ai_overview": "AI Overview",
    "local_pack": "local pack",
    "video": "video carousel",
    "featured_snippet": "featured snippet",
    "people_also_ask": "“People also ask”",
    "images": "images",
    "paid": "ads",
    "top_stories": "top stories",
    "knowledge_graph": "knowledge panel",
    "shopping": "shopping results",
    "twitter": "X (Twitter) posts",
    "perspectives": "perspectives",
    "discussions_and_forums": "discussions and forums",
    "short_videos": "short videos",
    "related_searches": "related searches",
    "map": "map",
}

NOT_A_FEATURE = frozenset({"organic"})


def label(kind: str) -> str:
    return LABELS.get(kind, kind.replace("_", " "))


def capital(text: str) -> str:
    return text[:1].upper() + text[1:]
