"""The unsubscribe surface of marketing mail (no sign-in: the signed token is the authority).

- ``GET /t/u/{token}``: a page with one button (one click leaves the message's topic) and a
  second one to leave all marketing mail. A GET changes nothing: link scanners and previews
  follow links, and must not unsubscribe anyone.
- ``POST /t/u/{token}``: the button, or a mailbox provider's RFC 8058 one-click request
  (``List-Unsubscribe=One-Click`` as ``application/x-www-form-urlencoded`` or
  ``multipart/form-data``, no cookies): the topic is left at once.
- ``GET/POST /t/u/{token}/preferences``: one checkbox per topic of the workspace, and "none".
- ``POST /t/unsubscribe-mail``: a message sent to the ``mailto:`` of ``List-Unsubscribe``,
  relayed raw by the mailbox that receives it; its subject carries the token.
"""

from __future__ import annotations

from email import message_from_bytes, policy
from html import escape
from typing import Any

from litestar import MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.engines.funnels.definitions.trial_send import TEST_TOKEN
from app.engines.funnels.events.tracking import token_workspace
from app.engines.funnels.outbox.records.preferences import (
    Choice,
    choose,
    contact_of,
    everything_left,
    subscribed,
    workspace_topics,
)
from app.engines.funnels.outbox.work.unsubscribe import (
    ONE_CLICK_BODY,
    UnsubscribeRef,
    token_from_mail_subject,
    verify_unsubscribe_token,
)
from app.errors import ValidationFailed
from app.runtime import Runtime
from app.web.auth import CurrentRuntime
from app.web.deps import CurrentClock, Reads, Writes
from app.web.hooks.funnels_public import workspace_secret

MAX_RELAYED_MAIL_BYTES = 256 * 1024


def _page(title: str, content: str, status: int = 200) -> Response[str]:
    html = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'>"
        f"<meta name='robots' content='noindex'><title>{escape(title)}</title>"
        "<style>body{font-family:system-ui;max-width:32rem;margin:3rem auto;padding:0 1rem}"
        "button{font-size:1rem;padding:.5rem 1rem;margin:.3rem 0}"
        "label{display:block;margin:.4rem 0}</style>"
        f"</head><body><main>{content}</main></body></html>"
    )
    return Response(
        html,
        media_type=MediaType.HTML,
        status_code=status,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


def _unknown() -> Response[str]:
    return _page("Link not recognised", "<p>This unsubscribe link is not valid.</p>", 404)


def _test_page() -> Response[str]:
    return _page("Test message", "<p>This link came in a test message: nothing changes.</p>")


async def _ref(runtime: Runtime, token: str) -> UnsubscribeRef | None:
    workspace_id = token_workspace(token)
    secret = None if workspace_id is None else await workspace_secret(runtime, workspace_id)
    return None if secret is None else verify_unsubscribe_token(secret, token)


def _masked(email: str | None) -> str:
    """Enough of the address to recognise it, not enough to harvest it from a forwarded link."""
    if not email or "@" not in email:
        return "your address"
    local, _, domain = email.partition("@")
    return f"{local[:2]}…@{domain}"


def _done(what: str, token: str) -> Response[str]:
    return _page(
        "Unsubscribed",
        f"<h1>Done</h1><p role='status'>{escape(what)}</p>"
        f"<p><a href='/t/u/{escape(token)}/preferences'>Choose what you receive</a></p>",
    )


@get("/t/u/{token:str}")
async def unsubscribe_page(
    runtime: CurrentRuntime, session: Reads, token: FromPath[str]
) -> Response[str]:
    if token == TEST_TOKEN:
        return _test_page()
    ref = await _ref(runtime, token)
    if ref is None:
        return _unknown()
    contact = await contact_of(session, ref)
    if contact is None:
        return _page("Unsubscribed", "<p>This address receives nothing from us any more.</p>")
    action = f"/t/u/{escape(token)}"
    return _page(
        "Unsubscribe",
        f"<h1>Unsubscribe</h1><p>Stop sending <strong>{escape(ref.topic)}</strong> e-mail to "
        f"{escape(_masked(contact.email))}?</p>"
        f"<form method='post' action='{action}'>"
        "<button type='submit' name='scope' value='topic'>Unsubscribe</button>"
        "<button type='submit' name='scope' value='all'>Unsubscribe from all e-mail</button>"
        "</form>"
        f"<p><a href='{action}/preferences'>Choose what you receive</a></p>",
    )


async def _form(request: Request[Any, Any, Any]) -> dict[str, list[str]]:
    form = await request.form()
    return {key: [str(v) for v in form.getall(key)] for key in form}


@post("/t/u/{token:str}", status_code=200)
async def unsubscribe(
    request: Request[Any, Any, Any],
    runtime: CurrentRuntime,
    uow: Writes,
    clock: CurrentClock,
    token: FromPath[str],
) -> Response[str]:
    """The page's buttons and RFC 8058 one-click POSTs."""
    if token == TEST_TOKEN:
        return _test_page()
    ref = await _ref(runtime, token)
    if ref is None:
        return _unknown()
    form = await _form(request)
    one_click = form.get("List-Unsubscribe") == [ONE_CLICK_BODY.partition("=")[2]]
    everything = not one_click and form.get("scope") == ["all"]
    choice = Choice(
        everything=everything, left=frozenset() if everything else frozenset({ref.topic})
    )
    await choose(
        uow.session,
        ref,
        choice,
        how="one-click" if one_click else "unsubscribe page",
        now=clock.now(),
    )
    if everything:
        return _done("You will receive no more marketing e-mail from us.", token)
    return _done(f"You will receive no more '{ref.topic}' e-mail from us.", token)


@get("/t/u/{token:str}/preferences")
async def preferences_page(
    runtime: CurrentRuntime, session: Reads, token: FromPath[str]
) -> Response[str]:
    if token == TEST_TOKEN:
        return _test_page()
    ref = await _ref(runtime, token)
    if ref is None:
        return _unknown()
    contact = await contact_of(session, ref)
    if contact is None:
        return _page("Preferences", "<p>This address receives nothing from us any more.</p>")
    topics = await workspace_topics(session, ref.message.workspace_id, contact)
    boxes = "".join(
        f"<label><input type='checkbox' name='topic' value='{escape(t)}'"
        f"{' checked' if subscribed(contact, t) else ''}> {escape(t)}</label>"
        for t in topics
    )
    none = " checked" if everything_left(contact) else ""
    return _page(
        "Preferences",
        f"<h1>What you receive</h1><p>For {escape(_masked(contact.email))}:</p>"
        f"<form method='post' action='/t/u/{escape(token)}/preferences'>"
        f"<fieldset><legend>Topics</legend>{boxes}</fieldset>"
        f"<label><input type='checkbox' name='none' value='1'{none}> "
        "No marketing e-mail at all</label>"
        "<button type='submit'>Save</button></form>",
    )


@post("/t/u/{token:str}/preferences", status_code=200)
async def save_preferences(
    request: Request[Any, Any, Any],
    runtime: CurrentRuntime,
    uow: Writes,
    clock: CurrentClock,
    token: FromPath[str],
) -> Response[str]:
    if token == TEST_TOKEN:
        return _test_page()
    ref = await _ref(runtime, token)
    if ref is None:
        return _unknown()
    form = await _form(request)
    kept = frozenset(t.strip() for t in form.get("topic", []) if t.strip())
    contact = await contact_of(uow.session, ref)
    if contact is None:
        return _page("Preferences", "<p>This address receives nothing from us any more.</p>")
    topics = set(await workspace_topics(uow.session, ref.message.workspace_id, contact))
    choice = Choice(
        everything=form.get("none") == ["1"],
        left=frozenset(topics - kept),
        kept=frozenset(kept & topics),
    )
    await choose(uow.session, ref, choice, how="preference page", now=clock.now())
    return _page(
        "Preferences saved",
        "<h1>Saved</h1><p role='status'>Your choices are saved.</p>"
        f"<p><a href='/t/u/{escape(token)}/preferences'>Back to your preferences</a></p>",
    )


@post("/t/unsubscribe-mail", status_code=202)
async def unsubscribe_by_mail(
    request: Request[Any, Any, Any], runtime: CurrentRuntime, uow: Writes, clock: CurrentClock
) -> dict[str, bool]:
    """A message sent to the ``mailto:`` target of ``List-Unsubscribe``, relayed raw
    (``message/rfc822``) by whatever receives that mailbox. The signed token in its subject is
    the authority, as for the https link; the message leaves the topic it was about."""
    body = await request.body()
    if len(body) > MAX_RELAYED_MAIL_BYTES:
        raise ValidationFailed.field("body", f"at most {MAX_RELAYED_MAIL_BYTES} bytes")
    parsed = message_from_bytes(body, policy=policy.default)
    token = token_from_mail_subject(str(parsed.get("Subject", "")))
    ref = None if token is None else await _ref(runtime, token)
    if ref is None:
        raise ValidationFailed.field("Subject", "no valid unsubscribe token in the subject")
    await choose(
        uow.session,
        ref,
        Choice(everything=False, left=frozenset({ref.topic})),
        how="mailto",
        now=clock.now(),
    )
    return {"unsubscribed": True}


ROUTES: list[Any] = [
    unsubscribe_page,
    unsubscribe,
    preferences_page,
    save_preferences,
    unsubscribe_by_mail,
]
