"""A workspace's logo: uploaded by an admin, shown on the e-mail report and on shared report pages.

Only PNG and JPEG are taken, recognised by their first bytes (never by the name or the type the
browser claims): an SVG is a document that can carry scripts, so it is refused whatever it is
called. The image is kept in the database, at most :data:`MAX_LOGO_BYTES`.
"""

from __future__ import annotations

from datetime import datetime

from app.db.session import ReadSession, WriteSession
from app.errors import ValidationFailed
from app.platform import audit
from app.platform.models import WorkspaceLogo

MAX_LOGO_BYTES = 200 * 1024
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"


def image_type(data: bytes) -> str | None:
    """``png`` or ``jpeg`` when the bytes start like one, else None."""
    if data.startswith(PNG_MAGIC):
        return "png"
    if data.startswith(JPEG_MAGIC):
        return "jpeg"
    return None


def checked_logo(data: bytes) -> str:
    """The image's subtype (``png``/``jpeg``), or a 422 saying why the file is refused."""
    if not data:
        raise ValidationFailed.field("logo", "choose an image file")
    if len(data) > MAX_LOGO_BYTES:
        raise ValidationFailed.field(
            "logo", f"the image is {len(data) // 1024} KB; at most {MAX_LOGO_BYTES // 1024} KB"
        )
    kind = image_type(data)
    if kind is None:
        raise ValidationFailed.field(
            "logo", "only PNG or JPEG images are accepted (SVG and other formats are not)"
        )
    return kind


async def get_logo(session: ReadSession, workspace_id: int) -> WorkspaceLogo | None:
    return await session.get(WorkspaceLogo, workspace_id)


async def put_logo(
    session: WriteSession, *, workspace_id: int, organisation_id: int, data: bytes, now: datetime
) -> WorkspaceLogo:
    kind = checked_logo(data)
    logo = await session.get(WorkspaceLogo, workspace_id)
    if logo is None:
        logo = WorkspaceLogo(workspace_id=workspace_id)
        session.add(logo)
    logo.content_type = f"image/{kind}"
    logo.data = data
    logo.updated_at = now
    await session.flush()
    await audit.record(
        session,
        action="workspace.logo_set",
        object_type="workspace",
        object_id=workspace_id,
        workspace_id=workspace_id,
        organisation_id=organisation_id,
        after={"content_type": logo.content_type, "bytes": len(data)},
        now=now,
    )
    return logo


async def remove_logo(
    session: WriteSession, *, workspace_id: int, organisation_id: int, now: datetime
) -> None:
    logo = await session.get(WorkspaceLogo, workspace_id)
    if logo is None:
        return
    await session.delete(logo)
    await audit.record(
        session,
        action="workspace.logo_removed",
        object_type="workspace",
        object_id=workspace_id,
        workspace_id=workspace_id,
        organisation_id=organisation_id,
        now=now,
    )
