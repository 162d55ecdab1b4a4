"""Signed values of the public surface: tracking pixels, redirect links, the site snippet's
contact token, and webhook signatures. Everything is an HMAC-SHA256 with the workspace's webhook
secret, so a link cannot be forged to record an open or a click for someone else, and a redirect
link cannot be turned into an open redirect.

Tokens are ``<base64url(json)>.<base64url(mac)>``; the JSON names the workspace (``w``), which is
how a receiver finds the secret to check the MAC with.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html as html_lib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

SIGNATURE_HEADER = "x-sweepline-signature"
"""``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`` (the Stripe convention)."""
SIGNATURE_TOLERANCE_SECONDS = 300


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()[:20]


def sign_token(secret: str, claims: dict[str, Any]) -> str:
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{body}.{_b64(_mac(secret, body.encode()))}"


def token_workspace(token: str) -> int | None:
    """The workspace a token claims to belong to (unverified: only to find the secret)."""
    claims = _claims(token)
    ws = claims.get("w") if claims else None
    return ws if isinstance(ws, int) else None


def _claims(token: str) -> dict[str, Any] | None:
    body, _, _ = token.partition(".")
    try:
        value = json.loads(_unb64(body))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def verify_token(secret: str, token: str) -> dict[str, Any] | None:
    """The token's claims when its MAC is right, else ``None``."""
    body, _, mac = token.partition(".")
    try:
        expected = _b64(_mac(secret, body.encode()))
    except ValueError:
        return None
    if not mac or not hmac.compare_digest(expected, mac):
        return None
    return _claims(token)


@dataclass(frozen=True, slots=True)
class MessageRef:
    """What a pixel or link points back to: the contact and the message (a campaign recipient
    ``c``/``r`` or a funnel effect ``e``)."""

    workspace_id: int
    contact_id: int
    campaign_id: int | None = None
    seq: int | None = None
    effect: str | None = None

    def claims(self) -> dict[str, Any]:
        out: dict[str, Any] = {"w": self.workspace_id, "k": self.contact_id}
        if self.campaign_id is not None:
            out["c"] = self.campaign_id
            out["r"] = self.seq
        if self.effect is not None:
            out["e"] = self.effect
        return out

    @staticmethod
    def from_claims(claims: dict[str, Any]) -> MessageRef | None:
        ws, contact = claims.get("w"), claims.get("k")
        if not isinstance(ws, int) or not isinstance(contact, int):
            return None
        campaign, seq, effect = claims.get("c"), claims.get("r"), claims.get("e")
        return MessageRef(
            ws,
            contact,
            campaign if isinstance(campaign, int) else None,
            seq if isinstance(seq, int) else None,
            effect if isinstance(effect, str) else None,
        )


def pixel_url(base_url: str, secret: str, ref: MessageRef) -> str:
    return f"{base_url.rstrip('/')}/t/o/{sign_token(secret, ref.claims())}.gif"


def link_url(base_url: str, secret: str, ref: MessageRef, target: str) -> str:
    """A redirect link to ``target``; the target is inside the signed claims."""
    claims = {**ref.claims(), "u": target}
    return f"{base_url.rstrip('/')}/t/l/{sign_token(secret, claims)}"


HREF = re.compile(r'href="(https?://[^"]+)"')
_BARE_URL = re.compile(r"https?://[^\s<>\"']+")


@dataclass(frozen=True, slots=True)
class Tracking:
    """Where tracking links point (the app's public URL) and the workspace secret signing them."""

    base_url: str
    secret: str


def tracked_parts(
    text: str, html: str | None, tracking: Tracking, ref: MessageRef
) -> tuple[str, str]:
    """What every tracked message to a contact carries, campaign or funnel: the text part's links
    tracked, and an HTML part with tracked links and the open pixel. A text-only message gets an
    HTML alternative made from its text (:func:`text_to_html`; an empty HTML part counts as
    none), since only HTML can carry a pixel: without it a text-only campaign would count no
    opens (FN-29) and a funnel could not wait for one (FN-11). Both engines compose through this
    function (``tests/engines/funnels/events/test_one_tracking_policy.py`` keeps it so)."""
    return track_text(text, tracking, ref), track_html(html or text_to_html(text), tracking, ref)


def track_html(html: str, tracking: Tracking, ref: MessageRef) -> str:
    """Every ``http(s)`` link of ``html`` becomes a signed redirect link, and an open pixel is
    appended: the same for campaign and funnel mail, so opens and clicks of either are events."""

    own_pages = f"{tracking.base_url.rstrip('/')}/t/u/"

    def tracked(match: re.Match[str]) -> str:
        target = html_lib.unescape(match.group(1))
        if target.startswith(own_pages):
            # Unsubscribe links stay direct: a click on them is not a click on the content.
            return match.group(0)
        return (
            f'href="{html_lib.escape(link_url(tracking.base_url, tracking.secret, ref, target))}"'
        )

    pixel = html_lib.escape(pixel_url(tracking.base_url, tracking.secret, ref))
    return f'{HREF.sub(tracked, html)}<img src="{pixel}" width="1" height="1" alt="">'


def track_text(text: str, tracking: Tracking, ref: MessageRef) -> str:
    """Every bare ``http(s)`` URL of a plain-text part becomes a signed redirect link, so a
    click from a text-only mail client counts as one from the HTML part does. Unsubscribe links
    stay direct, and trailing punctuation stays outside the link."""
    own_pages = f"{tracking.base_url.rstrip('/')}/t/u/"

    def tracked(match: re.Match[str]) -> str:
        found = match.group(0)
        url = found.rstrip(".,;:!?)")
        if url.startswith(own_pages):
            return found
        return link_url(tracking.base_url, tracking.secret, ref, url) + found[len(url) :]

    return _BARE_URL.sub(tracked, text)


def text_to_html(text: str) -> str:
    """An HTML alternative of a plain-text body (escaped, URLs made links, line breaks kept), so
    a message written as text can carry the pixel and tracked links too."""
    parts: list[str] = []
    last = 0
    for match in _BARE_URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?)")
        parts.append(html_lib.escape(text[last : match.start()]))
        parts.append(f'<a href="{html_lib.escape(url)}">{html_lib.escape(url)}</a>')
        last = match.start() + len(url)
    parts.append(html_lib.escape(text[last:]))
    return "<div>" + "".join(parts).replace("\n", "<br>\n") + "</div>"


def contact_token(secret: str, workspace_id: int, contact_id: int) -> str:
    """Identifies a visitor to the site snippet (appended to tracked links as ``swl``)."""
    return sign_token(secret, {"w": workspace_id, "k": contact_id, "t": "visitor"})


def site_key(secret: str, workspace_id: int) -> str:
    """The public key the site snippet sends with each visit (safe to embed in a web page:
    it only allows recording visits of contacts who carry a signed contact token)."""
    return sign_token(secret, {"w": workspace_id, "t": "site"})


def with_query(url: str, **params: str) -> str:
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}{urlencode(params)}"


def sign_body(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_body(secret: str, body: bytes, header: str, now_unix: int) -> bool:
    """Check a ``t=…,v1=…`` signature header (any ``v1`` may match, for secret rotation)."""
    return body_refusal(secret, body, header, now_unix) is None


def body_refusal(secret: str, body: bytes, header: str, now_unix: int) -> str | None:
    """Why a ``t=…,v1=…`` signature header does not verify (``None``: it does)."""
    parts = [p.strip().partition("=") for p in header.split(",")]
    timestamps = [v for k, _, v in parts if k == "t"]
    signatures = [v for k, _, v in parts if k == "v1"]
    if len(timestamps) != 1 or not signatures or not timestamps[0].isdigit():
        return "is not t=…,v1=…"
    timestamp = int(timestamps[0])
    if abs(now_unix - timestamp) > SIGNATURE_TOLERANCE_SECONDS:
        return "timestamp is more than five minutes away from now"
    expected = sign_body(secret, body, timestamp).partition(",v1=")[2]
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        return "does not match the source's secret"
    return None
