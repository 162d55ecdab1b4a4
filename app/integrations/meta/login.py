"""Facebook Login for a server-side web app, as Meta documents it ("Manually Build a Login Flow",
"Long-Lived Access Tokens", "debug_token"): the login dialog's URL, the code exchanged for a user
token at ``oauth/access_token``, that token exchanged for a long-lived one
(``grant_type=fb_exchange_token``), and any token inspected with the app's access token
(``{app-id}|{app-secret}``) at ``debug_token``.

Every answer is decoded into a struct; a shape we do not understand is a permanent
:class:`MetaError`, like any refusal. The app secret travels only to the Graph API host, in the
query string Meta documents, and never appears in a log line (the client logs paths only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

import msgspec

from app.integrations.meta.client import AccessToken, GraphClient
from app.integrations.meta.errors import MetaError, decode_error

LOGIN_SCOPES = ("ads_read", "ads_management")
"""What the dialog asks for: reading Insights and changing campaigns."""


class IssuedToken(msgspec.Struct):
    """``oauth/access_token``'s answer."""

    access_token: str
    token_type: str = "bearer"  # noqa: S105 - the token kind Meta names, not a secret
    expires_in: int | None = None
    """Seconds until the token expires; absent for a token that does not."""


class TokenProblem(msgspec.Struct):
    code: int = 0
    message: str = ""
    subcode: int | None = None


class TokenFacts(msgspec.Struct):
    """``debug_token``'s ``data``: what Meta knows of a token. Unix times; 0 means never."""

    is_valid: bool
    app_id: str = ""
    type: str = ""
    application: str = ""
    expires_at: int = 0
    data_access_expires_at: int = 0
    issued_at: int = 0
    scopes: list[str] = msgspec.field(default_factory=list)
    user_id: str = ""
    error: TokenProblem | None = None


class _Debugged(msgspec.Struct):
    data: TokenFacts


T = TypeVar("T")

_issued = msgspec.json.Decoder(IssuedToken)
_debugged = msgspec.json.Decoder(_Debugged)


@dataclass(frozen=True, slots=True)
class MetaApp:
    """The operator's Meta app. Its ``repr`` hides the secret."""

    app_id: str
    app_secret: str
    redirect_url: str
    """Where the dialog sends the person back (listed in the app's Valid OAuth Redirect URIs)."""
    dialog_url: str
    """Facebook Login's dialog host (``https://www.facebook.com``)."""

    def __repr__(self) -> str:
        return f"MetaApp(app_id={self.app_id!r}, redirect_url={self.redirect_url!r})"


class MetaLogin:
    """Facebook Login over the process's shared :class:`GraphClient`."""

    def __init__(self, graph: GraphClient, app: MetaApp) -> None:
        self.graph = graph
        self.app = app

    def dialog_url(self, state: str) -> str:
        """Where the browser goes to log in and grant the ads permissions."""
        query = urlencode(
            {
                "client_id": self.app.app_id,
                "redirect_uri": self.app.redirect_url,
                "state": state,
                "scope": ",".join(LOGIN_SCOPES),
                "response_type": "code",
            }
        )
        return f"{self.app.dialog_url.rstrip('/')}/{self.graph.version}/dialog/oauth?{query}"

    async def exchange_code(self, code: str) -> IssuedToken:
        """The dialog's code for a (short-lived) user access token."""
        reply = await self.graph.request(
            "GET",
            "oauth/access_token",
            None,
            params={
                "client_id": self.app.app_id,
                "redirect_uri": self.app.redirect_url,
                "client_secret": self.app.app_secret,
                "code": code,
            },
        )
        return _decode(_issued, reply.content, "code exchange answer")

    async def long_lived(self, token: str) -> IssuedToken:
        """A short-lived user token for a long-lived one (about 60 days)."""
        reply = await self.graph.request(
            "GET",
            "oauth/access_token",
            None,
            params={
                "grant_type": "fb_exchange_token",
                "client_id": self.app.app_id,
                "client_secret": self.app.app_secret,
                "fb_exchange_token": token,
            },
        )
        return _decode(_issued, reply.content, "long-lived token answer")

    async def inspect(self, token: str) -> TokenFacts:
        """What Meta says of ``token``: valid or not, whose app, expiry, granted scopes."""
        app_token = AccessToken(f"{self.app.app_id}|{self.app.app_secret}")
        reply = await self.graph.request(
            "GET", "debug_token", app_token, params={"input_token": token}
        )
        return _decode(_debugged, reply.content, "debug_token answer").data


def _decode(decoder: msgspec.json.Decoder[T], content: bytes, what: str) -> T:
    try:
        return decoder.decode(content)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise decode_error(what, exc) from None


__all__ = ["LOGIN_SCOPES", "IssuedToken", "MetaApp", "MetaError", "MetaLogin", "TokenFacts"]
