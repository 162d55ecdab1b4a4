"""Ad accounts: discovered from Meta with the workspace's token and stored inactive (spec AR-2);
a person activates the ones rules may run on. The token itself is a workspace secret, encrypted at
rest and never returned (AR-24)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.db.tenancy import scoped_exists, scoped_select
from app.engines.adrules.errors import AccountNotFound, MetaTokenMissing
from app.engines.adrules.models import META_TOKEN_SECRET, AdAccount
from app.integrations.meta.structs import GraphAdAccount
from app.platform.crypto import SecretBox
from app.platform.service import get_secret, secret_names, set_secret


async def store_token(
    session: WriteSession, box: SecretBox, *, workspace_id: int, token: str, now: datetime
) -> None:
    await set_secret(
        session, box, workspace_id=workspace_id, name=META_TOKEN_SECRET, value=token, now=now
    )


async def has_token(session: ReadSession, workspace_id: int) -> bool:
    return META_TOKEN_SECRET in await secret_names(session, workspace_id)


async def has_active_account(session: ReadSession, workspace_id: int) -> bool:
    """Whether one of the workspace's ad accounts is switched on."""
    query = select(scoped_exists(AdAccount, workspace_id, AdAccount.active))
    return bool(await session.scalar(query))


async def require_token(session: ReadSession, box: SecretBox, workspace_id: int) -> str:
    token = await get_secret(session, box, workspace_id=workspace_id, name=META_TOKEN_SECRET)
    if not token:
        raise MetaTokenMissing(
            "Set the workspace's Meta access token first (PUT /api/v1/adrules/meta-token)."
        )
    return token


async def record_discovered(
    session: WriteSession, *, workspace_id: int, found: list[GraphAdAccount], now: datetime
) -> list[AdAccount]:
    """Insert new accounts inactive; refresh the name, currency, zone and status of known ones
    without touching whether they are active."""
    existing = {
        a.meta_id: a
        for a in (await session.execute(scoped_select(AdAccount, workspace_id))).scalars()
    }
    for graph in found:
        meta_id = graph.id if graph.id.startswith("act_") else f"act_{graph.id}"
        account = existing.get(meta_id)
        if account is None:
            account = AdAccount(
                workspace_id=workspace_id,
                meta_id=meta_id,
                active=False,
                discovered_at=now,
                name="",
                currency="",
                timezone_name="",
                account_status=0,
            )
            session.add(account)
            existing[meta_id] = account
        account.name = graph.name[:200] or meta_id
        account.currency = graph.currency[:3].upper() or "USD"
        account.timezone_name = graph.timezone_name[:64] or "UTC"
        account.account_status = graph.account_status
    await session.flush()
    return sorted(existing.values(), key=lambda a: a.id)


async def list_accounts(session: ReadSession, workspace_id: int) -> list[AdAccount]:
    rows = await session.execute(scoped_select(AdAccount, workspace_id).order_by(AdAccount.id))
    return list(rows.scalars())


async def get_account(session: ReadSession, workspace_id: int, account_id: int) -> AdAccount:
    account = await session.scalar(
        scoped_select(AdAccount, workspace_id).where(AdAccount.id == account_id)
    )
    if account is None:
        raise AccountNotFound("ad account not found")
    return account


async def set_active(
    session: WriteSession, *, workspace_id: int, account_id: int, active: bool, now: datetime
) -> AdAccount:
    account = await get_account(session, workspace_id, account_id)
    if active and not account.active:
        account.activated_at = now
    account.active = active
    await session.flush()
    return account
