"""Loopback simulators of the Slack and Microsoft Teams incoming webhooks (run digests, AR-27).

**Slack** (``POST /services/<team>/<bot>/<token>``, JSON): a message has ``text`` (the
notification's fallback) and/or ``blocks`` (Block Kit). Slack answers ``200`` with the plain-text
body ``ok``; a body that is not a JSON object ``400 invalid_payload``; neither ``text`` nor
``blocks`` ``400 no_text``; a block Slack cannot lay out (more than 50 blocks, an unknown type, a
header over 150 characters, a section's text over 3,000, a button without plain-text text or
with a text over 75) ``400 invalid_blocks``; a removed webhook ``404 no_service``.

**Teams** (``POST /webhookb2/<path>``, JSON): either an Adaptive Card message — ``type:
"message"`` with ``attachments`` of ``contentType`` ``application/vnd.microsoft.card.adaptive``
whose ``content`` is an ``AdaptiveCard`` with a ``version`` and a ``body`` list (``TextBlock``
needs ``text``, ``FactSet`` ``facts`` of ``{title, value}``; ``Action.OpenUrl`` needs ``url``) —
or a legacy ``MessageCard`` (``@type``), which needs ``summary`` or ``text`` ("Summary or Text is
required."). Teams answers ``200`` with the body ``1``; an invalid payload ``400`` with a message.

Each accepted message is kept (:attr:`ChatWebhookSandbox.received`) as the receiver saw it on the
wire; calls are counted by kind ``slack.post`` / ``teams.post`` and faults can be injected.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar, MediaType, Request, Response, post
from litestar.params import FromPath

from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    simulator_app,
    start_simulator,
)

SLACK_BLOCK_TYPES = frozenset(
    {"header", "section", "context", "actions", "divider", "image", "rich_text"}
)
SLACK_MAX_BLOCKS = 50
SLACK_HEADER_MAX = 150
SLACK_SECTION_MAX = 3000
SLACK_BUTTON_TEXT_MAX = 75
ADAPTIVE_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
ADAPTIVE_ELEMENTS = frozenset(
    {"TextBlock", "FactSet", "ColumnSet", "Container", "Image", "RichTextBlock", "ActionSet"}
)
ADAPTIVE_ACTIONS = frozenset({"Action.OpenUrl", "Action.ShowCard", "Action.ToggleVisibility"})


@dataclass
class ChatWebhookSandbox(HttpSimulator):
    """Both receivers on one server: ``/services/…`` is Slack, ``/webhookb2/…`` is Teams."""

    state: SandboxState = field(default_factory=SandboxState)
    received: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """``(kind, path, body)`` of every accepted message, in arrival order."""
    removed: set[str] = field(default_factory=set)
    """Webhook paths deleted by their owner (Slack answers ``no_service``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset_data(self) -> None:
        with self._lock:
            self.received.clear()
            self.removed.clear()

    def slack_url(self, hook: str = "T0001/B0001/abcdefghijklmnopqrstuvwx") -> str:
        return f"{self.url}/services/{hook}"

    def teams_url(self, path: str = "tenant@org/IncomingWebhook/abc/def") -> str:
        return f"{self.url}/webhookb2/{path}"

    def messages(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for k, _, body in self.received if k == kind]

    def create_app(self) -> Litestar:
        return create_chat_app(self)


def _text(status: int, body: str) -> Response[Any]:
    return Response(body, status_code=status, media_type=MediaType.TEXT)


def _plain(value: Any, limit: int) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "plain_text"
        and isinstance(value.get("text"), str)
        and 0 < len(value["text"]) <= limit
    )


def _text_object(value: Any, limit: int) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") in ("plain_text", "mrkdwn")
        and isinstance(value.get("text"), str)
        and 0 < len(value["text"]) <= limit
    )


def slack_problem(body: Any) -> str | None:
    """Slack's error code for ``body``, None when it would post it."""
    if not isinstance(body, dict):
        return "invalid_payload"
    text, blocks = body.get("text"), body.get("blocks")
    if (not isinstance(text, str) or not text.strip()) and not blocks:
        return "no_text"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > SLACK_MAX_BLOCKS:
        return "invalid_blocks"
    return next((p for p in map(_block_problem, blocks) if p is not None), None)


def _block_problem(block: Any) -> str | None:
    if not isinstance(block, dict) or block.get("type") not in SLACK_BLOCK_TYPES:
        return "invalid_blocks"
    kind = block["type"]
    if kind == "header" and not _plain(block.get("text"), SLACK_HEADER_MAX):
        return "invalid_blocks"
    if kind == "section":
        if "text" not in block and "fields" not in block:
            return "invalid_blocks"
        if "text" in block and not _text_object(block["text"], SLACK_SECTION_MAX):
            return "invalid_blocks"
    if kind == "context":
        elements = block.get("elements")
        if not isinstance(elements, list) or not 0 < len(elements) <= 10:
            return "invalid_blocks"
        if not all(_text_object(e, SLACK_SECTION_MAX) for e in elements):
            return "invalid_blocks"
    if kind == "actions":
        elements = block.get("elements")
        if not isinstance(elements, list) or not 0 < len(elements) <= 25:
            return "invalid_blocks"
        if not all(_button_ok(e) for e in elements):
            return "invalid_blocks"
    return None


def _button_ok(element: Any) -> bool:
    if not isinstance(element, dict) or element.get("type") != "button":
        return False
    url = element.get("url")
    return _plain(element.get("text"), SLACK_BUTTON_TEXT_MAX) and (
        url is None or (isinstance(url, str) and len(url) <= 3000)
    )


def _card_problem(card: Any) -> str | None:
    if not isinstance(card, dict) or card.get("type") != "AdaptiveCard":
        return "the attachment's content must be an AdaptiveCard"
    if not isinstance(card.get("version"), str):
        return "an AdaptiveCard needs a version"
    body = card.get("body", [])
    if not isinstance(body, list):
        return "an AdaptiveCard's body must be a list"
    for element in body:
        if not isinstance(element, dict) or element.get("type") not in ADAPTIVE_ELEMENTS:
            return f"unknown card element {element!r:.60}"
        if element["type"] == "TextBlock" and not isinstance(element.get("text"), str):
            return "a TextBlock needs text"
        if element["type"] == "FactSet":
            facts = element.get("facts")
            if not isinstance(facts, list) or not all(
                isinstance(f, dict)
                and isinstance(f.get("title"), str)
                and isinstance(f.get("value"), str)
                for f in facts
            ):
                return "a FactSet needs facts of {title, value}"
    for action in card.get("actions", []) or []:
        if not isinstance(action, dict) or action.get("type") not in ADAPTIVE_ACTIONS:
            return f"unknown card action {action!r:.60}"
        if action["type"] == "Action.OpenUrl" and not isinstance(action.get("url"), str):
            return "Action.OpenUrl needs a url"
    return None


def teams_problem(body: Any) -> str | None:
    """Why Teams would refuse ``body``, None when it would post it."""
    if not isinstance(body, dict):
        return "the payload must be a JSON object"
    if body.get("@type") == "MessageCard":
        if not body.get("summary") and not body.get("text"):
            return "Summary or Text is required."
        return None
    if body.get("type") != "message":
        return "the payload must be a message (type: message) or a MessageCard"
    attachments = body.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return "a message needs attachments"
    for attachment in attachments:
        if not isinstance(attachment, dict):
            return "an attachment must be an object"
        if attachment.get("contentType") != ADAPTIVE_CONTENT_TYPE:
            return f"contentType must be {ADAPTIVE_CONTENT_TYPE}"
        problem = _card_problem(attachment.get("content"))
        if problem is not None:
            return problem
    return None


async def _read(request: Request[Any, Any, Any]) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None


def create_chat_app(sandbox: ChatWebhookSandbox) -> Litestar:
    @post("/services/{path:path}", status_code=200)
    async def slack(request: Request[Any, Any, Any], path: FromPath[str]) -> Response[Any]:
        fault = sandbox.state.hit("slack.post", path=path)
        if fault is not None:
            return await fault_response(fault)
        if path.strip("/") in sandbox.removed:
            return _text(404, "no_service")
        body = await _read(request)
        problem = slack_problem(body)
        if problem is not None:
            return _text(400, problem)
        with sandbox._lock:
            sandbox.received.append(("slack", path, body))
        return _text(200, "ok")

    @post("/webhookb2/{path:path}", status_code=200)
    async def teams(request: Request[Any, Any, Any], path: FromPath[str]) -> Response[Any]:
        fault = sandbox.state.hit("teams.post", path=path)
        if fault is not None:
            return await fault_response(fault)
        body = await _read(request)
        problem = teams_problem(body)
        if problem is not None:
            return _text(400, problem)
        with sandbox._lock:
            sandbox.received.append(("teams", path, body))
        return _text(200, "1")

    return simulator_app([slack, teams])


def start_chat_sandbox(sandbox: ChatWebhookSandbox | None = None) -> ThreadedServer:
    return start_simulator(sandbox or ChatWebhookSandbox())
