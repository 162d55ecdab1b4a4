"""Account commands of the CLI, for scripted installs and for getting back in:

``create-admin``, ``reset-password``, ``reset-two-factor``, ``create-api-key`` and
``setup-token``.

Passwords are read from standard input with ``--password-stdin`` (one line), or asked for twice on
a terminal; they are never taken from the command line, where ``ps`` and shell histories would
keep them. Nothing secret is printed except the one thing a command exists to give (the new API
key, the setup token), alone on standard output so a script can capture it.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from datetime import timedelta
from typing import TextIO

from sqlalchemy import select

from app.db.migrate import SchemaOutOfDate, check_current, upgrade
from app.errors import DomainError
from app.platform import organisation, service, setup, two_factor
from app.platform import two_factor_events as events
from app.platform.models import Membership, User, Workspace
from app.runtime import Runtime
from app.settings import Settings

log = logging.getLogger("app")


class CommandFailed(Exception):
    """A command that cannot do what was asked; the message says why."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser(
        "create-admin", help="create an organisation, its first workspace and its owner"
    )
    admin.add_argument("--email", required=True)
    admin.add_argument("--organisation", required=True, help="name of the new organisation")
    admin.add_argument("--workspace", required=True, help="name of its first workspace")
    admin.add_argument("--name", default="", help="the person's name")
    admin.add_argument("--timezone", default="UTC", help="the workspace's time zone")
    admin.add_argument("--password-stdin", action="store_true", help="read the password from stdin")

    reset = sub.add_parser("reset-password", help="set a new password; the person's sessions end")
    reset.add_argument("--email", required=True)
    reset.add_argument("--password-stdin", action="store_true", help="read the password from stdin")

    sub.add_parser(
        "reset-two-factor",
        help="remove a person's second factor (lost phone and recovery codes); their sessions end",
    ).add_argument("--email", required=True)

    key = sub.add_parser("create-api-key", help="print a new workspace API key (shown once)")
    key.add_argument("--email", required=True, help="an admin of the workspace")
    key.add_argument("--workspace", required=True, help="the workspace's name or id")
    key.add_argument("--scope", choices=["read", "write"], default="write")
    key.add_argument("--name", default="created from the command line")
    key.add_argument("--expires-days", type=int, default=None, help="expire after N days")

    sub.add_parser("setup-token", help="print the first-run setup token")


def read_password(from_stdin: bool, stdin: TextIO) -> str:
    if from_stdin:
        password = stdin.readline().rstrip("\r\n")
        if not password:
            raise CommandFailed("no password on standard input")
        return password
    if not stdin.isatty():
        raise CommandFailed("give the password on standard input with --password-stdin")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Password again: "):
        raise CommandFailed("the two passwords differ")
    return first


async def _prepared(runtime: Runtime) -> None:
    try:
        if runtime.settings.database.is_sqlite:
            await upgrade(runtime.settings.database.url)
        else:
            await check_current(runtime.db.write_engine)
    except SchemaOutOfDate as exc:
        raise CommandFailed(str(exc)) from exc


async def create_admin(runtime: Runtime, args: argparse.Namespace, stdin: TextIO) -> str:
    await _prepared(runtime)
    password = read_password(args.password_stdin, stdin)
    async with runtime.db.write() as uow:
        owner = await setup.create_owner(
            uow.session,
            runtime.secrets,
            organisation=args.organisation,
            workspace=args.workspace,
            email=args.email,
            password=password,
            name=args.name,
            timezone=args.timezone,
            now=runtime.clock.now(),
        )
    return (
        f"created {owner.user.email}, owner of organisation {args.organisation.strip()!r} "
        f"and admin of workspace {owner.workspace.workspace.name!r} "
        f"(id {owner.workspace.workspace.id}); sign in at {runtime.settings.web.public_url}/login"
    )


async def reset_password(runtime: Runtime, args: argparse.Namespace, stdin: TextIO) -> str:
    await _prepared(runtime)
    password = read_password(args.password_stdin, stdin)
    async with runtime.db.write() as uow:
        ended = await organisation.reset_password(uow.session, email=args.email, password=password)
    return f"password changed for {args.email.strip().lower()}; {ended} session(s) ended"


async def reset_two_factor(runtime: Runtime, args: argparse.Namespace) -> str:
    await _prepared(runtime)
    async with runtime.db.write() as uow:
        user = await two_factor.remove(uow.session, email=args.email)
        await events.record(
            uow.session,
            "two_factor.disabled",
            user_id=user.id,
            organisation_id=user.organisation_id,
            now=runtime.clock.now(),
            after={"by": "an operator (python -m app reset-two-factor)"},
        )
    return (
        f"two-factor sign-in removed for {user.email}; their sessions ended (they enrol again "
        "at their next sign-in if their organisation requires it)"
    )


async def create_api_key(runtime: Runtime, args: argparse.Namespace) -> str:
    await _prepared(runtime)
    email = args.email.strip().lower()
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        row = (
            await uow.session.execute(
                select(Workspace, Membership.role)
                .join(Membership, Membership.workspace_id == Workspace.id)
                .join(User, User.id == Membership.user_id)
                .where(
                    User.email == email,
                    (Workspace.name == args.workspace) | (Workspace.id == _as_id(args.workspace)),
                )
                .order_by(Workspace.id)
                .limit(1)
            )
        ).first()
        if row is None:
            raise CommandFailed(f"{email} is not a member of a workspace {args.workspace!r}")
        workspace, role = row
        if role != "admin":
            raise CommandFailed(f"{email} is not an admin of workspace {workspace.name!r}")
        if args.expires_days is not None and args.expires_days < 1:
            raise CommandFailed("--expires-days must be at least 1")
        expires = None if args.expires_days is None else now + timedelta(days=args.expires_days)
        _, raw = await service.create_api_key(
            uow.session,
            workspace_id=workspace.id,
            name=args.name[:200],
            now=now,
            scope=args.scope,
            expires_at=expires,
        )
    return raw


async def setup_token(runtime: Runtime) -> str:
    """The setup token while nobody owns the instance. Once an owner exists the token opens
    nothing, so printing it would only mislead: say how to get in instead."""
    async with runtime.db.read() as session:
        if not await setup.needs_setup(session):
            raise CommandFailed(
                "this instance already has an owner, so the setup page is closed: sign in at "
                f"{runtime.settings.web.public_url}/login (a forgotten password: "
                "python -m app reset-password)"
            )
    return setup.setup_token(runtime.session_secret)


async def log_first_run(runtime: Runtime) -> None:
    """While nobody owns the instance, log where to set it up and its setup token (the operator
    reads it in the log; a stranger reaching the port first has no way to it)."""
    async with runtime.db.read() as session:
        if not await setup.needs_setup(session):
            return
    log.warning(
        "no owner yet: set up the organisation, its first workspace and the owner at %s/setup "
        "with setup token %s (or script it: python -m app create-admin)",
        runtime.settings.web.public_url,
        setup.setup_token(runtime.session_secret),
    )


def _as_id(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 19 else -1


async def run(
    command: str, settings: Settings, args: argparse.Namespace, stdin: TextIO = sys.stdin
) -> int:
    """Run one account command; a failure prints its reason on stderr and exits 1."""
    from app.wiring import assemble

    runtime = assemble(settings)
    try:
        if command == "setup-token":
            print(await setup_token(runtime))
        elif command == "create-admin":
            print(await create_admin(runtime, args, stdin))
        elif command == "reset-password":
            print(await reset_password(runtime, args, stdin))
        elif command == "reset-two-factor":
            print(await reset_two_factor(runtime, args))
        elif command == "create-api-key":
            print(await create_api_key(runtime, args))
        else:  # pragma: no cover - argparse only lets the commands above through
            raise CommandFailed(f"unknown command {command}")
    except (CommandFailed, DomainError) as exc:
        print(f"{command}: {_reason(exc)}", file=sys.stderr)
        return 1
    finally:
        await runtime.db.dispose()
    return 0


def _reason(exc: Exception) -> str:
    if isinstance(exc, DomainError):
        return exc.message
    return str(exc)


ACCOUNT_COMMANDS = (
    "create-admin",
    "reset-password",
    "reset-two-factor",
    "create-api-key",
    "setup-token",
)
