"""Command line: ``python -m app serve | worker | migrate | check-schema | env | backup | restore``
and the account commands (``create-admin``, ``reset-password``, ``reset-two-factor``,
``create-api-key``, ``setup-token``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app import commands, event_loop, telemetry
from app.db.migrate import SchemaOutOfDate, check_current, schema_drift, upgrade
from app.logs import configure_logging
from app.settings import Settings, load_settings
from app.settings_docs import describe_environment
from app.settings_fields import SettingsError

log = logging.getLogger("app")


def _serve(settings: Settings) -> int:
    import uvicorn

    from app.web.app import create_app
    from app.wiring import assemble

    if settings.demo.enabled:
        from app import demo
        from app.demo.mailbox import PAGES as DEMO_PAGES

        handles = demo.start_sandboxes(demo.simulated(os.environ))
        urls = {k: h.url for k, h in handles.items()}
        settings = demo.settings_for_sandboxes(settings, urls)
        extra_pages: list[Any] = DEMO_PAGES
    else:
        handles, urls, extra_pages = {}, {}, []
    runtime = assemble(settings)

    async def prepare() -> str | None:
        """Migrate (or check), then say what a person needs to get in."""
        try:
            if settings.database.is_sqlite:
                await upgrade(settings.database.url)
            else:
                await check_current(runtime.db.write_engine)
            if settings.demo.enabled:
                from app import demo

                return demo.banner(settings, await demo.ensure_demo(runtime, urls), urls)
            await commands.log_first_run(runtime)
            return None
        finally:
            await runtime.db.dispose()

    try:
        notice = asyncio.run(prepare())
    except SchemaOutOfDate as exc:
        log.error("%s", exc)
        return 2
    if notice is not None:
        print(notice, flush=True)
    app = create_app(settings, runtime, extra_pages=extra_pages, serving=True)
    try:
        uvicorn.run(
            app,
            host=settings.web.host,
            port=settings.web.port,
            log_level=settings.web.log_level.lower(),
            timeout_graceful_shutdown=int(settings.queue.shutdown_grace_seconds) + 5,
            timeout_keep_alive=settings.web.keep_alive_seconds,
            access_log=False,
            log_config=None,
            loop=event_loop.UVICORN_LOOP,
            # Forwarded headers are read by app.web.client_address from TRUSTED_PROXIES only.
            proxy_headers=False,
        )
    finally:
        for handle in handles.values():
            handle.stop()
    return 0


async def _worker(settings: Settings) -> int:
    from app.runtime import run_worker_process
    from app.wiring import assemble

    return await run_worker_process(assemble(settings))


async def _check_schema(url: str) -> int:
    """``alembic check`` for this database: at the newest migration, and built as the models
    declare (exit 1 otherwise, each difference on a line of its own)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.models import metadata

    engine = create_async_engine(url)
    try:
        await check_current(engine)
    except SchemaOutOfDate as exc:
        print(f"check-schema: {exc}", file=sys.stderr)
        return 1
    finally:
        await engine.dispose()
    drift = await schema_drift(url, metadata)
    if drift:
        print(
            f"check-schema: the database differs from the models ({len(drift)}):", file=sys.stderr
        )
        for line in drift:
            print(f"  {line}", file=sys.stderr)
        return 1
    print("check-schema: the database matches the models")
    return 0


def _backup_or_restore(settings: Settings, args: argparse.Namespace) -> int:
    from app import backup

    try:
        if args.command == "backup":
            outcome = backup.backup(settings, args.path)
        else:
            outcome = backup.restore(settings, args.path, force=args.force)
    except backup.BackupError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1
    for line in outcome.lines:
        print(line)
    return 0


def environment_table() -> str:
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for var in describe_environment():
        default = f"`{var.default}`" if var.default else "(empty)"
        lines.append(f"| `{var.name}` | {default} | {var.doc.replace('|', '/')} |")
    return "\n".join(lines)


def update_readme_table(path: Path, table: str) -> None:
    text = path.read_text()
    start, end = "<!-- env-table:start -->", "<!-- env-table:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{table}\n{end}{tail}")


def main(
    argv: list[str] | None = None, *, run: Callable[[argparse.Namespace], int] | None = None
) -> int:
    """Parse ``argv`` and run the command (``run``: what runs a parsed command other than
    ``env``; tests hand their own to see how the entry point reports its failures)."""
    parser = argparse.ArgumentParser(prog="python -m app", description="Sweepline")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="API, dashboard, webhooks, sweepers and workers in one process")
    sub.add_parser("worker", help="queue workers only (scale-out)")
    sub.add_parser("migrate", help="apply database migrations")
    sub.add_parser(
        "check-schema",
        help="compare the migrated database with the models; exit 1 listing each difference",
    )
    env_cmd = sub.add_parser("env", help="print every environment variable as a Markdown table")
    env_cmd.add_argument(
        "--update-readme", metavar="PATH", help="write the table between the env-table markers"
    )
    backup_cmd = sub.add_parser(
        "backup", help="copy the database (online) and the key file into a new directory"
    )
    backup_cmd.add_argument("path", type=Path, help="a new (or empty) directory")
    restore_cmd = sub.add_parser("restore", help="restore a backup directory into this instance")
    restore_cmd.add_argument("path", type=Path, help="a directory written by backup")
    restore_cmd.add_argument(
        "--force", action="store_true", help="replace an instance that is not empty"
    )
    commands.add_parsers(sub)
    args = parser.parse_args(argv)

    if args.command == "env":
        # Describes the variables without reading them: it is where to look a mistyped one up.
        table = environment_table()
        if args.update_readme:
            update_readme_table(Path(args.update_readme), table)
        else:
            print(table)
        return 0
    try:
        return (run or _run)(args)
    except SettingsError as exc:
        # A mistyped variable is the operator's to fix: its name and the problem, not a traceback.
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    settings = load_settings(os.environ)
    configure_logging(settings.web.log_format, settings.web.log_level)

    if args.command == "migrate":
        asyncio.run(upgrade(settings.database.url))
        log.info("database is at the newest schema")
        return 0
    if args.command == "check-schema":
        return asyncio.run(_check_schema(settings.database.url))
    if args.command in ("backup", "restore"):
        return _backup_or_restore(settings, args)
    if args.command in commands.ACCOUNT_COMMANDS:
        return asyncio.run(commands.run(args.command, settings, args))
    # Before the runtime and the app are built: they trace only when a tracer is installed.
    shutdown_tracing = telemetry.configure(settings.telemetry)
    try:
        if args.command == "worker":
            return event_loop.run(_worker(settings))
        return _serve(settings)
    finally:
        if shutdown_tracing is not None:
            shutdown_tracing()  # exports the spans still buffered


if __name__ == "__main__":
    sys.exit(main())
