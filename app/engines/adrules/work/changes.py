"""What an action would change, worked out without touching anything (spec §4, AR-17).

Pure functions from an action and a campaign's current values to a :class:`Change`: the Graph
fields to write, the value before and after, or why nothing needs doing. Budget changes are clamped
at the task's maximum / minimum, and the boundary value is what gets written, never the projected
one. The worker's :mod:`~app.engines.adrules.work.execute` applies a change after re-reading the live
value; :mod:`~app.engines.adrules.work.preview` shows it and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import msgspec

from app.engines.adrules.catalogue import CAPPED_STRATEGIES, STRATEGY_LABELS
from app.engines.adrules.schemas import (
    Action,
    ActivateCampaign,
    AppendToName,
    DecreaseBid,
    DecreaseBudget,
    IncreaseBid,
    IncreaseBudget,
    PauseCampaign,
    RemoveFromName,
    Rename,
    SetBid,
    SetBudget,
)
from app.engines.adrules.webhook_secrets import public_action
from app.engines.adrules.work.metrics import budget_to_major, major_to_minor

MAX_NAME_LENGTH = 400

LEVEL_NOUNS = {"campaign": "campaign", "adset": "ad set", "ad": "ad"}
"""How a reason names the object a rule acts on (spec AR-46: an ad is "the ad")."""


def object_noun(level: str) -> str:
    return LEVEL_NOUNS.get(level, "campaign")


class ActionFailed(Exception):
    """An action could not be carried out (recorded as an ``error`` record)."""


BUDGET_FIELDS = frozenset({"daily_budget", "lifetime_budget"})
"""The fields that set an object's budget: what the cross-rule budget guards count."""


@dataclass(frozen=True, slots=True)
class Change:
    """What an action would do to a campaign."""

    write: dict[str, Any] | None
    """Graph fields to POST (``status``, ``daily_budget`` in minor units, ``name``); None: none."""
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    noop: str | None = None
    """Why nothing is to be done (already paused, name already has the text, budget at the cap…)."""
    skip: str | None = None
    """Why the action does not apply to this object (recorded as skipped): a budget action on an
    object whose budget is held at another level."""


BUDGET_ON_AD_SETS = (
    "budget_on_ad_sets: the campaign has no budget of its own — its ad sets hold the budgets; "
    "act on them with a rule at ad-set level"
)
BUDGET_ON_CAMPAIGN = (
    "budget_on_campaign: the ad set has no budget of its own — its campaign holds it (campaign "
    "budget optimisation); act on it with a rule at campaign level"
)


def action_parameters(action: Action) -> dict[str, Any]:
    """The action's parameters as the record shows them (a webhook's secret, even encrypted, is never
    shown: only ``has_secret``)."""
    params: dict[str, Any] = msgspec.to_builtins(public_action(action))
    return params


def _money(minor: int, currency: str) -> str:
    return str(budget_to_major(minor, currency))


def plan_budget(
    action: IncreaseBudget | DecreaseBudget | SetBudget,
    current_minor: int | None,
    currency: str,
    *,
    lifetime_minor: int | None = None,
    level: str = "campaign",
) -> Change:
    """The new budget, clamped at the cap or floor (the boundary is written, not exceeded): the
    daily budget, or the lifetime budget of an object that has one instead. An object with
    neither holds no budget at this level: skipped, pointing at the level that does."""
    if current_minor is None and lifetime_minor is not None:
        return _plan_budget(action, lifetime_minor, currency, "lifetime_budget")
    if current_minor is None:
        return Change(None, skip=BUDGET_ON_CAMPAIGN if level == "adset" else BUDGET_ON_AD_SETS)
    return _plan_budget(action, current_minor, currency, "daily_budget")


def _plan_budget(
    action: IncreaseBudget | DecreaseBudget | SetBudget,
    current_minor: int,
    currency: str,
    key: str,
) -> Change:
    label = key.replace("_", " ")
    current = budget_to_major(current_minor, currency)
    assert current is not None
    clamped_at: str | None = None
    if isinstance(action, SetBudget):
        projected = action.amount
    else:
        step = current * action.amount / 100 if action.by == "percent" else action.amount
        projected = current + step if isinstance(action, IncreaseBudget) else current - step
    new_minor = major_to_minor(projected, currency)
    if isinstance(action, IncreaseBudget) and action.max is not None:
        cap = major_to_minor(action.max, currency)
        if current_minor >= cap:
            return Change(
                None,
                noop=f"the {label} {current} is already at or above the maximum {action.max}",
            )
        if new_minor > cap:
            new_minor, clamped_at = cap, "max"
    if isinstance(action, DecreaseBudget) and action.min is not None:
        floor = major_to_minor(action.min, currency)
        if current_minor <= floor:
            return Change(
                None,
                noop=f"the {label} {current} is already at or below the minimum {action.min}",
            )
        if new_minor < floor:
            new_minor, clamped_at = floor, "min"
    if new_minor <= 0:
        raise ActionFailed(f"the new {label} would be {_money(new_minor, currency)}, not positive")
    if new_minor == current_minor:
        return Change(None, noop=f"the {label} is already {current}")
    after: dict[str, Any] = {key: _money(new_minor, currency)}
    if clamped_at is not None:
        after["clamped_at"] = clamped_at
        after["projected"] = str(projected)
    return Change({key: new_minor}, before={key: str(current)}, after=after)


def render_template(template: str, *, name: str, rule: str, date: str, campaign_id: str) -> str:
    """Fill ``{name}``, ``{rule}``, ``{date}``, ``{id}``; any other brace text stays as written."""
    out = template
    for key, value in (("{name}", name), ("{rule}", rule), ("{date}", date), ("{id}", campaign_id)):
        out = out.replace(key, value)
    return out


def _has_part(name: str, text: str, sep: str) -> bool:
    if not sep:
        return text in name
    return (
        name == text
        or name.endswith(sep + text)
        or name.startswith(text + sep)
        or (sep + text + sep) in name
    )


def _remove_part(name: str, text: str, sep: str) -> str:
    if not sep:
        return name.replace(text, "", 1)
    if name.endswith(sep + text):
        return name[: -len(sep + text)]
    if name.startswith(text + sep):
        return name[len(text + sep) :]
    return name.replace(sep + text + sep, sep, 1)


def plan_name(
    action: Rename | AppendToName | RemoveFromName,
    current: str,
    *,
    rule: str,
    date: str,
    campaign_id: str,
) -> Change:
    if isinstance(action, Rename):
        new = render_template(
            action.template, name=current, rule=rule, date=date, campaign_id=campaign_id
        )
    elif isinstance(action, AppendToName):
        if _has_part(current, action.text, action.separator):
            return Change(None, noop=f"the name already contains {action.text!r}")
        new = f"{current}{action.separator}{action.text}" if current else action.text
    else:
        if not _has_part(current, action.text, action.separator) or current == action.text:
            return Change(None, noop=f"the name does not contain {action.text!r}")
        new = _remove_part(current, action.text, action.separator)
    new = new.strip()
    if not new:
        raise ActionFailed("the new name would be empty")
    if len(new) > MAX_NAME_LENGTH:
        raise ActionFailed(f"the new name would be longer than {MAX_NAME_LENGTH} characters")
    if new == current:
        return Change(None, noop="the name would not change")
    return Change({"name": new}, before={"name": current}, after={"name": new})


def plan_status(
    action: PauseCampaign | ActivateCampaign, current: str | None, level: str = "campaign"
) -> Change:
    target = "PAUSED" if isinstance(action, PauseCampaign) else "ACTIVE"
    if current == target:
        return Change(None, noop=f"the {object_noun(level)} is already {target}")
    return Change({"status": target}, before={"status": current}, after={"status": target})


NAME_ACTIONS = (Rename, AppendToName, RemoveFromName)


def not_deliverable_reason(action: Action, effective_status: str | None) -> str | None:
    """Why ``action`` may not touch an object in ``effective_status``, or None when it may.

    Meta takes only a new name (or status DELETED) on an ARCHIVED object and nothing on a
    DELETED one; its own rules never see either. Notifications and ``log_only`` change nothing on
    the object and are allowed."""
    if effective_status not in ("ARCHIVED", "DELETED"):
        return None
    if isinstance(
        action,
        PauseCampaign
        | ActivateCampaign
        | IncreaseBudget
        | DecreaseBudget
        | SetBudget
        | IncreaseBid
        | DecreaseBid
        | SetBid,
    ):
        return (
            f"not_deliverable: the object is {effective_status}; Meta allows only a rename or "
            "a delete on archived objects and no change on deleted ones"
        )
    if isinstance(action, NAME_ACTIONS) and effective_status == "DELETED":
        return "not_deliverable: the object is DELETED; Meta allows no change on it"
    return None


def minor_units(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = Decimal(value)
    except ArithmeticError:
        return None
    if number != number.to_integral_value():
        return None
    return int(number)


# -- bids and cost caps (spec AR-40) ----------------------------------------------------------------

BID_WITHOUT_CAP = (
    "bid_strategy_without_cap: the ad set bids with {label} ({strategy}); only a bid cap "
    "(LOWEST_COST_WITH_BID_CAP) or a cost per result goal (COST_CAP) holds an amount to change"
)
BID_OTHER_TARGET = (
    "bid_strategy_not_targeted: the ad set bids with {label} ({strategy}); the task changes "
    "{wanted} amounts only"
)


def _clamp_bid(
    action: IncreaseBid | DecreaseBid | SetBid, current_minor: int, new_minor: int, currency: str
) -> tuple[int, str | None] | str:
    """The bid to write and which boundary it was clamped at, or why nothing changes (a
    template of ``{noun}`` and ``{current}``)."""
    if isinstance(action, IncreaseBid) and action.max is not None:
        cap = major_to_minor(action.max, currency)
        if current_minor >= cap:
            return f"the {{noun}} {{current}} is already at or above the maximum {action.max}"
        if new_minor > cap:
            return cap, "max"
    if isinstance(action, DecreaseBid) and action.min is not None:
        floor = major_to_minor(action.min, currency)
        if current_minor <= floor:
            return f"the {{noun}} {{current}} is already at or below the minimum {action.min}"
        if new_minor < floor:
            return floor, "min"
    return new_minor, None


def _bid_skip(
    action: IncreaseBid | DecreaseBid | SetBid, strategy: str | None, kind: str | None
) -> Change | None:
    """Why the task leaves an ad set's bid alone: its strategy holds no amount, or not the kind
    (bid cap, cost cap) the task targets."""
    label = STRATEGY_LABELS.get(strategy or "", "an unknown strategy")
    if kind is None:
        return Change(None, skip=BID_WITHOUT_CAP.format(label=label, strategy=strategy or "none"))
    if action.strategy not in ("any", kind):
        wanted = "bid cap" if action.strategy == "bid_cap" else "cost cap"
        return Change(
            None, skip=BID_OTHER_TARGET.format(label=label, strategy=strategy, wanted=wanted)
        )
    return None


def plan_bid(
    action: IncreaseBid | DecreaseBid | SetBid,
    current_minor: int | None,
    strategy: str | None,
    currency: str,
) -> Change:
    """The new ``bid_amount`` of an ad set, clamped at the task's maximum or minimum (the
    boundary is written, never exceeded). An ad set whose strategy holds no amount, or not the
    kind the task targets, is skipped with the reason."""
    kind = CAPPED_STRATEGIES.get(strategy or "")
    skipped = _bid_skip(action, strategy, kind)
    if skipped is not None or kind is None:
        return skipped or Change(None)
    noun = "bid cap" if kind == "bid_cap" else "cost cap"
    if current_minor is None:
        if not isinstance(action, SetBid):
            raise ActionFailed(f"the ad set has no {noun} amount to change")
        current_minor = 0
    current = budget_to_major(current_minor, currency)
    assert current is not None
    if isinstance(action, SetBid):
        projected = action.amount
    else:
        step = current * action.amount / 100 if action.by == "percent" else action.amount
        projected = current + step if isinstance(action, IncreaseBid) else current - step
    clamped = _clamp_bid(action, current_minor, major_to_minor(projected, currency), currency)
    if isinstance(clamped, str):
        return Change(None, noop=clamped.format(noun=noun, current=current))
    new_minor, clamped_at = clamped
    if new_minor <= 0:
        raise ActionFailed(f"the new {noun} would be {_money(new_minor, currency)}, not positive")
    if new_minor == current_minor:
        return Change(None, noop=f"the {noun} is already {current}")
    after: dict[str, Any] = {"bid_amount": _money(new_minor, currency), "bid_strategy": strategy}
    if clamped_at is not None:
        after["clamped_at"] = clamped_at
        after["projected"] = str(projected)
    return Change(
        {"bid_amount": new_minor},
        before={"bid_amount": str(current), "bid_strategy": strategy},
        after=after,
    )
