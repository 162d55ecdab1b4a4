"""The demo: its own organisation, workspace and admin, the loopback simulators, and each engine's
sample data. Run by ``make run`` (``DEMO=1``) so a person can try everything without accounts.

This package and :mod:`app.sandbox` are the only places that know the simulators: the production
install never imports them (an import-linter contract holds it).

Rules the demo keeps:

- A variable the user set explicitly wins over its simulator (``SERP_URL=https://… make run``
  points the demo at that one real API and simulates the rest); the start banner lists what is
  simulated.
- The demo's data lives in the demo's own organisation and workspace. Its funnel is seeded as a
  draft, so nothing mails anyone until a person publishes it.
- The admin's password is kept encrypted with the instance's key, so the banner can show the
  credentials again at every start in demo mode.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import select

from app.demo import adrules, funnels, ranktracking
from app.demo.parts import DemoPart, DemoWorkspace, SandboxHandle
from app.platform import service
from app.platform.models import Membership, User
from app.runtime import Runtime
from app.sandbox.meta.oauth import SIM_APP_ID, SIM_APP_SECRET
from app.settings import Settings

log = logging.getLogger(__name__)

PARTS: list[DemoPart] = [adrules.PART, funnels.PART, ranktracking.PART]

PASSWORD_SECRET = "demo.admin_password"  # noqa: S105 - the name under which it is stored
"""Secret name (in the demo workspace) of the demo admin's password, encrypted at rest."""

OVERRIDES: dict[str, tuple[str, ...]] = {
    # simulator: the variables that, when set, mean "use the real one"
    "meta": ("META_GRAPH_URL",),
    "sheets": ("SHEETS_URL",),
    "serp": ("SERP_URL",),
    "search_console": ("SEARCH_CONSOLE_URL", "ADRULES_GOOGLE_TOKEN_URL"),
    "smtp": ("SMTP_HOST", "SMTP_PORT"),
}


@dataclass(frozen=True, slots=True)
class DemoCredentials:
    email: str
    password: str
    created: bool
    """True on the start that created the demo."""


def simulated(environ: Mapping[str, str]) -> list[str]:
    """The simulators to start: every one the parts offer, except those the user pointed at a
    real service by setting its variable."""
    names = [name for part in PARTS for name in part.sandboxes]
    return [n for n in names if not any(environ.get(v) for v in OVERRIDES.get(n, ()))]


def start_sandboxes(names: list[str]) -> dict[str, SandboxHandle]:
    handles: dict[str, SandboxHandle] = {}
    for part in PARTS:
        for name, start in part.sandboxes.items():
            if name in names:
                handles[name] = start()
                log.info("sandbox %s listening on %s", name, handles[name].url)
    return handles


def settings_for_sandboxes(settings: Settings, urls: Mapping[str, str]) -> Settings:
    """Point the process-wide integrations at the simulators that run (and only those)."""
    integrations = settings.integrations
    if "meta" in urls:
        # The simulator also plays Facebook Login for its own app: "Connect with Facebook" works
        # offline, and pasted tokens are checked against it.
        integrations = dataclasses.replace(
            integrations,
            meta_graph_url=urls["meta"],
            meta_dialog_url=urls["meta"],
            meta_app_id=SIM_APP_ID,
            meta_app_secret=SIM_APP_SECRET,
        )
    if "sheets" in urls:
        integrations = dataclasses.replace(integrations, sheets_url=urls["sheets"])
    if "serp" in urls:
        integrations = dataclasses.replace(
            integrations,
            serp_url=urls["serp"],
            serp_login="demo",
            serp_password="demo",  # noqa: S106
        )
    adrules = settings.adrules
    if "search_console" in urls:
        # One loopback server is the Search Console API and Google's token endpoint.
        integrations = dataclasses.replace(integrations, search_console_url=urls["search_console"])
        adrules = dataclasses.replace(adrules, google_token_url=f"{urls['search_console']}/token")
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
    return dataclasses.replace(settings, integrations=integrations, mail=mail, adrules=adrules)


def banner(settings: Settings, credentials: DemoCredentials, urls: Mapping[str, str]) -> str:
    """What the demo prints at every start: where to sign in, with what, and what is simulated."""
    real = [f"{n} ({', '.join(v)})" for n, v in OVERRIDES.items() if n not in urls]
    lines = [
        "",
        f"  Demo mode. Sign in at {settings.web.public_url}/login",
        f"    e-mail:   {credentials.email}",
        f"    password: {credentials.password}",
        f"  Simulated outside APIs: {', '.join(sorted(urls)) or 'none'}",
    ]
    if real:
        lines.append(f"  Real outside APIs (set explicitly): {', '.join(real)}")
    lines.append("  (the demo's data lives in its own organisation; its funnel is a draft)")
    return "\n".join(lines) + "\n"


async def ensure_demo(runtime: Runtime, urls: Mapping[str, str]) -> DemoCredentials:
    """Create the demo tenancy and data once; afterwards, read its credentials back."""
    email = runtime.settings.demo.admin_email
    async with runtime.db.read() as session:
        row = (
            await session.execute(
                select(Membership.workspace_id)
                .join(User, User.id == Membership.user_id)
                .where(User.email == email)
                .order_by(Membership.id)
                .limit(1)
            )
        ).first()
        stored = (
            await service.get_secret(
                session, runtime.secrets, workspace_id=row[0], name=PASSWORD_SECRET
            )
            if row is not None
            else None
        )
    if row is not None:
        await _on_start(runtime, row[0], urls)
        return DemoCredentials(email, stored or "(set before this version; reset it)", False)
    password = secrets.token_urlsafe(12)
    now = runtime.clock.now()
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
            org_role="owner",
        )
        await service.add_member(
            uow.session, user_id=user.id, workspace_id=created.workspace.id, role="admin"
        )
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=created.workspace.id,
            name=PASSWORD_SECRET,
            value=password,
            now=now,
        )
    demo = DemoWorkspace(
        organisation_id=org.id,
        workspace_id=created.workspace.id,
        admin_user_id=user.id,
        sandbox_urls=dict(urls),
    )
    for part in PARTS:
        await part.seed(runtime, demo)
    await _on_start(runtime, demo.workspace_id, urls)
    return DemoCredentials(email, password, True)


async def _on_start(runtime: Runtime, workspace_id: int, urls: Mapping[str, str]) -> None:
    for part in PARTS:
        if part.on_start is not None:
            await part.on_start(runtime, workspace_id, dict(urls))


async def demo_workspace_id(runtime: Runtime) -> int | None:
    async with runtime.db.read() as session:
        return await session.scalar(
            select(Membership.workspace_id)
            .join(User, User.id == Membership.user_id)
            .where(User.email == runtime.settings.demo.admin_email)
        )
