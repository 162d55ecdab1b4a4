"""The home page's first screen: per engine, the steps that take a newcomer from nothing to the
first real result, each ticked from the workspace's actual state (not from a checklist someone
clicks through)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, exists, select

from app.db.session import ReadSession
from app.engines.adrules.models import META_TOKEN_SECRET, AdAccount, Batch, Rule
from app.engines.funnels.models import Contact, Funnel
from app.engines.ranktracking import ledger
from app.engines.ranktracking.models import Run as RankRun
from app.engines.ranktracking.models import Schedule
from app.platform.models import Secret
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


async def _any(session: ReadSession, query: Select[int]) -> bool:
    return bool(await session.scalar(select(exists(query))))


async def journeys(session: ReadSession, principal: Principal) -> list[Journey]:
    ws = principal.workspace_id
    token = await _any(
        session,
        select(Secret.id).where(Secret.workspace_id == ws, Secret.name == META_TOKEN_SECRET),
    )
    active_account = await _any(
        session, select(AdAccount.id).where(AdAccount.workspace_id == ws, AdAccount.active)
    )
    rule = await _any(
        session, select(Rule.id).where(Rule.workspace_id == ws, Rule.status == "active")
    )
    batch = await _any(session, select(Batch.id).where(Batch.workspace_id == ws))
    contacts = await _any(session, select(Contact.id).where(Contact.workspace_id == ws))
    published = await _any(
        session,
        select(Funnel.id).where(Funnel.workspace_id == ws, Funnel.current_version_id.is_not(None)),
    )
    balance = await ledger.balance_of(session, principal.organisation_id)
    schedule = await _any(session, select(Schedule.id).where(Schedule.workspace_id == ws))
    measured = await _any(
        session,
        select(RankRun.id)
        .join(Schedule, Schedule.id == RankRun.schedule_id)
        .where(Schedule.workspace_id == ws, RankRun.status == "succeeded"),
    )
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
