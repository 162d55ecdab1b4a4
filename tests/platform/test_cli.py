"""The account commands as an operator runs them: real processes, the password on standard input,
nothing secret on the output, clear failures."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from sqlalchemy import select

from app.platform import service, sessions, setup
from app.platform.models import ApiKey, User
from app.runtime import Runtime
from app.settings import Settings
from tests.factories import create_tenant

PASSWORD = "correct horse battery staple"


def _cli(settings: Settings, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.url,
        "ENCRYPTION_KEY": settings.security.encryption_key,
        "SESSION_SECRET": settings.web.session_secret,
        "LOG_LEVEL": "WARNING",
    }
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def test_create_admin_reads_the_password_from_stdin_and_prints_no_secret(
    settings: Settings, runtime: Runtime
) -> None:
    email = f"owner-{uuid.uuid4().hex[:6]}@example.com"
    done = _cli(
        settings,
        "create-admin",
        "--email",
        email.upper(),
        "--organisation",
        "Acme",
        "--workspace",
        "Main",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert email in done.stdout

    async with runtime.db.read() as session:
        user = await sessions.authenticate(session, email=email, password=PASSWORD)
        assert user is not None
        assert user.org_role == "owner"
        assert not await setup.needs_setup(session)
        [(workspace, role)] = await sessions.user_workspaces(session, user.id)
    assert (workspace.name, role) == ("Main", "admin")

    again = _cli(
        settings,
        "create-admin",
        "--email",
        email,
        "--organisation",
        "Other",
        "--workspace",
        "Main",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    assert again.returncode == 1
    assert f"a user with e-mail {email} exists" in again.stderr
    async with runtime.db.read() as session:
        count = len(list(await session.scalars(select(User.id).where(User.email == email))))
    assert count == 1


async def test_create_admin_without_a_password_source_fails_clearly(settings: Settings) -> None:
    done = _cli(
        settings, "create-admin", "--email", "a@example.com", "--organisation", "A",
        "--workspace", "W",
    )  # fmt: skip
    assert done.returncode == 1
    assert "--password-stdin" in done.stderr


async def test_reset_password_changes_it_and_ends_sessions(
    settings: Settings, runtime: Runtime
) -> None:
    email = f"reset-{uuid.uuid4().hex[:6]}@example.com"
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        owner = await setup.create_owner(
            uow.session, runtime.secrets, organisation="Acme", workspace="Main", email=email,
            password=PASSWORD, now=now,
        )  # fmt: skip
        await sessions.open_session(uow.session, user=owner.user, password=PASSWORD, now=now)

    done = _cli(
        settings, "reset-password", "--email", email, "--password-stdin", stdin="a new secret\n"
    )
    assert done.returncode == 0, done.stderr
    assert "a new secret" not in done.stdout + done.stderr
    assert "1 session(s) ended" in done.stdout
    async with runtime.db.read() as session:
        assert await sessions.authenticate(session, email=email, password=PASSWORD) is None
        assert await sessions.authenticate(session, email=email, password="a new secret")

    unknown = _cli(
        settings, "reset-password", "--email", "nobody@example.com", "--password-stdin",
        stdin="whatever123\n",
    )  # fmt: skip
    assert unknown.returncode == 1
    assert "no account" in unknown.stderr


async def test_create_api_key_prints_only_the_key_with_its_scope(
    settings: Settings, runtime: Runtime
) -> None:
    email = f"keys-{uuid.uuid4().hex[:6]}@example.com"
    async with runtime.db.write() as uow:
        await setup.create_owner(
            uow.session, runtime.secrets, organisation="Acme", workspace="Ops", email=email,
            password=PASSWORD, now=runtime.clock.now(),
        )  # fmt: skip
    done = _cli(
        settings, "create-api-key", "--email", email, "--workspace", "Ops", "--scope", "read"
    )
    assert done.returncode == 0, done.stderr
    raw = done.stdout.strip()
    assert raw.startswith("swl_")
    async with runtime.db.read() as session:
        principal = await service.principal_for_api_key(session, raw, runtime.clock.now())
        [key] = list(await session.scalars(select(ApiKey)))
    assert principal is not None
    assert principal.scope == "read"
    assert key.key_hash != raw

    stranger = _cli(settings, "create-api-key", "--email", "x@example.com", "--workspace", "Ops")
    assert stranger.returncode == 1
    assert "not a member" in stranger.stderr


async def test_setup_token_matches_the_serving_instance(
    settings: Settings, runtime: Runtime
) -> None:
    done = _cli(settings, "setup-token")
    assert done.returncode == 0
    assert done.stdout.strip() == setup.setup_token(runtime.session_secret)


async def test_pl19_setup_token_once_an_owner_exists_prints_no_token(
    settings: Settings, runtime: Runtime
) -> None:
    await create_tenant(runtime, name="Acme")
    done = _cli(settings, "setup-token")
    assert done.returncode == 1
    assert done.stdout == ""
    assert setup.setup_token(runtime.session_secret) not in done.stderr
    assert "already has an owner" in done.stderr
    assert "/login" in done.stderr
