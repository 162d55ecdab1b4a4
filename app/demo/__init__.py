"""The demo: an organisation, a workspace and an admin, the loopback simulators, and each engine's
sample data. Run by ``make run`` (``DEMO=1``) so a person can try everything without accounts."""

from __future__ import annotations

import dataclasses
import logging
import secrets
from urllib.parse import urlsplit

from sqlalchemy import select

from app.engines.plugin import DemoWorkspace, SandboxHandle
from app.platform import service
from app.platform.models import Membership, User
from app.runtime import Runtime
from app.settings import Settings
from app.wiring import PLUGINS

log = logging.getLogger(__name__)


def start_sandboxes() -> dict[str, SandboxHandle]:
    handles: dict[str, SandboxHandle] = {}
    for plugin in PLUGINS:
        for name, start in plugin.sandboxes.items():
            handles[name] = start()
            log.info("sandbox %s listening on %s", name, handles[name].url)
    return handles


def settings_for_sandboxes(settings: Settings, urls: dict[str, str]) -> Settings:
    """Point the integrations at the simulators."""
    integrations = settings.integrations
    if "meta" in urls:
        integrations = dataclasses.replace(integrations, meta_graph_url=urls["meta"])
    if "sheets" in urls:
        integrations = dataclasses.replace(integrations, sheets_url=urls["sheets"])
    if "serp" in urls:
        integrations = dataclasses.replace(
            integrations,
            serp_url=urls["serp"],
            serp_login="demo",
            serp_password="demo",  # noqa: S106
        )
    if urls:
        # The simulators listen on loopback: the demo is the operator that lets its workspace's
        # provider URLs reach them.
        integrations = dataclasses.replace(integrations, allow_private_targets=True)
    mail = settings.mail
    if "smtp" in urls:
        parts = urlsplit(urls["smtp"])
        mail = dataclasses.replace(
            mail, smtp_host=parts.hostname or "127.0.0.1", smtp_port=parts.port or 25
        )
    return dataclasses.replace(settings, integrations=integrations, mail=mail)


async def ensure_demo(runtime: Runtime, urls: dict[str, str]) -> str | None:
    """Create the demo tenancy and data once. Returns the admin's password the first time only."""
    email = runtime.settings.demo.admin_email
    now = runtime.clock.now()
    async with runtime.db.read() as session:
        existing = await session.scalar(select(User).where(User.email == email))
    if existing is not None:
        return None
    password = secrets.token_urlsafe(12)
    async with runtime.db.write() as uow:
        org = await service.create_organisation(uow.session, name="Demo organisation", now=now)
        created = await service.create_workspace(
            uow.session,
            runtime.secrets,
            organisation_id=org.id,
            name="Demo workspace",
            timezone="Europe/Berlin",
            now=now,
        )
        user = await service.create_user(
            uow.session,
            organisation_id=org.id,
            email=email,
            password=password,
            now=now,
            name="Demo admin",
        )
        await service.add_member(
            uow.session, user_id=user.id, workspace_id=created.workspace.id, role="admin"
        )
    demo = DemoWorkspace(
        organisation_id=org.id,
        workspace_id=created.workspace.id,
        admin_user_id=user.id,
        sandbox_urls=urls,
    )
    for plugin in PLUGINS:
        if plugin.seed_demo is not None:
            await plugin.seed_demo(runtime, demo)
    return password


async def demo_workspace_id(runtime: Runtime) -> int | None:
    async with runtime.db.read() as session:
        return await session.scalar(
            select(Membership.workspace_id)
            .join(User, User.id == Membership.user_id)
            .where(User.email == runtime.settings.demo.admin_email)
        )
