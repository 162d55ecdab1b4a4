"""AR-11: a rule's pre-filters are serialised into the Graph API ``filtering`` parameter — campaign
ids with ``IN`` on ``id``, the name with ``CONTAIN``, effective statuses with ``IN`` / ``NOT_IN`` —
each on its own and combined, so Meta narrows the campaign list before anything crosses the wire.

The same cases run twice: as a pure serialisation, and through the dispatcher against the Graph API
simulator, which decodes the query it received and narrows the list accordingly."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from app.engines.adrules.claim.dispatch import dispatch_due
from app.engines.adrules.claim.prefilters import to_filtering
from app.engines.adrules.payloads import RUN_ACCOUNT_JOB, RunAccountPayload
from app.engines.adrules.schemas import PreFilters
from app.integrations.meta.client import GraphClient
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from app.scheduling.models import Job
from tests.engines.adrules.factories import (
    TOKEN,
    Workspace,
    create_account,
    create_rule,
    dispatch_deps,
    store_token,
)

# The simulated account: (id, name, effective status).
CAMPAIGNS = [
    ("101", "Brand search", "ACTIVE"),
    ("102", "Brand display", "PAUSED"),
    ("103", "Promo summer", "ACTIVE"),
    ("104", "Promo winter", "ARCHIVED"),
    ("105", "PROMO spring", "PAUSED"),
    ("106", "Retargeting", "WITH_ISSUES"),
]

# name -> (pre-filters as the API takes them, the ``filtering`` sent, the campaign ids kept)
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]], set[str]]] = {
    "campaign ids": (
        {"campaign_ids": ["104", "101", "104"]},
        [{"field": "id", "operator": "IN", "value": ["101", "104"]}],
        # 104 is archived: an edge leaves it out unless a filter names effective_status.
        {"101"},
    ),
    "name substring": (
        {"name_contains": " promo "},
        [{"field": "name", "operator": "CONTAIN", "value": "promo"}],
        {"103", "105"},
    ),
    "statuses in": (
        {"effective_status": {"operator": "in", "values": ["PAUSED", "ACTIVE"]}},
        [{"field": "effective_status", "operator": "IN", "value": ["ACTIVE", "PAUSED"]}],
        {"101", "102", "103", "105"},
    ),
    "statuses not in": (
        {"effective_status": {"operator": "not_in", "values": ["ARCHIVED", "WITH_ISSUES"]}},
        [
            {
                "field": "effective_status",
                "operator": "NOT_IN",
                # Archived and deleted are always excluded by a NOT_IN (AR-23a).
                "value": ["ARCHIVED", "DELETED", "WITH_ISSUES"],
            }
        ],
        {"101", "102", "103", "105"},
    ),
    "all three combined": (
        {
            "campaign_ids": ["103", "104", "105", "106"],
            "name_contains": "Promo",
            "effective_status": {"operator": "not_in", "values": ["ARCHIVED"]},
        },
        [
            {"field": "id", "operator": "IN", "value": ["103", "104", "105", "106"]},
            {"field": "name", "operator": "CONTAIN", "value": "Promo"},
            {
                "field": "effective_status",
                "operator": "NOT_IN",
                "value": ["ARCHIVED", "DELETED"],
            },
        ],
        {"103", "105"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_ar11_prefilters_serialise_into_filtering(case: str) -> None:
    prefilters, filtering, _ = CASES[case]
    assert to_filtering(msgspec.convert(prefilters, PreFilters)) == filtering


def test_ar11_no_prefilters_send_no_filtering() -> None:
    assert to_filtering(PreFilters()) == []
    assert to_filtering(PreFilters(name_contains="   ")) == []


@pytest.mark.parametrize("case", list(CASES))
async def test_ar11_simulator_receives_the_filtering_and_narrows_the_list(
    case: str, runtime: Runtime, ws: Workspace, world: GraphWorld, graph: GraphClient
) -> None:
    prefilters, filtering, kept = CASES[case]
    world.add_account("act_7", "Filtered")
    world.grant(TOKEN, "act_7")
    for campaign_id, name, status in CAMPAIGNS:
        world.add_campaign("act_7", SimCampaign(id=campaign_id, name=name, effective_status=status))
    account = await create_account(runtime, workspace_id=ws.workspace_id, meta_id="act_7")
    await store_token(runtime, ws.workspace_id)
    await create_rule(
        runtime, workspace_id=ws.workspace_id, account_ids=[account.id], prefilters=prefilters
    )

    await dispatch_due(dispatch_deps(runtime, graph=graph), runtime.clock.now(), runtime.clock.now)

    # The query Meta received (decoded from the ``filtering`` parameter of the listing) ...
    assert world.filters_seen == [filtering]
    # ... and only the campaigns it matched reached the per-account job.
    async with runtime.db.read() as session:
        (job,) = (await session.execute(select(Job).where(Job.name == RUN_ACCOUNT_JOB))).scalars()
    payload = msgspec.json.decode(job.payload, type=RunAccountPayload)
    assert {e.id for e in payload.entities} == kept
