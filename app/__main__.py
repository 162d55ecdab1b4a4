"""Command line: ``python -m app serve | worker | migrate | env``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from app.db.migrate import SchemaOutOfDate, check_current, upgrade
from app.logs import configure_logging
from app.settings import Settings, describe_environment, load_settings

log = logging.getLogger("app")


def _serve(settings: Settings) -> int:
    import uvicorn

    from app.demo import ensure_demo, settings_for_sandboxes, start_sandboxes
    from app.web.app import create_app
    from app.wiring import assemble

    handles = {}
    if settings.demo.enabled:
        handles = start_sandboxes()
        settings = settings_for_sandboxes(settings, {k: h.url for k, h in handles.items()})
    runtime = assemble(settings)

    async def prepare() -> str | None:
        try:
            if settings.database.is_sqlite:
                await upgrade(settings.database.url)
            else:
                await check_current(runtime.db.write_engine)
            if settings.demo.enabled:
                return await ensure_demo(runtime, {k: h.url for k, h in handles.items()})
            return None
        finally:
            await runtime.db.dispose()

    try:
        password = asyncio.run(prepare())
    except SchemaOutOfDate as exc:
        log.error("%s", exc)
        return 2
    if password is not None:
        print(
            "\n  Demo workspace ready. Sign in at "
            f"{settings.web.public_url}/login\n"
            f"    e-mail:   {settings.demo.admin_email}\n"
            f"    password: {password}\n"
            "  (shown once; it is stored hashed)\n",
            flush=True,
        )
    app = create_app(settings, runtime)
    try:
        uvicorn.run(
            app,
            host=settings.web.host,
            port=settings.web.port,
            log_level=settings.web.log_level.lower(),
            timeout_graceful_shutdown=int(settings.queue.shutdown_grace_seconds) + 5,
            access_log=False,
            log_config=None,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="Sweepline")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="API, dashboard, webhooks, sweepers and workers in one process")
    sub.add_parser("worker", help="queue workers only (scale-out)")
    sub.add_parser("migrate", help="apply database migrations")
    env_cmd = sub.add_parser("env", help="print every environment variable as a Markdown table")
    env_cmd.add_argument(
        "--update-readme", metavar="PATH", help="write the table between the env-table markers"
    )
    args = parser.parse_args(argv)

    settings = load_settings(os.environ)
    configure_logging(settings.web.log_format, settings.web.log_level)

    if args.command == "env":
        table = environment_table()
        if args.update_readme:
            update_readme_table(Path(args.update_readme), table)
        else:
            print(table)
        return 0
    if args.command == "migrate":
        asyncio.run(upgrade(settings.database.url))
        log.info("database is at the newest schema")
        return 0
    if args.command == "worker":
        return asyncio.run(_worker(settings))
    return _serve(settings)


if __name__ == "__main__":
    sys.exit(main())
