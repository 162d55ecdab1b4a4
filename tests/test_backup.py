"""``python -m app backup`` and ``restore`` (PL-3, PL-15): a busy embedded instance is backed up
online while another process writes to it, restored into another data directory, and the restored
instance holds the same rules, funnels, contacts and secrets, its secrets decrypted with the
restored key file; restore refuses a non-empty instance without ``--force``. The same on
PostgreSQL when the session runs there and ``pg_dump``/``pg_restore`` are on PATH."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select

from app.clock import SystemClock
from app.db.migrate import upgrade
from app.engines.adrules.models import Rule
from app.engines.funnels.models import Contact, Funnel
from app.platform import service
from app.runtime import Runtime
from app.settings import Settings
from app.wiring import assemble
from tests.conftest import TEST_DATABASE_URL, _create_pg_database, _drop_pg_database, is_postgres
from tests.engines.adrules.factories import create_rule
from tests.engines.funnels.factories import contact, tagging_funnel
from tests.factories import create_tenant

REPO = Path(__file__).resolve().parents[1]


def _instance(settings: Settings, url: str, key_file: Path) -> Settings:
    """``settings`` for an instance of its own: its database, its key file, the database queue."""
    return dataclasses.replace(
        settings,
        database=dataclasses.replace(settings.database, url=url),
        queue=dataclasses.replace(settings.queue, redis_url=""),
        security=dataclasses.replace(settings.security, encryption_key="", key_file=str(key_file)),
    )


def _env(instance: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ENCRYPTION_KEY", "SESSION_SECRET")}
    env.update(extra)
    env.update(
        DATABASE_URL=instance.database.url,
        KEY_FILE=instance.security.key_file,
        REDIS_URL="",
        LOG_LEVEL="WARNING",
    )
    return env


async def _cli(instance: Settings, *args: str, **env: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        *args,
        cwd=REPO,
        env=_env(instance, **env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@dataclasses.dataclass
class Filled:
    workspace_id: int
    rules: list[tuple[int, str]]
    funnels: list[tuple[int, str]]
    emails_before: set[str]


async def _fill(runtime: Runtime) -> Filled:
    tenant = await create_tenant(runtime, name="Acme")
    ws = tenant.workspace_id
    await create_rule(runtime, workspace_id=ws, status="paused")
    await tagging_funnel(runtime, ws, {"kind": "api_event", "event": "order_placed"})
    for i in range(20):
        await contact(runtime, ws, f"before{i}@example.com")
    async with runtime.db.write() as uow:
        await service.set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=ws,
            name="smtp_password",
            value="hunter2-not-really",
            now=runtime.clock.now(),
        )
    return Filled(ws, *await _state(runtime, ws))


async def _state(
    runtime: Runtime, ws: int
) -> tuple[list[tuple[int, str]], list[tuple[int, str]], set[str]]:
    async with runtime.db.read() as session:
        rules = [tuple(r) for r in await session.execute(select(Rule.id, Rule.name))]
        funnels = [tuple(r) for r in await session.execute(select(Funnel.id, Funnel.name))]
        emails = set(await session.scalars(select(Contact.email).where(Contact.workspace_id == ws)))
    return rules, funnels, emails  # type: ignore[return-value]


async def _writing(
    runtime: Runtime, ws: int, written: list[str], going: asyncio.Event, stop: asyncio.Event
) -> None:
    """Another writer: contacts, one transaction each, until told to stop; ``going`` is set once
    it has written five."""
    i = 0
    while not stop.is_set():
        email = f"during{i}@example.com"
        await contact(runtime, ws, email)
        written.append(email)
        if len(written) >= 5:
            going.set()
        i += 1
        await asyncio.sleep(0)


async def _backup_while_writing(
    source: Runtime, instance: Settings, ws: int, target: Path
) -> tuple[str, list[str]]:
    written: list[str] = []
    going, stop = asyncio.Event(), asyncio.Event()
    writer = asyncio.create_task(_writing(source, ws, written, going, stop))
    try:
        await going.wait()  # the writer is going before the backup starts
        started = len(written)
        code, out = await _cli(instance, "backup", str(target))
        ended = len(written)
    finally:
        stop.set()
        await writer
    assert code == 0, out
    assert ended > started, "the writer kept writing while the backup ran"
    return out, written


async def _check_restored(instance: Settings, filled: Filled, written: list[str]) -> None:
    runtime = assemble(instance, SystemClock())
    try:
        rules, funnels, emails = await _state(runtime, filled.workspace_id)
        assert rules == filled.rules
        assert funnels == filled.funnels
        assert filled.emails_before <= emails
        during = emails - filled.emails_before
        # One consistent snapshot: the writer's contacts up to some point, none missing before it.
        assert during == {f"during{i}@example.com" for i in range(len(during))}
        assert during <= set(written)
        async with runtime.db.read() as session:
            secret = await service.get_secret(
                session, runtime.secrets, workspace_id=filled.workspace_id, name="smtp_password"
            )
            assert await session.scalar(select(func.count()).select_from(Contact)) == len(emails)
        assert secret == "hunter2-not-really"
    finally:
        await runtime.resources.aclose()
        await runtime.db.dispose()


@pytest.fixture
async def embedded(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Settings, Runtime]]:
    instance = _instance(
        settings, f"sqlite+aiosqlite:///{tmp_path / 'a' / 'sweepline.db'}", tmp_path / "a" / "key"
    )
    (tmp_path / "a").mkdir()
    await upgrade(instance.database.url)
    runtime = assemble(instance, SystemClock())
    yield instance, runtime
    await runtime.resources.aclose()
    await runtime.db.dispose()


async def test_a_busy_embedded_instance_is_backed_up_online_and_restored_elsewhere(
    embedded: tuple[Settings, Runtime], settings: Settings, tmp_path: Path
) -> None:
    """PL-3, PL-15: the backup is taken while another process writes; the restored instance in
    another data directory serves the same rules, funnels, contacts and secrets."""
    instance, source = embedded
    filled = await _fill(source)
    out, written = await _backup_while_writing(
        source, instance, filled.workspace_id, tmp_path / "backup"
    )
    assert "backed up the sqlite database and key file" in out
    backup_db = tmp_path / "backup" / "sweepline.db"
    with sqlite3.connect(backup_db) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert (tmp_path / "backup").stat().st_mode & 0o077 == 0

    (tmp_path / "b").mkdir()
    restored = _instance(
        settings, f"sqlite+aiosqlite:///{tmp_path / 'b' / 'sweepline.db'}", tmp_path / "b" / "key"
    )
    code, out = await _cli(restored, "restore", str(tmp_path / "backup"))
    assert code == 0, out
    await _check_restored(restored, filled, written)

    # Now the instance is not empty: another restore is refused, and changes nothing.
    code, out = await _cli(restored, "restore", str(tmp_path / "backup"))
    assert code == 1
    assert "refusing to overwrite a non-empty instance" in out
    assert "--force" in out
    code, out = await _cli(restored, "restore", str(tmp_path / "backup"), "--force")
    assert code == 0, out
    await _check_restored(restored, filled, written)


async def test_restore_refuses_an_instance_with_another_key_file(
    embedded: tuple[Settings, Runtime], settings: Settings, tmp_path: Path
) -> None:
    """PL-3: a data directory whose key file is not the backup's is not overwritten (its
    secrets would become unreadable) unless forced; a backup into a used directory is refused."""
    instance, source = embedded
    await _fill(source)
    code, out = await _cli(instance, "backup", str(tmp_path / "backup"))
    assert code == 0, out
    code, out = await _cli(instance, "backup", str(tmp_path / "backup"))
    assert code == 1
    assert "not an empty directory" in out
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "key").write_text('{"encryption_key": "x", "session_secret": "y"}')
    other = _instance(
        settings, f"sqlite+aiosqlite:///{tmp_path / 'c' / 'sweepline.db'}", tmp_path / "c" / "key"
    )
    code, out = await _cli(other, "restore", str(tmp_path / "backup"))
    assert code == 1
    assert "a key file other than the backup's" in out
    assert not (tmp_path / "c" / "sweepline.db").exists()


@pytest.mark.skipif(
    not is_postgres() or not (shutil.which("pg_dump") and shutil.which("pg_restore")),
    reason="needs TEST_DATABASE_URL on PostgreSQL and the PostgreSQL client tools",
)
async def test_a_postgresql_instance_is_backed_up_with_pg_dump_and_restored(
    settings: Settings, tmp_path: Path
) -> None:
    """PL-3, PL-15: server mode backs up with pg_dump while a writer writes and restores with
    pg_restore into another database; secrets decrypt with the restored key file."""
    urls = [await _create_pg_database(TEST_DATABASE_URL) for _ in range(2)]
    runtimes: list[Any] = []
    try:
        instance = _instance(settings, urls[0], tmp_path / "a.key")
        # Server mode generates no keys: the operator's key file is given.
        keys = {"encryption_key": Fernet.generate_key().decode(), "session_secret": "s" * 48}
        (tmp_path / "a.key").write_text(json.dumps(keys))
        (tmp_path / "a.key").chmod(0o600)
        await upgrade(urls[0])
        source = assemble(instance, SystemClock())
        runtimes.append(source)
        filled = await _fill(source)
        out, written = await _backup_while_writing(
            source, instance, filled.workspace_id, tmp_path / "backup"
        )
        assert "backed up the postgresql database and key file" in out
        assert (tmp_path / "backup" / "database.dump").exists()
        restored = _instance(settings, urls[1], tmp_path / "b.key")
        code, out = await _cli(restored, "restore", str(tmp_path / "backup"))
        assert code == 0, out
        await _check_restored(restored, filled, written)
        code, out = await _cli(restored, "restore", str(tmp_path / "backup"))
        assert code == 1
        assert "refusing to overwrite a non-empty instance" in out
    finally:
        for runtime in runtimes:
            await runtime.resources.aclose()
            await runtime.db.dispose()
        for url in urls:
            await _drop_pg_database(url)


async def test_a_postgresql_backup_without_pg_dump_says_how_and_exits_1(
    settings: Settings, tmp_path: Path
) -> None:
    """PL-15: server mode needs pg_dump; without it on PATH the command says how to get it,
    writes nothing and exits 1."""
    instance = _instance(
        settings, "postgresql+asyncpg://postgres@127.0.0.1/postgres", tmp_path / "key"
    )
    code, out = await _cli(instance, "backup", str(tmp_path / "backup"), PATH="/nonexistent")
    assert code == 1
    assert "pg_dump is not on PATH" in out
    assert "postgresql-client" in out
    assert not (tmp_path / "backup").exists()
