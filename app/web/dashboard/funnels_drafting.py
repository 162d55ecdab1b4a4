"""The "Draft with AI" page under ``/ui/funnels/draft-with-ai`` (FN-34 to FN-36): the person
describes the journey in their words and picks the trigger, the audience and the channels; the
same service as ``POST /api/v1/funnels/ai-drafts`` drafts it, and the new funnel opens in the
visual editor as a draft (never published) with the drafting record beside it. A refusal (no
provider, quota spent, the provider failing) shows the form again, as typed, with the reason.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec
from litestar import Request, get, post
from litestar.params import URLEncodedBody
from litestar.response import Redirect, Template

from app.engines.funnels.drafting import service as drafting
from app.engines.funnels.drafting.prompt import DraftRequest
from app.errors import DomainError
from app.web.api.funnels_drafting import deps_of
from app.web.auth import CurrentPrincipal, CurrentRuntime
from app.web.dashboard.common import page
from app.web.deps import Guard

PAGE = "/ui/funnels/draft-with-ai"

TRIGGERS: list[tuple[str, str, str | None]] = [
    ("manual", "Entered by hand or through the API", None),
    ("contact_created", "A contact is created", None),
    ("tag_added", "A tag is added (name it below)", "tag"),
    ("list_join", "A contact joins a list (name it below)", "list"),
    ("api_event", "An event is sent (name it below)", "event"),
    ("form_submit", "A hosted form is submitted (its public id below)", "form"),
]
"""(kind, label, the field the value box fills)."""
CHANNELS = [("email", "E-mail"), ("sms", "SMS"), ("push", "Push"), ("letter", "Letter")]


class DraftForm(msgspec.Struct, kw_only=True):
    """The form as posted (unknown fields, e.g. the CSRF token, are ignored)."""

    description: str = ""
    name: str = ""
    trigger: str = "manual"
    trigger_value: str = ""
    audience_tag: str = ""
    audience_list: str = ""
    channel_email: str = ""
    channel_sms: str = ""
    channel_push: str = ""
    channel_letter: str = ""


def to_request(form: DraftForm) -> DraftRequest:
    """The API's request from the form; a bad value is refused naming its field."""
    fields = {kind: field for kind, _, field in TRIGGERS}
    if form.trigger not in fields:
        raise DomainError("Trigger: pick one of the listed triggers.", code="validation_failed")
    trigger: dict[str, Any] = {"kind": form.trigger}
    if (field := fields[form.trigger]) is not None:
        if not form.trigger_value.strip():
            raise DomainError(
                f"Trigger: this trigger needs its {field} named.", code="validation_failed"
            )
        trigger[field] = form.trigger_value.strip()
    parts: list[dict[str, Any]] = []
    if form.audience_tag.strip():
        parts.append({"kind": "has_tag", "tag": form.audience_tag.strip()})
    if form.audience_list.strip():
        parts.append({"kind": "in_list", "list": form.audience_list.strip()})
    audience = (
        parts[0] if len(parts) == 1 else ({"kind": "all", "predicates": parts} if parts else None)
    )
    channels = [name for name, _ in CHANNELS if getattr(form, f"channel_{name}")]
    if not channels:
        raise DomainError("Channels: allow at least one channel.", code="validation_failed")
    if not form.description.strip():
        raise DomainError("Description: describe the journey.", code="validation_failed")
    try:
        return msgspec.convert(
            {
                "description": form.description.strip(),
                "name": form.name.strip(),
                "trigger": trigger,
                "audience": audience,
                "channels": channels,
            },
            type=DraftRequest,
        )
    except msgspec.ValidationError as exc:
        raise DomainError(f"Not drafted: {exc}", code="validation_failed") from None


def _form(
    request: Request[Any, Any, Any],
    principal: Any,
    form: DraftForm,
    *,
    error: str | None = None,
    status: int = 200,
) -> Template:
    answer = page(
        request,
        "funnels/draft_with_ai.html",
        principal,
        form=form,
        triggers=TRIGGERS,
        channels=CHANNELS,
        error=error,
    )
    answer.status_code = status
    return answer


@get(PAGE)
async def draft_page(request: Request[Any, Any, Any], principal: CurrentPrincipal) -> Template:
    return _form(request, principal, DraftForm(channel_email="on"))


@post(PAGE)
async def draft_submit(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    runtime: CurrentRuntime,
    guard: Guard,
    data: URLEncodedBody[DraftForm],
) -> Template | Redirect:
    try:
        wanted = to_request(data)
        row = await drafting.draft_funnel(
            deps_of(runtime, guard), principal.workspace_id, wanted, user_id=principal.user_id
        )
    except DomainError as exc:
        status = 422 if exc.code == "validation_failed" else exc.status
        return _form(request, principal, data, error=exc.message, status=status)
    said = {
        "valid": "Drafted with AI: the draft is valid. Review it, then publish it yourself.",
        "repaired": "Drafted with AI: valid after repair rounds. Review it, then publish it "
        "yourself.",
        "invalid": "Drafted with AI: the validator still finds problems, pinned on the steps "
        "below. Fix them before publishing.",
    }[row.outcome]
    return Redirect(f"/ui/funnels/{row.funnel_id}?notice={quote(said)}")


NAV: list[tuple[str, str]] = []
ROUTES: list[Any] = [draft_page, draft_submit]
PUBLIC_ROUTES: list[Any] = []
