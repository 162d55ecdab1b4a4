"""A rule run a few times, two hours apart, on campaigns of one ad account of the Graph API
simulator: the records the rule log's charts are drawn from."""

from __future__ import annotations

from collections.abc import Sequence

from app.engines.adrules.schemas import TaskIn
from app.engines.adrules.work.account import run_account_job
from app.runtime import Runtime
from app.sandbox.meta import GraphWorld, SimCampaign
from tests.engines.adrules.worker_setup import (
    TOKEN,
    Setup,
    create_setup,
    entities_from_world,
    make_clients,
    make_deps,
    make_payload,
)


async def run_rule(
    runtime: Runtime,
    world: GraphWorld,
    workspace_id: int,
    task: TaskIn,
    campaigns: Sequence[SimCampaign],
    *,
    runs: int,
) -> tuple[Setup, list[int]]:
    """Create the rule with ``task`` on act_1001 holding ``campaigns``, run it ``runs`` times and
    return it with the batch record ids, oldest first."""
    world.add_account("act_1001", "Shop")
    world.grant(TOKEN, "act_1001")
    for campaign in campaigns:
        world.add_campaign("act_1001", campaign)
    setup = await create_setup(runtime, workspace_id, tasks=[task], rule_name="Scale rule")
    clients = make_clients(world.base_url)
    batches = []
    try:
        for _ in range(runs):
            payload = await make_payload(runtime, setup, entities_from_world(world, "act_1001"))
            await run_account_job(make_deps(runtime, clients), payload)
            batches.append(payload.batch_record_id)
            runtime.clock.advance(hours=2)
    finally:
        await clients.aclose()
    return setup, batches
