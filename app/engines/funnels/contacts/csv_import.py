"""CSV import of contacts as a bulk job: checked whole when it is submitted (header, column
mapping, row count), applied in chunks by a background job, with a per-row report.

A chunk creates or updates (by e-mail) up to ``BULK_CHUNK_ITEMS`` contacts in a few multi-row
statements, adds their tags and lists and records the events funnels react to, all in the chunk's
transaction. A row that breaks a rule is refused before anything is written and reported with
its number (the header is row 1); the rows around it are kept. Should the database still refuse
a chunk, its rows are applied one by one, each in a savepoint, so only the offending row is
reported. The job resumes after the last committed chunk: the cursor is the character offset of
the next row in the uploaded text.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DBAPIError

from app.db.dialect import insert
from app.db.locks import is_lock_timeout
from app.db.session import UnitOfWork, WriteSession
from app.db.tenancy import scoped_select
from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.import_report import masked as _masked
from app.engines.funnels.contacts.memberships import (
    LISTS,
    TAGS,
    add_memberships,
    clean_names,
    names_problem,
    over_limit,
)
from app.engines.funnels.contacts.store import ContactData, check_contact
from app.engines.funnels.events.work.segment_triggers import contacts_changed
from app.engines.funnels.models import Contact, ContactEvent
from app.errors import ValidationFailed
from app.scheduling.bulk import BulkKind, Chunk, ItemError, StepInput, bulk_job_spec, submit
from app.scheduling.bulk_models import BulkJob
from app.scheduling.queue import JobQueue

STANDARD_COLUMNS = ("email", "phone", "first_name", "last_name", "timezone")
MEMBERSHIP_COLUMNS = ("tags", "lists")
SKIP = ""
"""A column mapped to this is not imported."""
MAX_COLUMNS = 200


# -- the plan: checked once, when the import is submitted ----------------------------------------


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What each CSV column becomes, and how many data rows the file holds."""

    header: list[str]
    targets: list[str]
    """Per column: a standard attribute, a custom field key, ``tags``, ``lists`` or ``""``."""
    rows: int
    body_offset: int
    """Where the first data row starts in the text."""

    def params(self) -> dict[str, Any]:
        return {"header": self.header, "targets": self.targets, "body_offset": self.body_offset}


def plan_import(
    text: str,
    field_keys: Mapping[str, str],
    *,
    columns: Mapping[str, str] | None,
    max_rows: int,
) -> ImportPlan:
    """Check the file before anything is written.

    Args:
        text: the CSV text (a header row, then one contact per row).
        field_keys: the workspace's custom fields (key -> type).
        columns: CSV header -> what it becomes (a standard attribute, a custom field key,
            ``tags``, ``lists``, or ``""`` to leave the column out); unnamed columns map to
            themselves.
        max_rows: the most data rows accepted.

    Raises:
        ValidationFailed: naming ``csv`` or ``columns.<header>``.
    """
    reader = _TrackedRows(text, 0)
    header = _read_header(reader)
    targets = _targets(header, field_keys, columns)
    body_offset = reader.pos
    rows = _count_rows(reader, max_rows)
    return ImportPlan(header=header, targets=targets, rows=rows, body_offset=body_offset)


def _read_header(reader: _TrackedRows) -> list[str]:
    """The header row, trimmed (a byte-order mark left by spreadsheets removed)."""
    try:
        header = next(csv.reader(reader), None)
    except csv.Error as exc:
        raise ValidationFailed.field("csv", f"the header row cannot be read: {exc}") from None
    if not header or not any(h.strip() for h in header):
        raise ValidationFailed.field("csv", "the file is empty: a header row is required")
    header = [h.strip().lstrip("\ufeff") for h in header]
    if len(header) > MAX_COLUMNS:
        raise ValidationFailed.field("csv", f"at most {MAX_COLUMNS} columns ({len(header)} given)")
    return header


def _targets(
    header: list[str], field_keys: Mapping[str, str], columns: Mapping[str, str] | None
) -> list[str]:
    """What each column becomes: every one known, none twice, an ``email`` among them."""
    mapping = dict(columns or {})
    for name in mapping:
        if name not in header:
            raise ValidationFailed.field(f"columns.{name}", "no such column in the file's header")
    known = set(STANDARD_COLUMNS) | set(field_keys) | set(MEMBERSHIP_COLUMNS)
    targets = [mapping.get(h, h) for h in header]
    unknown = [h for h, t in zip(header, targets, strict=True) if t != SKIP and t not in known]
    if unknown:
        raise ValidationFailed.field(
            "csv",
            f"unknown columns: {', '.join(unknown)} (map them to a contact attribute, a custom "
            "field, tags or lists, or leave them out)",
        )
    used = [t for t in targets if t != SKIP]
    twice = sorted({t for t in used if used.count(t) > 1})
    if twice:
        raise ValidationFailed.field("columns", f"more than one column becomes {', '.join(twice)}")
    if "email" not in targets:
        raise ValidationFailed.field("csv", "the CSV needs an 'email' column")
    return targets


def _count_rows(reader: _TrackedRows, max_rows: int) -> int:
    """The data rows after the header, refused past ``max_rows`` or at an unreadable row."""
    rows = 0
    try:
        for record in csv.reader(reader):
            if record:
                rows += 1
                if rows > max_rows:
                    raise ValidationFailed.field(
                        "csv", f"an import holds at most {max_rows} rows", code="too_many_rows"
                    )
    except csv.Error as exc:
        raise ValidationFailed.field("csv", f"row {rows + 2} cannot be read: {exc}") from None
    return rows


class _TrackedRows(Iterator[str]):
    """The text's lines from a character offset, remembering how far the CSV reader consumed:
    after each record ``pos`` is where the next one starts, which is what a resumed job seeks
    to."""

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos

    def __next__(self) -> str:
        if self.pos >= len(self.text):
            raise StopIteration
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end + 1
        line = self.text[self.pos : end]
        self.pos = end
        return line


# -- one chunk ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    number: int
    data: ContactData
    fields: dict[str, Any] = field(default_factory=dict)
    values: tuple[str, ...] = ()


def _csv_value(kind: str, raw: str) -> Any:
    raw = raw.strip()
    if raw == "":
        return None
    if kind == "number":
        try:
            return int(raw)
        except ValueError:
            try:
                return float(raw)
            except ValueError:
                return raw  # refused by the type check, with the field named
    if kind == "boolean":
        low = raw.lower()
        if low in {"true", "yes", "1"}:
            return True
        if low in {"false", "no", "0"}:
            return False
        return raw
    return raw


def _row_data(targets: list[str], values: list[str], types: Mapping[str, str]) -> ContactData:
    by_target: dict[str, str] = {}
    for target, value in zip(targets, values, strict=False):
        if target != SKIP:
            by_target[target] = value
    fields = {
        k: _csv_value(types[k], v) for k, v in by_target.items() if k in types and v is not None
    }
    return ContactData(
        email=(by_target.get("email") or "").strip().lower() or None,
        phone=by_target.get("phone") or None,
        first_name=by_target.get("first_name"),
        last_name=by_target.get("last_name"),
        timezone=(by_target.get("timezone") or "").strip() or None,
        fields={k: v for k, v in fields.items() if v is not None},
        tags=[t for t in by_target.get("tags", "").split(";") if t.strip()]
        if "tags" in targets
        else None,
        lists=[t for t in by_target.get("lists", "").split(";") if t.strip()]
        if "lists" in targets
        else None,
    )


def _refusal(number: int, exc: ValidationFailed) -> ItemError:
    detail = exc.details[0] if exc.details else {"field": "", "message": exc.message}
    return ItemError(number, str(detail.get("field", "")), str(detail.get("message", exc.message)))


def _check_row(row: _Row, types: Mapping[str, str]) -> ItemError | None:
    if not row.data.email:
        return ItemError(row.number, "email", "e-mail is required")
    try:
        row.fields = check_contact(row.data, types)
    except ValidationFailed as exc:
        return _refusal(row.number, exc)
    for kind, given in ((TAGS, row.data.tags), (LISTS, row.data.lists)):
        problem = names_problem(kind, clean_names(given or []))
        if problem is not None:
            return ItemError(row.number, kind.field, problem)
    return None


async def import_step(session: WriteSession, step: StepInput) -> Chunk:
    """Read up to ``step.limit`` rows from the cursor and apply them."""
    job = step.job
    targets: list[str] = list(job.params["targets"])
    header_len = len(targets)
    offset = int(job.cursor.get("offset", job.params["body_offset"]))
    number = int(job.cursor.get("row", 1))
    types = await field_types(session, job.workspace_id)
    reader = _TrackedRows(step.source, offset)
    records = csv.reader(reader)
    rows: list[_Row] = []
    errors: list[ItemError] = []
    emails: set[str] = set()
    consumed = 0
    next_offset = offset
    finished = False
    while len(rows) + len(errors) < step.limit:
        before = reader.pos
        try:
            values = next(records)
        except StopIteration:
            finished = True
            break
        if not values:
            next_offset = reader.pos
            continue
        row = _Row(number + 1, _row_data(targets, values, types), values=tuple(values))
        if row.data.email and row.data.email in emails:
            # The same address twice in one chunk: it starts the next chunk, where it updates
            # the contact this chunk creates, as if the rows were applied one by one.
            reader.pos = before
            break
        number += 1
        consumed += 1
        next_offset = reader.pos
        problem = (
            ItemError(
                row.number, "", f"the row has {len(values)} values; the header has {header_len}"
            )
            if len(values) > header_len
            else _check_row(row, types)
        )
        if problem is not None:
            errors.append(_masked(problem, values))
            continue
        assert row.data.email is not None
        emails.add(row.data.email)
        rows.append(row)
    finished = finished or next_offset >= len(step.source)
    created, updated, more_errors = await _apply_or_isolate(
        session, job.workspace_id, rows, step.now
    )
    return Chunk(
        cursor={"offset": next_offset, "row": number},
        processed=consumed,
        finished=finished,
        counters={"created": created, "updated": updated, "failed": len(errors) + len(more_errors)},
        errors=sorted(errors + more_errors, key=lambda e: e.item),
    )


async def _apply_or_isolate(
    session: WriteSession, workspace_id: int, rows: list[_Row], now: datetime
) -> tuple[int, int, list[ItemError]]:
    """All rows in one go; if the database refuses that, one row per savepoint, so only the row
    it refuses is reported."""
    if not rows:
        return 0, 0, []
    try:
        async with session.begin_nested():
            return await _apply(session, workspace_id, rows, now)
    except DBAPIError as exc:
        if is_lock_timeout(exc):
            raise
    created = updated = 0
    errors: list[ItemError] = []
    for row in rows:
        try:
            async with session.begin_nested():
                c, u, refused = await _apply(session, workspace_id, [row], now)
            created += c
            updated += u
            errors += refused
        except DBAPIError as exc:
            if is_lock_timeout(exc):
                raise
            refusal = ItemError(row.number, "", f"the database refused the row: {exc.orig}")
            masked = _masked(refusal, row.values)
            errors.append(ItemError(masked.item, "", masked.message[:300]))
    return created, updated, errors


async def _apply(
    session: WriteSession, workspace_id: int, rows: list[_Row], now: datetime
) -> tuple[int, int, list[ItemError]]:
    """Create or update the rows' contacts (distinct e-mails), then their tags and lists, the
    events and the segment check. Returns ``(created, updated, refused rows)``."""
    by_email = {row.data.email: row for row in rows if row.data.email}
    existing = {
        c.email: c
        for c in await session.scalars(
            scoped_select(Contact, workspace_id).where(
                Contact.deleted_at.is_(None), Contact.email.in_(list(by_email))
            )
        )
        if c.email
    }
    # Tag and list bounds first, so a refused row changes nothing.
    refused: list[ItemError] = []
    for kind in (TAGS, LISTS):
        wanted = {
            existing[e].id: clean_names(getattr(r.data, kind.field) or [])
            for e, r in by_email.items()
            if e in existing
        }
        reached = await over_limit(session, kind, wanted)
        for email, contact in list(existing.items()):
            if contact.id in reached:
                refused.append(
                    ItemError(
                        by_email[email].number,
                        kind.field,
                        f"a contact holds at most {kind.limit} {kind.field} "
                        f"(this row would make {reached[contact.id]})",
                    )
                )
                del existing[email]
                del by_email[email]
    fresh = [r for e, r in by_email.items() if e not in existing]
    contact_of = {e: c.id for e, c in existing.items()}
    contact_of |= await _create(session, workspace_id, fresh, now)
    for email, contact in existing.items():
        _update(contact, by_email[email], now)
    await session.flush()
    for kind in (TAGS, LISTS):
        wanted = {
            contact_of[e]: clean_names(getattr(r.data, kind.field) or [])
            for e, r in by_email.items()
            if getattr(r.data, kind.field)
        }
        if wanted:
            await add_memberships(session, workspace_id, kind, wanted, now)
    await contacts_changed(
        session, workspace_id=workspace_id, contact_ids=list(contact_of.values()), now=now
    )
    return len(fresh), len(existing), refused


async def _create(
    session: WriteSession, workspace_id: int, rows: list[_Row], now: datetime
) -> dict[str, int]:
    if not rows:
        return {}
    values = [
        {
            "workspace_id": workspace_id,
            "email": r.data.email,
            "phone": r.data.phone or None,
            "first_name": r.data.first_name or "",
            "last_name": r.data.last_name or "",
            "timezone": r.data.timezone or "UTC",
            "fields": r.fields,
            "consent": {},
            "suppressed": {},
            "created_at": now,
            "updated_at": now,
        }
        for r in rows
    ]
    table = Contact.__table__
    result = await session.execute(
        insert(session, table).returning(table.c.id, table.c.email), values
    )
    ids = {str(email): int(cid) for cid, email in result.all()}
    await session.execute(
        insert(session, ContactEvent.__table__),
        [
            {
                "workspace_id": workspace_id,
                "contact_id": ids[str(r.data.email)],
                "name": "contact_created",
                "source": "system",
                "external_id": None,
                "properties": {},
                "occurred_at": now,
                "created_at": now,
            }
            for r in rows
        ],
    )
    return ids


def _update(contact: Contact, row: _Row, now: datetime) -> None:
    """What an import changes on an existing contact: the columns it has (an empty phone or
    time zone leaves them as they are); tags and lists are only ever added."""
    data = row.data
    if data.phone:
        contact.phone = data.phone
    if data.first_name is not None:
        contact.first_name = data.first_name
    if data.last_name is not None:
        contact.last_name = data.last_name
    if data.timezone:
        contact.timezone = data.timezone
    if row.fields:
        contact.fields = {**contact.fields, **row.fields}
    contact.updated_at = now


CONTACTS_IMPORT = BulkKind("funnels.contacts_import", import_step, title="Contact import")
CONTACTS_IMPORT_JOB = bulk_job_spec(CONTACTS_IMPORT)


async def start_import(
    uow: UnitOfWork,
    queue: JobQueue,
    *,
    workspace_id: int,
    text: str,
    columns: Mapping[str, str] | None,
    max_rows: int,
    now: datetime,
) -> BulkJob:
    """Check the file (422 before anything is written) and queue its import."""
    plan = plan_import(
        text, await field_types(uow.session, workspace_id), columns=columns, max_rows=max_rows
    )
    return await submit(
        uow,
        queue,
        CONTACTS_IMPORT_JOB,
        workspace_id=workspace_id,
        kind=CONTACTS_IMPORT,
        now=now,
        params=plan.params(),
        source=text,
        total=plan.rows,
    )
