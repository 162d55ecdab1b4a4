"""Keyword-only async factories for test data."""

from __future__ import annotations

from dataclasses import dataclass

from app.platform import service
from app.runtime import Runtime


@dataclass(frozen=True)
class Tenant:
    organisation_id: int
    workspace_id: int
    user_id: int
    email: str
    password: str
    api_key: str
    ingest_token: str
    webhook_secret: str
    member_email: str
    member_password: str


async def create_tenant(runtime: Runtime, *, name: str, timezone: str = "UTC") -> Tenant:
    """An organisation with one workspace, an admin, a plain member and an API key."""
    now = runtime.clock.now()
    slug = name.lower().replace(" ", "-")
    password = "correct horse battery staple"
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name=name, now=now)
        created = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name=f"{name} main",
            timezone=timezone,
            now=now,
        )
        ws_id = created.workspace.id
        admin = await service.create_user(
            uow.session,
            organisation_id=org.id,
            email=f"admin@{slug}.test",
            password=password,
            now=now,
            org_role="owner",
        )
        await service.add_member(uow.session, user_id=admin.id, workspace_id=ws_id, role="admin")
        member = await service.create_user(
            uow.session,
            organisation_id=org.id,
            email=f"member@{slug}.test",
            password=password,
            now=now,
        )
        await service.add_member(uow.session, user_id=member.id, workspace_id=ws_id, role="member")
        _, api_key = await service.create_api_key(
            uow.session, workspace_id=ws_id, name="tests", now=now
        )
    return Tenant(
        organisation_id=org.id,
        workspace_id=ws_id,
        user_id=admin.id,
        email=admin.email,
        password=password,
        api_key=api_key,
        ingest_token=created.ingest_token,
        webhook_secret=created.webhook_secret,
        member_email=member.email,
        member_password=password,
    )
