"""A keyword's SERP features over time (RT-71): per measurement and device, the feature types on
its page, the ones the tracked domain owns, and whether the AI Overview cited it."""

from __future__ import annotations

from app.db.session import ReadSession
from app.engines.ranktracking.explain.labels import NOT_A_FEATURE
from app.engines.ranktracking.explain.measured import keyword_measurements
from app.engines.ranktracking.explain.schemas import FeatureHistoryOut, FeaturePoint
from app.engines.ranktracking.explain.snapshot import AI_OVERVIEW, matches
from app.engines.ranktracking.models import Schedule

HISTORY_REQUESTS = 52


async def feature_history(
    session: ReadSession, schedule: Schedule, keyword: str, limit_requests: int = HISTORY_REQUESTS
) -> FeatureHistoryOut:
    by_device = await keyword_measurements(
        session, schedule.id, keyword, limit_requests=limit_requests
    )
    domain = schedule.domain or ""
    points: list[FeaturePoint] = []
    kinds: dict[str, None] = {}
    for device, series in by_device.items():
        for m in series:
            features = sorted(k for k in m.features if k not in NOT_A_FEATURE)
            kinds.update(dict.fromkeys(features))
            cited = None
            if AI_OVERVIEW in m.features and m.page is not None:
                cited = any(matches(d, domain) for d, _ in m.page.ai_references)
            points.append(
                FeaturePoint(
                    request_id=m.request_id,
                    measured_at=m.measured_at,
                    device=device,
                    features=features,
                    owned=sorted(m.owned),
                    cited_in_ai_overview=cited,
                )
            )
    points.sort(key=lambda p: (p.request_id, p.device))
    return FeatureHistoryOut(keyword=keyword, features=sorted(kinds), points=points)
