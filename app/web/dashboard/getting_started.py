"""The home page's first screen: per engine, the steps that take a newcomer from nothing to the
first real result, each ticked from the workspace's actual state (not from a checklist someone
clicks through)."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.session import ReadSession
from app.engines.adrules import accounts as adrules_accounts
from app.engines.adrules import records as adrules_records
from app.engines.adrules import rule_views
from app.engines.funnels import reads as funnels_reads
from app.engines.ranktracking import ledger
from app.engines.ranktracking.records import results as rank_results
from app.engines.ranktracking.schedules import lookup as rank_schedules
from app.platform.service import Principal


@dataclass(frozen=True, slots=True)
class Step:
    label: str
    href: str
    done: bool


@dataclass(frozen=True, slots=True)
class Journey:
    engine: str
    steps: list[Step]

    @property
    def complete(self) -> bool:
        return all(s.done for s in self.steps)


async def journeys(session: ReadSession, principal: Principal) -> list[Journey]:
    """Each engine's steps, ticked from what its own reads say of the workspace."""
    ws = principal.workspace_id
    token = await adrules_accounts.has_token(session, ws)
    active_account = await adrules_accounts.has_active_account(session, ws)
    rule = await rule_views.has_active_rule(session, ws)
    batch = await adrules_records.has_batch(session, ws)
    contacts = await funnels_reads.has_contacts(session, ws)
    published = await funnels_reads.has_published_funnel(session, ws)
    balance = await ledger.balance_of(session, principal.organisation_id)
    schedule = await rank_schedules.has_schedule(session, ws)
    measured = await rank_results.has_measured(session, ws)
    return [
        Journey(
            "Ad rules",
            [
                Step("Connect Meta (store an access token)", "/ui/adrules/accounts", token),
                Step("Activate an ad account", "/ui/adrules/accounts", active_account),
                Step("Switch on a first rule", "/ui/adrules/rules/new", rule),
                Step("See its first run in the log", "/ui/adrules/batches", batch),
            ],
        ),
        Journey(
            "Funnels",
            [
                Step("Import or add contacts", "/ui/funnels/contacts/import", contacts),
                Step("Publish a funnel", "/ui/funnels", published),
            ],
        ),
        Journey(
            "Position tracking",
            [
                Step("Top up the balance", "/ui/ranktracking/balance", balance.credits_micros > 0),
                Step("Create a first schedule", "/ui/ranktracking/new", schedule),
                Step("Read its first positions", "/ui/ranktracking", measured),
            ],
        ),
    ]
