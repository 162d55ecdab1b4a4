"""``python -m app backup PATH`` and ``python -m app restore PATH``: the instance's data and keys.

A backup is a directory holding the database and the key file, with ``manifest.json`` saying
what is in it:

- ``sweepline.db`` — an embedded (SQLite) instance, copied with SQLite's online backup API while
  the service keeps writing: the copy is one consistent snapshot (a reader's view in write-ahead
  logging mode, taken in one step), never a torn file;
- ``database.dump`` — a PostgreSQL instance, by ``pg_dump --format=custom`` (one consistent
  snapshot too); without ``pg_dump`` on ``PATH`` the command says how to get it and exits 1;
- ``sweepline.key`` — ``KEY_FILE``, without which the secrets in the database cannot be read.
  When the keys come from ``ENCRYPTION_KEY`` and ``SESSION_SECRET`` instead, the manifest says so:
  keep those values with the backup.

Restore refuses to overwrite an instance that is not empty (it has an organisation, or a key file
other than the backup's) unless ``--force`` is given; it then writes the database (SQLite's
backup API again, or ``pg_restore --clean``), the key file, and brings the schema up to date.
Stop the service before restoring into its database.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.clock import SystemClock
from app.db.migrate import current_heads, upgrade
from app.settings import Settings

MANIFEST = "manifest.json"
SQLITE_FILE = "sweepline.db"
PG_DUMP_FILE = "database.dump"
KEY_FILE = "sweepline.key"
FORMAT = 1

PG_HOW = (
    "{tool} is not on PATH: install the PostgreSQL client of your server's major version "
    "(Debian/Ubuntu: apt-get install postgresql-client), or back up by hand with "
    "pg_dump --format=custom --file=database.dump DATABASE and copy KEY_FILE beside it."
)


class BackupError(Exception):
    """A backup or restore that cannot go ahead; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Outcome:
    path: Path
    lines: list[str]


# -- backup --------------------------------------------------------------------------------------


def backup(settings: Settings, target: Path) -> Outcome:
    """Write a backup of the instance ``settings`` describe into the directory ``target`` (new,
    or empty)."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target} exists and is not an empty directory: choose a new one")
    if not settings.database.is_sqlite:
        _tool("pg_dump")  # before anything is written
    created = not target.exists()
    # The database holds password hashes and the key file decrypts its secrets: owner only.
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.chmod(0o700)
    try:
        return _write_backup(settings, target)
    except BaseException:
        # Half a backup must not pass for one: what was written goes.
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for child in target.iterdir():
                child.unlink()
        raise


def _write_backup(settings: Settings, target: Path) -> Outcome:
    url = make_url(settings.database.url)
    lines: list[str] = []
    if settings.database.is_sqlite:
        _sqlite_copy(_sqlite_path(url), target / SQLITE_FILE)
        database = SQLITE_FILE
    else:
        _pg_dump(url, target / PG_DUMP_FILE)
        database = PG_DUMP_FILE
    key = Path(settings.security.key_file)
    keys_from_environment = bool(settings.security.encryption_key)
    if key.exists():
        shutil.copyfile(key, target / KEY_FILE)
        (target / KEY_FILE).chmod(0o600)
    elif not keys_from_environment:
        lines.append(f"warning: no key file at {key}: the backup's secrets cannot be decrypted")
    if keys_from_environment:
        lines.append(
            "note: ENCRYPTION_KEY and SESSION_SECRET come from the environment: keep their "
            "values with this backup (they are not in it)"
        )
    manifest = {
        "format": FORMAT,
        "created_at": SystemClock().now().isoformat(),
        "dialect": "sqlite" if settings.database.is_sqlite else "postgresql",
        "database": database,
        "key_file": KEY_FILE if key.exists() else None,
        "keys_from_environment": keys_from_environment,
        "schema": sorted(asyncio.run(_heads(settings.database.url))),
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    (target / database).chmod(0o600)
    what = "database and key file" if manifest["key_file"] else "database"
    lines.insert(0, f"backed up the {manifest['dialect']} {what} into {target}")
    return Outcome(target, lines)


def _sqlite_path(url: URL) -> Path:
    if not url.database or url.database == ":memory:":
        raise BackupError("DATABASE_URL names no SQLite file to back up")
    return Path(url.database)


def _sqlite_copy(source: Path, destination: Path) -> None:
    """One consistent snapshot of a live database: the backup API copies every page in one step
    under a read transaction, which in write-ahead logging mode never blocks the writers."""
    if not source.exists():
        raise BackupError(f"there is no database at {source}")
    src = sqlite3.connect(source)
    dst = sqlite3.connect(destination)
    try:
        src.execute("PRAGMA busy_timeout = 30000")
        src.backup(dst)
        # The copy is one file, without a write-ahead log beside it.
        dst.execute("PRAGMA journal_mode = DELETE")
    finally:
        dst.close()
        src.close()


def _libpq(url: URL) -> tuple[str, dict[str, str]]:
    """A libpq connection URI without the password (it goes in ``PGPASSWORD``, not in the
    process list), and the environment to run a client with."""
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    plain = url.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(PG_HOW.format(tool=name))
    return found


def _pg_dump(url: URL, destination: Path) -> None:
    dsn, env = _libpq(url)
    cmd = [_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges"]
    _run([*cmd, f"--file={destination}", f"--dbname={dsn}"], env, "pg_dump")


def _run(cmd: list[str], env: dict[str, str], what: str) -> None:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise BackupError(f"{what} failed: {done.stderr.strip() or done.returncode}")


async def _heads(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        return await current_heads(engine)
    finally:
        await engine.dispose()


# -- restore -------------------------------------------------------------------------------------


def restore(settings: Settings, source: Path, *, force: bool) -> Outcome:
    """Restore the backup in ``source`` into the instance ``settings`` describe."""
    manifest = _manifest(source)
    dialect = "sqlite" if settings.database.is_sqlite else "postgresql"
    if manifest["dialect"] != dialect:
        raise BackupError(
            f"the backup is of a {manifest['dialect']} database; DATABASE_URL names {dialect}"
        )
    key_copy = source / KEY_FILE if manifest.get("key_file") else None
    if not force:
        reason = _not_empty(settings, key_copy)
        if reason:
            raise BackupError(
                f"refusing to overwrite a non-empty instance ({reason}); "
                "restore with --force to replace it"
            )
    url = make_url(settings.database.url)
    if dialect == "sqlite":
        _sqlite_restore(source / SQLITE_FILE, _sqlite_path(url))
    else:
        dsn, env = _libpq(url)
        cmd = [_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--no-privileges"]
        _run([*cmd, f"--dbname={dsn}", str(source / PG_DUMP_FILE)], env, "pg_restore")
    lines = [f"restored the {dialect} database from {source}"]
    if key_copy is not None:
        key = Path(settings.security.key_file)
        key.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(key_copy, key)
        key.chmod(0o600)
        lines.append(f"restored the key file into {key}")
    elif manifest.get("keys_from_environment"):
        lines.append("set ENCRYPTION_KEY and SESSION_SECRET to the backed-up instance's values")
    asyncio.run(upgrade(settings.database.url))
    lines.append("the schema is up to date")
    return Outcome(source, lines)


def _manifest(source: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((source / MANIFEST).read_text())
    except FileNotFoundError:
        raise BackupError(f"{source} is not a backup (no {MANIFEST})") from None
    except ValueError as exc:
        raise BackupError(f"{source / MANIFEST} is not readable: {exc}") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{source} is a backup of an unknown format {manifest.get('format')!r}")
    return manifest


def _not_empty(settings: Settings, key_copy: Path | None) -> str | None:
    """Why the instance is not empty (None: it is)."""
    key = Path(settings.security.key_file)
    if key.exists() and (key_copy is None or key.read_bytes() != key_copy.read_bytes()):
        return f"a key file other than the backup's is at {key}"
    if settings.database.is_sqlite:
        path = _sqlite_path(make_url(settings.database.url))
        if not path.exists():
            return None
    found = asyncio.run(_organisations(settings.database.url))
    return f"its database holds {found} organisation(s)" if found else None


async def _organisations(url: str) -> int:
    """How many organisations the database at ``url`` holds (0 without the table)."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            if "organisations" not in tables:
                return 0
            return int(
                (await conn.execute(text("SELECT count(*) FROM organisations"))).scalar_one()
            )
    finally:
        await engine.dispose()


def _sqlite_restore(backup_file: Path, target: Path) -> None:
    """Write the backup's pages over the target database through SQLite itself (so a
    write-ahead log left beside the target is taken into account, not left to contradict it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{backup_file}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode = WAL")
    finally:
        dst.close()
        src.close()
