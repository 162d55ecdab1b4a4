"""Why a keyword moved between two measurements of one device: who overtook the tracked domain,
which SERP features appeared or vanished (and who owns them), what the AI Overview cites, whether
another page of the site ranks now, and the two pages side by side."""

from __future__ import annotations

from app.engines.ranktracking.explain.labels import NOT_A_FEATURE, capital, label
from app.engines.ranktracking.explain.measured import Measured
from app.engines.ranktracking.explain.schemas import (
    AiOverviewChange,
    DiffRow,
    DomainMove,
    FeatureChange,
    MovementOut,
)
from app.engines.ranktracking.explain.snapshot import AI_OVERVIEW, Page, matches
from app.engines.ranktracking.reports.targets import page_key

DIFF_MIN_ROWS = 10
MOVERS_SHOWN = 5


def change_of(previous: int | None, position: int | None) -> tuple[str, int | None]:
    if previous is None and position is None:
        return "unranked", None
    if previous is None:
        return "new", None
    if position is None:
        return "lost", None
    delta = previous - position
    return ("up" if delta > 0 else "down" if delta < 0 else "same"), delta


def compare(keyword: str, domain: str, before: Measured, after: Measured) -> MovementOut:
    change, delta = change_of(before.position, after.position)
    url_changed = (
        before.url is not None
        and after.url is not None
        and page_key(before.url) != page_key(after.url)
    )
    pages_kept = before.page is not None and after.page is not None
    overtaken_by, overtook = (
        _overtakes(domain, before, after, before.page, after.page)
        if before.page is not None and after.page is not None
        else ([], [])
    )
    features = _feature_changes(before, after)
    ai = _ai_overview(domain, before, after)
    movement = MovementOut(
        keyword=keyword,
        device=after.device,
        request_id=after.request_id,
        run_id=after.run_id,
        previous_run_id=before.run_id,
        measured_at=after.measured_at,
        previous_at=before.measured_at,
        position=after.position,
        previous=before.position,
        change=change,
        delta=delta,
        url=after.url,
        previous_url=before.url,
        url_changed=url_changed,
        overtaken_by=overtaken_by,
        overtook=overtook,
        features=features,
        ai_overview=ai,
        diff=_diff(domain, before, after, before.page, after.page)
        if before.page is not None and after.page is not None
        else [],
        reasons=[],
        pages_kept=pages_kept,
    )
    movement.reasons = reasons(movement)
    return movement


def changed(m: MovementOut) -> bool:
    """Whether the measurement differs from the one before in anything worth explaining."""
    return m.change not in ("same", "unranked") or m.url_changed or bool(m.features)


def _ref(position: int | None, depth: int) -> int:
    return position if position is not None else depth + 1


def _overtakes(
    domain: str, before: Measured, after: Measured, old: Page, new: Page
) -> tuple[list[DomainMove], list[DomainMove]]:
    depth = max(len(old.organic), len(new.organic))
    mine_before, mine_after = _ref(before.position, depth), _ref(after.position, depth)
    old_pos = _first_positions(old)
    new_pos = _first_positions(new)
    ahead: list[DomainMove] = []
    passed: list[DomainMove] = []
    for host in dict.fromkeys([*new_pos, *old_pos]):
        if matches(host, domain):
            continue
        was, now = old_pos.get(host), new_pos.get(host)
        above_before = was is not None and was < mine_before
        above_after = now is not None and now < mine_after
        if above_after and not above_before:
            ahead.append(DomainMove(domain=host, before=was, after=now))
        elif above_before and not above_after:
            passed.append(DomainMove(domain=host, before=was, after=now))
    ahead.sort(key=lambda m: m.after or 0)
    passed.sort(key=lambda m: m.before or 0)
    return ahead[:MOVERS_SHOWN], passed[:MOVERS_SHOWN]


def _first_positions(page: Page) -> dict[str, int]:
    out: dict[str, int] = {}
    for rank, (host, _) in enumerate(page.organic, start=1):
        out.setdefault(host, rank)
    return out


def _features(m: Measured) -> dict[str, list[str]]:
    if m.page is not None:
        return {k: v for k, v in m.page.features.items() if k not in NOT_A_FEATURE}
    return {k: [] for k in m.features if k not in NOT_A_FEATURE}


def _feature_changes(before: Measured, after: Measured) -> list[FeatureChange]:
    old, new = _features(before), _features(after)
    out: list[FeatureChange] = []
    for kind in dict.fromkeys([*new, *old]):
        if kind not in old:
            out.append(_change(kind, "appeared", [], new[kind]))
        elif kind not in new:
            out.append(_change(kind, "vanished", old[kind], []))
        elif before.page is not None and after.page is not None and old[kind] != new[kind]:
            out.append(_change(kind, "owners_changed", old[kind], new[kind]))
    return out


def _change(
    kind: str, change: str, owners_before: list[str], owners_after: list[str]
) -> FeatureChange:
    return FeatureChange(
        feature=kind,
        label=label(kind),
        change=change,
        owners_before=owners_before,
        owners_after=owners_after,
    )


def _cited(page: Page | None, domain: str) -> bool:
    return page is not None and any(matches(d, domain) for d, _ in page.ai_references)


def _ai_overview(domain: str, before: Measured, after: Measured) -> AiOverviewChange | None:
    was, now = AI_OVERVIEW in before.features, AI_OVERVIEW in after.features
    if not (was or now):
        return None
    old = [d for d, _ in before.page.ai_references] if before.page else []
    new = [d for d, _ in after.page.ai_references] if after.page else []
    return AiOverviewChange(
        before=was,
        after=now,
        cited_before=_cited(before.page, domain),
        cited_after=_cited(after.page, domain),
        references=list(dict.fromkeys(new)),
        references_added=[d for d in dict.fromkeys(new) if d not in old],
        references_removed=[d for d in dict.fromkeys(old) if d not in new],
    )


def _diff(
    domain: str, before: Measured, after: Measured, old_page: Page, new_page: Page
) -> list[DiffRow]:
    old, new = old_page.organic, new_page.organic
    deepest = max(before.position or 0, after.position or 0)
    rows = min(max(len(old), len(new)), max(DIFF_MIN_ROWS, deepest + 1))
    out: list[DiffRow] = []
    for rank in range(1, rows + 1):
        b = old[rank - 1] if rank <= len(old) else None
        a = new[rank - 1] if rank <= len(new) else None
        out.append(
            DiffRow(
                rank=rank,
                before=b[0] if b else None,
                before_url=b[1] if b else None,
                after=a[0] if a else None,
                after_url=a[1] if a else None,
                mine_before=bool(b and matches(b[0], domain)),
                mine_after=bool(a and matches(a[0], domain)),
            )
        )
    return out


def _place(position: int | None) -> str:
    return str(position) if position is not None else "not ranked"


def reasons(m: MovementOut) -> list[str]:
    """The movement in sentences, most telling first."""
    out = _position_reasons(m) + _feature_reasons(m) + _ai_reasons(m)
    return out or ["No change."]


def _position_reasons(m: MovementOut) -> list[str]:
    out: list[str] = []
    if m.change in ("up", "down"):
        places = abs(m.delta or 0)
        way = "Up" if m.change == "up" else "Down"
        out.append(f"{way} {places} {plural(places, 'place')}: {m.previous} → {m.position}.")
    elif m.change == "new":
        out.append(f"Now ranking at {m.position} (not within the depth before).")
    elif m.change == "lost":
        out.append(f"No longer within the depth (was {m.previous}).")
    if m.url_changed:
        out.append(
            f"Your ranking page changed: {m.previous_url} → {m.url} "
            "(another page of the site competes for this keyword)."
        )
    out += [f"{x.domain} overtook you ({_place(x.before)} → {x.after})." for x in m.overtaken_by]
    out += [f"You passed {x.domain} ({x.before} → {_place(x.after)})." for x in m.overtook]
    return out


def _feature_reasons(m: MovementOut) -> list[str]:
    out: list[str] = []
    for f in m.features:
        if f.change == "appeared":
            owners = f" (links to {', '.join(f.owners_after)})" if f.owners_after else ""
            out.append(f"{capital(article(f.label))} appeared{owners}.")
        elif f.change == "vanished":
            out.append(f"The {f.label} vanished.")
        else:
            out.append(
                f"The {f.label} now links to {', '.join(f.owners_after) or 'no site'} "
                f"(before: {', '.join(f.owners_before) or 'no site'})."
            )
    return out


def _ai_reasons(m: MovementOut) -> list[str]:
    ai = m.ai_overview
    if ai is None or not ai.after:
        return []
    if ai.cited_after and not ai.cited_before:
        return ["The AI Overview now cites your site."]
    if ai.cited_before and not ai.cited_after:
        return ["The AI Overview no longer cites your site."]
    if not ai.cited_after and ai.references:
        return [f"The AI Overview cites {', '.join(ai.references)}, not you."]
    return []


def plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def article(text: str) -> str:
    if text.startswith("“"):
        return "a " + text + " block"
    return ("an " if text[:1].lower() in "aeiou" else "a ") + text
