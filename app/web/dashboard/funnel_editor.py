"""What the visual funnel editor needs from the server: the form of every node kind (labels and
input types, from :mod:`.funnel_editor_forms`, so the canvas script renders forms without knowing
the graph's Python types), the workspace's names (tags, lists, fields, funnels) for pickers, and
the validator's problems worded for people and pinned on the node they concern.

``POST /ui/funnels/{id}/check`` validates what the editor holds without saving it; the editor calls
it after each change. ``POST /ui/funnels/{id}/preview`` renders the selected message step's unsaved
creative for a contact picked by name (``GET …/partials/preview-contacts?q=``), through the renderer
sends use; both answer HTML the panel shows as it is. The canvas shows each step's figures from the
funnel's report (:mod:`app.engines.funnels.runs.records.reports`, the same computation as the report table).
Saving and publishing stay the form posts of :mod:`app.web.dashboard.funnels`, which receive the
same graph JSON the API takes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.response import Template

from app.engines.funnels.contacts.fields import field_types
from app.engines.funnels.contacts.memberships import names_of
from app.engines.funnels.contacts.saved_segments import list_segments
from app.engines.funnels.contacts.segments import FIELD_TYPES
from app.engines.funnels.contacts.store import get_contact, list_contacts
from app.engines.funnels.definitions import service
from app.engines.funnels.definitions.graph import NODE_KINDS, Node, decode_definition
from app.engines.funnels.definitions.preview import preview, previewable
from app.engines.funnels.models import Contact, ContactList, Tag
from app.engines.funnels.runs.records import reports
from app.errors import DomainError
from app.schemas import Key
from app.web.auth import CurrentPrincipal
from app.web.dashboard.common import page
from app.web.dashboard.funnel_editor_forms import (
    FORMS,
    HELP,
    KIND_LABELS,
    LINEAR_PORTS,
    PORTS,
    TRIGGER_FORMS,
    TRIGGER_LABELS,
    TRIGGER_REQUIRED,
)
from app.web.dashboard.funnel_editor_names import field_choices
from app.web.dashboard.funnel_labels import SPECIFIC, allowed, short, step_field
from app.web.deps import CurrentSettings, Reads
from app.web.plain_errors import plain_error, sentence, split_path

PREFIX = "/ui/funnels"

_COMMON_LABELS = {"id": "Name", "next": "Then", "entry": "Start here", "label": "Label"}
_QUOTED = re.compile(r"'(\w+)'")
_NODE_PATH = re.compile(r"^nodes\[(\d+)\]\.?([A-Za-z_][A-Za-z0-9_]*)?")


def _field_labels(kind: str | None) -> dict[str, str]:
    labels = dict(_COMMON_LABELS)
    for name, label, _ in FORMS.get(kind or "", []):
        labels[name] = label
    for name, label in PORTS.get(kind or "", LINEAR_PORTS):
        labels[name] = label
    return labels


def plain(message: str, kind: str | None) -> str:
    """A validator message with the kind's tag and the field names as the editor labels them
    (``send_email needs a non-empty 'subject'`` becomes ``Send email needs a non-empty Subject``)."""
    labels = _field_labels(kind)
    for tag, label in KIND_LABELS.items():
        # One-word kinds ("wait", "goal") are also ordinary words: named only as the subject.
        pattern = rf"\b{tag}\b" if "_" in tag else rf"^{tag}\b"
        message = re.sub(pattern, label, message)
    message = message.replace("'AllOf' needs at least one predicate", "a group needs a condition")
    message = message.replace("'AnyOf' needs at least one predicate", "a group needs a condition")
    message = _QUOTED.sub(lambda m: short(labels.get(m.group(1), m.group(0))), message)
    for name, label in labels.items():
        if "_" in name:
            message = re.sub(rf"\b{name}\b", short(label).lower(), message)
    return message[:1].upper() + message[1:]


def _node_at(raw: Any, node_id: str | None) -> dict[str, Any] | None:
    for node in raw.get("nodes", []) if isinstance(raw, dict) else []:
        if isinstance(node, dict) and node.get("id") == node_id:
            return node
    return None


def _kind_of_node(node: dict[str, Any] | None) -> str | None:
    kind = node.get("kind") if node else None
    return kind if isinstance(kind, str) else None


def step_name(node: dict[str, Any] | None) -> str | None:
    """What a step is called in a message: its label, else its name (None: no step)."""
    if node is None:
        return None
    for key in ("label", "id"):
        value = node.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return "without a name"


def _on_step(node: dict[str, Any] | None, text: str) -> str:
    name = step_name(node)
    return f"Step '{name}' — {text}" if name else text


def _form_label(kind: str | None, name: str) -> str | None:
    for field, label, _ in FORMS.get(kind or "", []):
        if field == name:
            return label
    for field, label in PORTS.get(kind or "", LINEAR_PORTS):
        if field == name:
            return label
    return None


def setting_text(kind: str | None, name: str, *, finding: str = "", decoded: str = "") -> str:
    """One refused setting of a step of ``kind``: its label and what it allows. A validator's
    ``finding`` about a setting that says something specific (a predicate's unknown tag) is kept
    after the label; a ``decoded`` library message is turned into a sentence only when this
    setting has no sentence of its own."""
    spec = step_field(kind, name, _form_label(kind, name))
    said = allowed(kind, name)
    if finding and (said is None or name in SPECIFIC):
        said = plain(finding, kind)
    elif decoded and (said is None or name in SPECIFIC):
        said = sentence(decoded, spec)
    return f"{spec.label}: {said or 'this value is not one the setting accepts'}"


def decode_problem(raw: Any, message: str) -> dict[str, Any]:
    """A definition that does not decode, as one problem on the step it concerns: the step
    found from the path the decoder names, the setting named by its label with what it allows
    (no path, no library wording)."""
    path, _ = split_path("", message)
    node: dict[str, Any] | None = None
    field: str | None = None
    found = _NODE_PATH.match(path)
    if found is not None:
        nodes = raw.get("nodes") if isinstance(raw, dict) else None
        index = int(found.group(1))
        entry = nodes[index] if isinstance(nodes, list) and index < len(nodes) else None
        node = entry if isinstance(entry, dict) else {"id": f"number {index + 1}"}
        field = found.group(2)
        unknown = re.search(r"unknown field `([^`]+)`", message)
        if unknown is not None and field == unknown.group(1) and path.endswith(field):
            text = f"“{field}” is not a setting of this step: leave it out"
        elif field:
            text = setting_text(_kind_of_node(node), field, decoded=message)
        else:
            text = f"Settings: {sentence(message)}"
    else:
        text = plain_error(path, message)
    node_id = node.get("id") if node else None
    return {
        "node_id": node_id if isinstance(node_id, str) else None,
        "rule": "FN-26",
        "code": "schema",
        "message": _on_step(node, text),
        "field": field,
    }


def plain_problems(raw: Any, problems: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The validator's findings as the editor shows them: on the step they concern, a finding
    about one setting named by the setting's label with what it allows."""
    out = []
    for p in problems:
        node = _node_at(raw, p.get("node_id"))
        kind = _kind_of_node(node)
        field = p.get("field")
        message = str(p["message"])
        text = setting_text(kind, str(field), finding=message) if field else plain(message, kind)
        out.append({**p, "field": field, "message": _on_step(node, text)})
    return out


async def check_raw(session: Any, workspace_id: int, raw: Any) -> list[dict[str, Any]]:
    """Every problem of ``raw`` (JSON-compatible data), worded for people."""
    try:
        definition = decode_definition(raw)
    except msgspec.ValidationError as exc:
        return [decode_problem(raw, str(exc))]
    found = await service.check(session, workspace_id, definition)
    return plain_problems(raw, service.problems_to_dicts(found))


def canvas_counts(report: reports.FunnelReport | None) -> dict[str, Any] | None:
    """Per node of the latest version, the report's figures the canvas writes in each box (the
    report's own numbers, not computed again)."""
    if report is None or not report.versions:
        return None
    latest = report.versions[-1]
    nodes: dict[str, dict[str, int]] = {}
    for n in latest.nodes:
        counts = {"entered": n.entered, "waiting": n.waiting, "exited": n.exited}
        if n.messages is not None:
            counts |= {
                "sent": n.messages.sent,
                "opened": n.messages.opened,
                "clicked": n.messages.clicked,
            }
        elif n.kind.startswith("send_"):
            # A message step nobody reached yet has sent nothing (as the report's chart says).
            counts |= {"sent": 0, "opened": 0, "clicked": 0}
        nodes[n.node_id] = counts
    return {"version": latest.version, "nodes": nodes}


async def editor_data(
    session: Any,
    workspace_id: int,
    funnel_id: int,
    problems: list[dict[str, Any]],
    report: reports.FunnelReport | None = None,
) -> dict[str, Any]:
    """The JSON the canvas script starts from (read from a ``type=application/json`` block)."""
    funnels = await service.list_funnels(session, workspace_id)
    custom = await field_types(session, workspace_id)
    return {
        "funnel_id": funnel_id,
        "check_url": f"{PREFIX}/{funnel_id}/check",
        "preview_url": f"{PREFIX}/{funnel_id}/preview",
        "preview_contacts_url": f"{PREFIX}/{funnel_id}/partials/preview-contacts",
        "preview_kinds": ["send_email", "send_sms", "send_push", "send_letter", "notify_team"],
        "counts": canvas_counts(report),
        "kinds": [{"kind": k, "label": KIND_LABELS[k]} for k in NODE_KINDS],
        "forms": {k: [list(f) for f in FORMS[k]] for k in NODE_KINDS},
        "ports": {k: [list(p) for p in PORTS.get(k, LINEAR_PORTS)] for k in NODE_KINDS},
        "help": HELP,
        "triggers": {
            k: {"label": label, "form": [list(f) for f in TRIGGER_FORMS[k]]}
            for k, label in TRIGGER_LABELS.items()
        },
        "trigger_required": TRIGGER_REQUIRED,
        "tags": sorted(await names_of(session, Tag, workspace_id)),
        "lists": sorted(await names_of(session, ContactList, workspace_id)),
        "fields": field_choices(custom),
        "field_types": list(FIELD_TYPES),
        "names_url": f"{PREFIX}/{funnel_id}/names",
        "funnels": [{"id": f.id, "name": f.name} for f in funnels],
        "segments": [
            {"id": s.id, "name": s.name} for s in await list_segments(session, workspace_id)
        ],
        "problems": problems,
    }


class CheckBody(msgspec.Struct):
    definition: Any


@post(f"{PREFIX}/{{funnel_id:int}}/check", status_code=200)
async def check_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    data: JSONBody[CheckBody],
) -> dict[str, Any]:
    """The problems of the graph the editor holds, not saved (the funnel must be the
    workspace's: an unknown id answers 404 like its page)."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    return {"problems": await check_raw(session, principal.workspace_id, data.definition)}


class PreviewBody(msgspec.Struct):
    node: Annotated[dict[Key, Any], msgspec.Meta(max_length=50)]
    """The selected step as the editor holds it (unsaved)."""
    contact_id: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)] | None = None


@post(f"{PREFIX}/{{funnel_id:int}}/preview", status_code=200)
async def preview_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    settings: CurrentSettings,
    funnel_id: FromPath[int],
    data: JSONBody[PreviewBody],
) -> Template:
    """The step's message rendered for the chosen contact (none chosen: empty variables), as
    HTML for the panel. A step that does not decode yet, or a contact of another workspace,
    answers 422 with the reason in the same place."""
    ws = principal.workspace_id
    await service.get_funnel(session, ws, funnel_id)
    try:
        node: Node = msgspec.convert(data.node, type=Node)
    except msgspec.ValidationError as exc:
        problem = decode_problem({"nodes": [data.node]}, str(exc).replace("$", "$.nodes[0]", 1))
        return _preview(request, principal, error=f"Not previewed: {problem['message']}")
    if not previewable(node):
        return _preview(request, principal, error="This step sends no message to preview.")
    contact: Contact | None = None
    if data.contact_id is not None:
        try:
            contact = await get_contact(session, ws, data.contact_id)
        except DomainError:
            return _preview(request, principal, error="That contact no longer exists.")
    person = contact or Contact(email="", first_name="", last_name="", timezone="UTC", fields={})
    parts = preview(node, person, base_url=settings.web.public_url)
    return _preview(request, principal, parts=parts, contact=contact, status=200)


def _preview(
    request: Request[Any, Any, Any], principal: Any, *, status: int = 422, **context: Any
) -> Template:
    answer = page(request, "funnels/_preview.html", principal, **context)
    answer.status_code = status
    return answer


@get(f"{PREFIX}/{{funnel_id:int}}/partials/preview-contacts")
async def preview_contacts_page(
    request: Request[Any, Any, Any],
    principal: CurrentPrincipal,
    session: Reads,
    funnel_id: FromPath[int],
    q: FromQuery[str] = "",
) -> Template:
    """The contacts whose name or address contains ``q`` (the first 20), as ``<option>``s of
    the preview's contact picker."""
    await service.get_funnel(session, principal.workspace_id, funnel_id)
    found = await list_contacts(
        session, principal.workspace_id, after=None, limit=20, search=q.strip()[:200] or None
    )
    return page(request, "funnels/_preview_contacts.html", principal, contacts=found, q=q)


ROUTES: list[Any] = [check_page, preview_page, preview_contacts_page]
