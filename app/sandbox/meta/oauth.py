"""Facebook Login as Meta documents it for a server-side web app, simulated: the login dialog, the
code exchange, the long-lived token exchange and the token inspection.

- ``GET /{version}/dialog/oauth?client_id&redirect_uri&state&scope`` (on www.facebook.com in
  production): a person who consents is sent back to ``redirect_uri?code=…&state=…``; one who
  cancels to ``redirect_uri?error_reason=user_denied&error=access_denied&error_description=…
  &state=…``. An unknown app gets an error page, not a redirect.
- ``GET /{version}/oauth/access_token?client_id&redirect_uri&client_secret&code``: the code (single
  use, valid ten minutes, for the ``redirect_uri`` of the dialog) for ``{access_token, token_type,
  expires_in}``, a short-lived user token.
- ``GET /{version}/oauth/access_token?grant_type=fb_exchange_token&client_id&client_secret
  &fb_exchange_token``: a short-lived token for a long-lived one (about 60 days).
- ``GET /{version}/debug_token?input_token=…`` with an app access token (``{app-id}|{app-secret}``):
  ``{"data": {app_id, type, application, data_access_expires_at, expires_at, is_valid, issued_at,
  scopes, user_id}}``, with ``error: {code, message, subcode}`` inside ``data`` for a token that
  is not valid (a well-formed 200 answer, not a Graph error). ``expires_at`` 0: never expires.

Tokens a test grants with :meth:`GraphWorld.grant` are valid, never expire and carry both ads
scopes, like a system user's token of the simulated app.

Fault kinds: ``dialog``, ``oauth.access_token``, ``debug_token``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from app.clock import SystemClock

SIM_APP_ID = "880000000000001"
SIM_APP_SECRET = "sim-app-secret-0f9e8d7c6b5a"  # noqa: S105 - the loopback simulator's app
SIM_APP_NAME = "Sweepline (simulated app)"
ADS_SCOPES = ("ads_read", "ads_management")
CODE_LIFETIME = timedelta(minutes=10)
SHORT_LIVED = timedelta(hours=1)
LONG_LIVED = timedelta(seconds=5183944)
"""The lifetime Meta's documentation shows for a long-lived user token (about 60 days)."""
DATA_ACCESS = timedelta(days=90)


def oauth_error(code: int, message: str, subcode: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {
        "message": message,
        "type": "OAuthException",
        "code": code,
        "fbtrace_id": f"SIMOAUTH{code}{subcode or 0}",
    }
    if subcode is not None:
        error["error_subcode"] = subcode
    return {"error": error}


@dataclass
class SimTokenInfo:
    """What ``debug_token`` knows of a token issued by the simulated login."""

    app_id: str
    user_id: str
    scopes: tuple[str, ...]
    issued_at: datetime
    expires_at: datetime | None
    """None: never expires."""
    revoked: bool = False


@dataclass
class SimCode:
    app_id: str
    redirect_uri: str
    user_id: str
    scopes: tuple[str, ...]
    accounts: frozenset[str]
    expires_at: datetime
    used: bool = False


@dataclass
class DialogAnswer:
    """How the simulated person answers the login dialog."""

    deny: bool = False
    """Cancel the dialog (``error=access_denied``)."""
    scopes: tuple[str, ...] | None = None
    """The permissions granted; None: all those the dialog asked for."""
    accounts: tuple[str, ...] | None = None
    """The ad accounts the issued token reaches; None: every account of the world."""
    user_id: str = "100000000000042"


@dataclass
class OAuthSim:
    """The login half of the simulated Graph API (data only; :class:`GraphWorld` routes to it)."""

    apps: dict[str, tuple[str, str]] = field(default_factory=dict)
    """app id → (secret, name)."""
    codes: dict[str, SimCode] = field(default_factory=dict)
    info: dict[str, SimTokenInfo] = field(default_factory=dict)
    answer: DialogAnswer = field(default_factory=DialogAnswer)
    now: Callable[[], datetime] = field(default_factory=lambda: SystemClock().now)
    """The simulated present (tests hand in their manual clock's ``now``)."""

    def reset(self) -> None:
        self.apps = {SIM_APP_ID: (SIM_APP_SECRET, SIM_APP_NAME)}
        self.codes.clear()
        self.info.clear()
        self.answer = DialogAnswer()
        self.now = SystemClock().now

    def expired(self, token: str) -> bool:
        info = self.info.get(token)
        if info is None:
            return False
        return info.revoked or (info.expires_at is not None and info.expires_at <= self.now())

    # -- the dialog --------------------------------------------------------------------------

    def dialog(self, params: dict[str, str], all_accounts: list[str]) -> tuple[int, str]:
        """``(302, location)`` back to the app, or ``(400, message)`` for Meta's error page."""
        app_id = params.get("client_id", "")
        redirect_uri = params.get("redirect_uri", "")
        if app_id not in self.apps:
            return 400, "Invalid App ID: The provided app ID does not look like a valid app ID."
        if not redirect_uri.startswith(("http://", "https://")):
            return 400, "URL blocked: This redirect failed because the redirect URI is not valid."
        back: dict[str, str] = {}
        if self.answer.deny:
            back = {
                "error_reason": "user_denied",
                "error": "access_denied",
                "error_description": "Permissions error.",
            }
        else:
            asked = tuple(s for s in params.get("scope", "").replace(" ", "").split(",") if s)
            granted = self.answer.scopes if self.answer.scopes is not None else asked
            accounts = self.answer.accounts if self.answer.accounts is not None else all_accounts
            code = f"AQ{secrets.token_urlsafe(24)}"
            self.codes[code] = SimCode(
                app_id=app_id,
                redirect_uri=redirect_uri,
                user_id=self.answer.user_id,
                scopes=tuple(granted),
                accounts=frozenset(accounts),
                expires_at=self.now() + CODE_LIFETIME,
            )
            back = {"code": code}
        if "state" in params:
            back["state"] = params["state"]
        joiner = "&" if "?" in redirect_uri else "?"
        # Meta appends ``#_=_`` to the redirect; browsers drop it before the server sees it.
        return 302, f"{redirect_uri}{joiner}{urlencode(back)}#_=_"

    # -- oauth/access_token ------------------------------------------------------------------

    def _app(self, params: dict[str, str]) -> str | dict[str, Any]:
        app_id = params.get("client_id", "")
        if app_id not in self.apps:
            return oauth_error(101, "Error validating application. Invalid application ID.")
        if params.get("client_secret", "") != self.apps[app_id][0]:
            return oauth_error(1, "Error validating client secret.")
        return app_id

    def access_token(
        self, params: dict[str, str], tokens: dict[str, set[str]]
    ) -> tuple[int, dict[str, Any]]:
        """Both uses of ``oauth/access_token``: a code, or ``grant_type=fb_exchange_token``."""
        app = self._app(params)
        if isinstance(app, dict):
            return 400, app
        if params.get("grant_type") == "fb_exchange_token":
            return self._exchange(app, params.get("fb_exchange_token", ""), tokens)
        code = params.get("code", "")
        if not code:
            return 400, oauth_error(100, "Missing authorization code")
        found = self.codes.get(code)
        if found is None or found.app_id != app:
            return 400, oauth_error(100, "Invalid verification code format.")
        if found.used:
            return 400, oauth_error(100, "This authorization code has been used.", 36009)
        if found.expires_at <= self.now():
            return 400, oauth_error(100, "This authorization code has expired.", 36007)
        if params.get("redirect_uri", "") != found.redirect_uri:
            return 400, oauth_error(
                100,
                "Error validating verification code. Please make sure your redirect_uri is "
                "identical to the one you used in the OAuth dialog request",
                36008,
            )
        found.used = True
        token = self._issue(
            tokens, app, found.user_id, found.scopes, set(found.accounts), SHORT_LIVED
        )
        return 200, {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": int(SHORT_LIVED.total_seconds()),
        }

    def _exchange(
        self, app: str, short: str, tokens: dict[str, set[str]]
    ) -> tuple[int, dict[str, Any]]:
        info = self.info.get(short)
        if short not in tokens or info is None or info.app_id != app:
            return 400, oauth_error(190, "Invalid OAuth access token - Cannot parse access token")
        if self.expired(short):
            return 400, oauth_error(190, "Error validating access token: Session has expired.", 463)
        token = self._issue(tokens, app, info.user_id, info.scopes, tokens[short], LONG_LIVED)
        return 200, {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": int(LONG_LIVED.total_seconds()),
        }

    def _issue(
        self,
        tokens: dict[str, set[str]],
        app: str,
        user_id: str,
        scopes: tuple[str, ...],
        accounts: set[str],
        lifetime: timedelta,
    ) -> str:
        token = f"EAA{secrets.token_urlsafe(32)}"
        now = self.now()
        tokens[token] = set(accounts)
        self.info[token] = SimTokenInfo(app, user_id, scopes, now, now + lifetime)
        return token

    # -- debug_token ---------------------------------------------------------------------------

    def debug_token(
        self, params: dict[str, str], app_token: str | None, tokens: dict[str, set[str]]
    ) -> tuple[int, dict[str, Any]]:
        app_id, _, secret = (app_token or "").partition("|")
        if app_id not in self.apps or self.apps[app_id][0] != secret:
            return 400, oauth_error(190, "Invalid OAuth access token - Cannot parse access token")
        input_token = params.get("input_token", "")
        if not input_token:
            return 400, oauth_error(100, "(#100) The parameter input_token is required")
        if input_token not in tokens:
            return 200, {
                "data": {
                    "error": {
                        "code": 190,
                        "message": "Invalid OAuth access token - Cannot parse access token",
                    },
                    "is_valid": False,
                    "scopes": [],
                }
            }
        info = self.info.get(input_token) or SimTokenInfo(
            SIM_APP_ID, "100000000000001", ADS_SCOPES, self.now(), None
        )
        data: dict[str, Any] = {
            "app_id": info.app_id,
            "type": "USER",
            "application": self.apps.get(info.app_id, ("", ""))[1],
            "data_access_expires_at": _unix(info.issued_at + DATA_ACCESS),
            "expires_at": _unix(info.expires_at) if info.expires_at is not None else 0,
            "is_valid": not self.expired(input_token),
            "issued_at": _unix(info.issued_at),
            "scopes": list(info.scopes),
            "user_id": info.user_id,
        }
        if self.expired(input_token):
            data["error"] = {
                "code": 190,
                "message": "Error validating access token: Session has expired.",
                "subcode": 463,
            }
        return 200, {"data": data}


def _unix(moment: datetime) -> int:
    return int(moment.timestamp())
