"""The simulated Graph API's data and its answers, as plain functions of a request.

Tests and the demo build a :class:`GraphWorld` (accounts, campaigns, tokens), program faults on its
:class:`~app.sandbox.base.SandboxState`, and read back the calls it counted and the updates it
received. :meth:`GraphWorld.handle` answers one call; the HTTP layer and the batch endpoint both use
it, so a sub-request of a batch behaves exactly like the same request sent alone.

Fault kinds: ``adaccounts.list``, ``account.get``, ``campaigns.list``, ``campaign.get``,
``campaign.update``, ``insights``, ``batch``, and Facebook Login's ``dialog``,
``oauth.access_token`` and ``debug_token`` (:mod:`.oauth`). A fault on ``<kind>:<object id>`` (e.g.
``campaigns.list:act_2``) hits only that object.

Slow and hanging accounts: :meth:`GraphWorld.hang` holds calls of a kind (``hang_accounts`` every
campaign listing of the accounts named) for a number of seconds before answering, like a Graph API
slowdown that hits some accounts; a held call is let go as soon as its client closes the
connection, and :attr:`GraphWorld.held` counts the calls held right now (tests wait on it before
moving a manual clock).
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import msgspec

from app.sandbox.base import Fault, HttpSimulator, SandboxState
from app.sandbox.meta import bids
from app.sandbox.meta.attribution import apply_windows, parse_windows
from app.sandbox.meta.insights import (
    INSIGHTS_FIELDS,
    PRESET_DAYS,
    generate_daily_row,
    generate_row,
)
from app.sandbox.meta.oauth import OAuthSim

if TYPE_CHECKING:
    from litestar import Litestar

ZERO_DECIMAL = frozenset(
    {"JPY", "KRW", "IDR", "CLP", "COP", "HUF", "TWD", "VND", "ISK", "PYG", "CRC", "UGX"}
)
"""Currencies whose minor-unit offset is 1 (budgets are whole units)."""

CAMPAIGN_FIELDS = frozenset(
    {
        "id",
        "name",
        "effective_status",
        "status",
        "daily_budget",
        "lifetime_budget",
        "created_time",
        "bid_strategy",
    }
)
ADSET_FIELDS = CAMPAIGN_FIELDS | {"campaign_id", "bid_amount"}
AD_FIELDS = frozenset({"id", "name", "effective_status", "status", "created_time", "campaign_id"})
"""Ads carry no budget: asking for one is Meta's nonexisting-field error."""
EDGE_FIELDS = {"campaigns": CAMPAIGN_FIELDS, "adsets": ADSET_FIELDS, "ads": AD_FIELDS}
ACCOUNT_FIELDS = frozenset(
    {"id", "account_id", "name", "currency", "timezone_name", "account_status"}
)
EFFECTIVE_STATUSES = ("ACTIVE", "PAUSED", "DELETED", "ARCHIVED", "IN_PROCESS", "WITH_ISSUES")
FILTER_OPERATORS = frozenset({"EQUAL", "NOT_EQUAL", "IN", "NOT_IN", "CONTAIN", "NOT_CONTAIN"})
SETTABLE_STATUSES = frozenset({"ACTIVE", "PAUSED", "ARCHIVED", "DELETED"})
MAX_BATCH = 50
"""Sub-requests allowed in one batch call."""
RETENTION_MONTHS = 37
"""Meta keeps Insights for 37 months: a ``time_range`` starting earlier is refused (#3018)."""
LEVEL_EDGES = {"campaign": "campaigns", "adset": "adsets", "ad": "ads"}
HIDDEN = frozenset({"ARCHIVED", "DELETED"})
"""Statuses an edge, and account-level Insights, leave out unless a filter names the status."""


def graph_error(
    code: int,
    message: str,
    *,
    error_type: str = "OAuthException",
    subcode: int | None = None,
    transient: bool = False,
) -> dict[str, Any]:
    """A Graph API error body, as Meta sends it."""
    error: dict[str, Any] = {
        "message": message,
        "type": error_type,
        "code": code,
        "is_transient": transient,
        "fbtrace_id": f"SIM{code}{subcode or 0}",
    }
    if subcode is not None:
        error["error_subcode"] = subcode
    return {"error": error}


@dataclass(frozen=True, slots=True)
class SimReply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SimCampaign:
    id: str
    name: str
    effective_status: str = "ACTIVE"
    daily_budget: int | None = 5000
    """Minor units of the account currency."""
    lifetime_budget: int | None = None
    created_time: datetime = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    delivering: bool = True
    """False: every Insights request answers with no row (no delivery)."""
    insights: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Per date preset: a row to answer with instead of the generated one, or None for no row."""
    daily: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Per day (``YYYY-MM-DD``): the one-day row a ``time_increment=1`` request answers instead
    of the generated one, or None for no delivery that day."""
    edge: str = "campaigns"
    """``campaigns``, ``adsets`` or ``ads``: the same shape serves the three levels."""
    campaign_id: str | None = None
    """An ad set's or an ad's campaign."""
    bid_strategy: str | None = None
    """A campaign's or an ad set's own strategy (None: ``LOWEST_COST_WITHOUT_CAP``)."""
    bid_amount: int | None = None
    """An ad set's bid cap or cost cap, minor units."""

    def render(self, fields: set[str], strategy: str | None = None) -> dict[str, Any]:
        values: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "effective_status": self.effective_status,
            "status": self.effective_status
            if self.effective_status in SETTABLE_STATUSES
            else "ACTIVE",
            "created_time": self.created_time.strftime("%Y-%m-%dT%H:%M:%S+0000"),
        }
        if self.daily_budget is not None:
            values["daily_budget"] = str(self.daily_budget)
        if self.lifetime_budget is not None:
            values["lifetime_budget"] = str(self.lifetime_budget)
        if self.campaign_id is not None:
            values["campaign_id"] = self.campaign_id
        if strategy is not None:
            values["bid_strategy"] = strategy
        if self.bid_amount is not None:
            values["bid_amount"] = self.bid_amount
        return {k: v for k, v in values.items() if k in fields or k == "id"}


@dataclass
class SimAccount:
    id: str
    """``act_<digits>``."""
    name: str
    currency: str = "USD"
    timezone_name: str = "America/Los_Angeles"
    account_status: int = 1
    campaigns: dict[str, SimCampaign] = field(default_factory=dict)
    adsets: dict[str, SimCampaign] = field(default_factory=dict)
    ads: dict[str, SimCampaign] = field(default_factory=dict)

    def edge(self, name: str) -> dict[str, SimCampaign]:
        return {"campaigns": self.campaigns, "adsets": self.adsets, "ads": self.ads}[name]

    @property
    def money_decimals(self) -> int:
        return 0 if self.currency in ZERO_DECIMAL else 2

    def render(self, fields: set[str]) -> dict[str, Any]:
        values: dict[str, Any] = {
            "id": self.id,
            "account_id": self.id.removeprefix("act_"),
            "name": self.name,
            "currency": self.currency,
            "timezone_name": self.timezone_name,
            "account_status": self.account_status,
        }
        return {k: v for k, v in values.items() if k in fields or k == "id"}


def _cursor(offset: int, page: int) -> str:
    return base64.urlsafe_b64encode(f"{offset}:{page}".encode()).decode().rstrip("=")


def _uncursor(raw: str) -> tuple[int, int]:
    padded = raw + "=" * (-len(raw) % 4)
    offset, page = base64.urlsafe_b64decode(padded.encode()).decode().split(":")
    return int(offset), int(page)


class BadRequest(Exception):
    """A request the Graph API would refuse with (#100)."""

    def __init__(self, message: str, code: int = 100, subcode: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.subcode = subcode


class GraphWorld(HttpSimulator):
    """Ad accounts, campaigns and tokens, and the programmable behaviour of the simulated API.
    :meth:`reset` forgets all of them: an empty world on the same version."""

    def __init__(self, *, version: str = "v21.0", base_url: str = "") -> None:
        self.version = version
        self.url = base_url
        self.state = SandboxState()
        self.accounts: dict[str, SimAccount] = {}
        self.tokens: dict[str, set[str]] = {}
        self.oauth = OAuthSim()
        """Facebook Login: the app, the dialog's codes, what ``debug_token`` knows of tokens."""
        self.oauth.reset()
        self.page_sizes: list[int] = []
        """Sizes of successive campaign pages (page 0, 1, …), capped by ``limit``; pages beyond
        the list are full. A 0 makes an empty page that still announces a next one."""
        self.trailing_empty_page = False
        """Announce one more (empty) page after the last campaign, as Meta sometimes does."""
        self.null_batch_items = 0
        """The next batch call answers its last N items with ``null`` (Meta's batch timeout)."""
        self.null_write_items = 0
        """The next batch call carrying writes answers its last N items with ``null``."""
        self.updates: list[tuple[str, dict[str, str]]] = []
        """Every accepted campaign update: ``(campaign_id, fields)``."""
        self.filters_seen: list[list[dict[str, Any]]] = []
        """The decoded ``filtering`` parameter of each campaign listing."""
        self.insights_filters_seen: list[list[dict[str, Any]]] = []
        """The decoded ``filtering`` of each account-level Insights request."""
        self.today: date | None = None
        """The simulated current date: a ``time_range`` beginning more than 37 months before it
        is refused, and no row is reported after it. None: no such check."""
        self.insights_windows_seen: list[list[str]] = []
        """The ``action_attribution_windows`` of each Insights request ([]: none asked)."""
        self.list_params: list[dict[str, str]] = []
        """The query of every campaign listing request, as received."""
        self.repeat_next_link = False
        """Answer every page after the first with the same ``next`` link (a paging loop)."""
        self.next_links: list[str | None] = []
        """The ``paging.next`` of every page served (None on a last page)."""
        self.batch_calls: list[list[tuple[str, str, Any]]] = []
        """Every batch call received: per sub-request its method, relative URL and ``body`` as
        sent (Meta takes a POST's parameters as one form-encoded string)."""
        self._lock = threading.RLock()
        self._held = 0
        self._held_generation = 0

    @property
    def base_url(self) -> str:
        """Where the world is served (the Graph API's base URL, without the version)."""
        return self.url

    @base_url.setter
    def base_url(self, value: str) -> None:
        self.url = value

    def create_app(self) -> Litestar:
        from app.sandbox.meta.app import create_app

        return create_app(self)

    def reset_data(self) -> None:
        """Forget every account, token and setting (one world per test scenario)."""
        with self._lock:
            self.accounts.clear()
            self.tokens.clear()
            self.oauth.reset()
            self.page_sizes = []
            self.trailing_empty_page = False
            self.null_batch_items = 0
            self.null_write_items = 0
            self.updates.clear()
            self.filters_seen.clear()
            self.insights_filters_seen.clear()
            self.today = None
            self.insights_windows_seen.clear()
            self.next_links.clear()
            self.list_params.clear()
            self.batch_calls.clear()
            self.repeat_next_link = False
            # Calls still held from an earlier scenario no longer count.
            self._held = 0
            self._held_generation += 1

    # -- building the world -----------------------------------------------------------------

    def add_account(
        self,
        account_id: str,
        name: str,
        *,
        currency: str = "USD",
        timezone_name: str = "America/Los_Angeles",
        account_status: int = 1,
    ) -> SimAccount:
        if not account_id.startswith("act_"):
            account_id = f"act_{account_id}"
        with self._lock:
            account = SimAccount(account_id, name, currency, timezone_name, account_status)
            self.accounts[account_id] = account
            return account

    def add_campaign(self, account_id: str, campaign: SimCampaign) -> SimCampaign:
        with self._lock:
            self.accounts[account_id].campaigns[campaign.id] = campaign
            return campaign

    def add_campaigns(
        self,
        account_id: str,
        count: int,
        *,
        first_id: int | None = None,
        name: str = "Campaign {n}",
        statuses: tuple[str, ...] = ("ACTIVE",),
        daily_budget: int | None = 5000,
    ) -> list[SimCampaign]:
        """Add ``count`` campaigns with ids from ``first_id`` (default: derived from the account),
        names from the ``name`` template and effective statuses cycling through ``statuses``."""
        account = self.accounts[account_id]
        base = first_id if first_id is not None else int(account_id.removeprefix("act_")) * 10_000
        base += len(account.campaigns)
        created = []
        for i in range(count):
            n = len(account.campaigns) + 1
            created.append(
                self.add_campaign(
                    account_id,
                    SimCampaign(
                        id=str(base + i + 1),
                        name=name.format(n=n),
                        effective_status=statuses[i % len(statuses)],
                        daily_budget=daily_budget,
                        created_time=datetime(2026, 1, 5, 8, 0, tzinfo=UTC) + timedelta(hours=i),
                    ),
                )
            )
        return created

    def add_child(
        self,
        account_id: str,
        edge: str,
        object_id: str,
        *,
        campaign_id: str,
        name: str = "",
        daily_budget: int | None = None,
        lifetime_budget: int | None = None,
        effective_status: str = "ACTIVE",
    ) -> SimCampaign:
        """An ad set (``edge="adsets"``) or an ad (``"ads"``) of ``campaign_id``. An account that
        budgets on ad sets has campaigns without a budget and ad sets with one."""
        with self._lock:
            child = SimCampaign(
                id=object_id,
                name=name or f"{edge[:-1]} {object_id}",
                effective_status=effective_status,
                daily_budget=daily_budget,
                lifetime_budget=lifetime_budget,
                edge=edge,
                campaign_id=campaign_id,
            )
            self.accounts[account_id].edge(edge)[object_id] = child
            return child

    def grant(self, token: str, *account_ids: str) -> None:
        """Let ``token`` reach ``account_ids`` (a token with no account is still valid)."""
        with self._lock:
            self.tokens.setdefault(token, set()).update(account_ids)

    def find_campaign(self, campaign_id: str) -> tuple[SimAccount, SimCampaign] | None:
        with self._lock:
            for account in self.accounts.values():
                for edge in (account.campaigns, account.adsets, account.ads):
                    campaign = edge.get(campaign_id)
                    if campaign is not None:
                        return account, campaign
        return None

    def campaign(self, campaign_id: str) -> SimCampaign:
        found = self.find_campaign(campaign_id)
        if found is None:
            raise KeyError(campaign_id)
        return found[1]

    # -- programming faults -----------------------------------------------------------------

    def fail(
        self,
        kind: str,
        *,
        code: int = 2,
        status: int = 500,
        message: str = "Service temporarily unavailable",
        transient: bool | None = None,
        subcode: int | None = None,
        times: int = 1,
    ) -> Fault:
        """Make the next ``times`` calls of ``kind`` answer a Graph error."""
        is_transient = transient if transient is not None else code in {1, 2, 4, 17, 32, 341, 613}
        return self.state.inject(
            kind,
            status=status,
            body=graph_error(code, message, subcode=subcode, transient=is_transient),
            times=times,
        )

    def throttle(self, kind: str, *, minutes: int = 1, times: int = 1) -> Fault:
        """Answer ``kind`` with the business-use-case throttle (80004) and a usage header saying
        how long until access is regained."""
        usage = {
            "1000000001": [
                {
                    "type": "ads_management",
                    "call_count": 100,
                    "total_cputime": 40,
                    "total_time": 40,
                    "estimated_time_to_regain_access": minutes,
                }
            ]
        }
        return self.state.inject(
            kind,
            status=400,
            body=graph_error(
                80004,
                "There have been too many calls to this ad-account. Wait a bit and try again.",
                subcode=2446079,
                transient=True,
            ),
            headers={"x-business-use-case-usage": msgspec.json.encode(usage).decode()},
            times=times,
        )

    def answer_html(self, kind: str, *, times: int = 1) -> Fault:
        """Answer ``kind`` with HTTP 200 and an HTML page instead of JSON (a proxy's or an
        overloaded edge's error page): the same request succeeds when sent again."""
        return self.state.inject(
            kind,
            status=200,
            raw=b"<!DOCTYPE html><html><body>Sorry, something went wrong.</body></html>",
            headers={"content-type": "text/html; charset=utf-8"},
            times=times,
        )

    def hang(self, kind: str, *, seconds: float = 3600.0, times: int = -1) -> Fault:
        """Hold calls of ``kind`` (e.g. ``campaigns.list:act_2``) for ``seconds`` before answering:
        an ad account whose API calls hang. A client that gives up closes its connection; the
        simulator answers nobody then."""
        return self.state.inject(kind, delay_seconds=seconds, times=times)

    def hang_accounts(self, *account_ids: str, seconds: float = 3600.0) -> None:
        """Every campaign-list call of these ad accounts hangs (a Graph-wide slowdown that hits
        some accounts): see :meth:`hang`."""
        for account_id in account_ids:
            self.hang(f"campaigns.list:{account_id}", seconds=seconds)

    @property
    def held(self) -> int:
        """Calls being held by a hang right now (received, not answered, client still there)."""
        with self._lock:
            return self._held

    def hold_started(self) -> int:
        """Count one held call in; returns the token :meth:`hold_ended` takes."""
        with self._lock:
            self._held += 1
            return self._held_generation

    def hold_ended(self, generation: int) -> None:
        with self._lock:
            if generation == self._held_generation:
                self._held -= 1

    def _hit(self, kind: str, scope: str | None, **details: Any) -> Fault | None:
        fault = self.state.hit(kind, scope=scope, **details)
        if fault is not None or scope is None:
            return fault
        scoped = f"{kind}:{scope}"
        with self.state._lock:
            for candidate in self.state.faults:
                if candidate.kind == scoped and candidate.times != 0:
                    if candidate.times > 0:
                        candidate.times -= 1
                    return candidate
        return None

    def take_null_items(self, *, writes: bool = False) -> int:
        """How many trailing items of this batch call to answer with null (then back to 0).
        The items were not carried out: a write among them did not happen."""
        with self._lock:
            if writes and self.null_write_items:
                nulls, self.null_write_items = self.null_write_items, 0
                return nulls
            nulls, self.null_batch_items = self.null_batch_items, 0
            return nulls

    # -- answering ----------------------------------------------------------------------------

    def usage_headers(self, account_id: str | None) -> dict[str, str]:
        calls = self.state.count("*")
        pct = min(99, calls // 200)
        headers = {
            "x-app-usage": msgspec.json.encode(
                {"call_count": pct, "total_cputime": pct // 2, "total_time": pct // 2}
            ).decode()
        }
        if account_id is not None:
            headers["x-ad-account-usage"] = msgspec.json.encode(
                {"acc_id_util_pct": pct, "reset_time_duration": 0}
            ).decode()
            headers["x-business-use-case-usage"] = msgspec.json.encode(
                {
                    account_id.removeprefix("act_"): [
                        {
                            "type": "ads_management",
                            "call_count": pct,
                            "total_cputime": pct // 2,
                            "total_time": pct // 2,
                            "estimated_time_to_regain_access": 0,
                        }
                    ]
                }
            ).decode()
        return headers

    def handle(
        self, method: str, path: str, params: dict[str, str], token: str | None
    ) -> SimReply | Fault:
        """Answer one Graph call. ``path`` has no leading slash and includes the version."""
        parts = [p for p in path.split("/") if p]
        if not parts or not (parts[0].startswith("v") and "." in parts[0]):
            return SimReply(
                400,
                graph_error(2500, "Unknown path components: an API version is required"),
            )
        parts = parts[1:]
        login = self._login(method, parts, params, token)
        if login is not None:
            return login
        if token is not None and token in self.tokens and self.oauth.expired(token):
            return SimReply(
                400,
                graph_error(
                    190, "Error validating access token: Session has expired.", subcode=463
                ),
            )
        if token is None or token not in self.tokens:
            return SimReply(
                400,
                graph_error(
                    190, "Invalid OAuth access token - Cannot parse access token", subcode=463
                ),
            )
        try:
            with self._lock:
                return self._route(method, parts, params, token)
        except BadRequest as exc:
            return SimReply(400, graph_error(exc.code, exc.message, subcode=exc.subcode))

    def _login(
        self, method: str, parts: list[str], params: dict[str, str], token: str | None
    ) -> SimReply | Fault | None:
        """The Facebook Login endpoints (:mod:`.oauth`), which take an app's credentials rather
        than a user's token; None for every other path."""
        if method != "GET" or parts not in (["oauth", "access_token"], ["debug_token"]):
            return None
        kind = "debug_token" if parts == ["debug_token"] else "oauth.access_token"
        fault = self._hit(kind, None)
        if fault is not None:
            return fault
        with self._lock:
            if kind == "debug_token":
                status, body = self.oauth.debug_token(params, token, self.tokens)
            else:
                status, body = self.oauth.access_token(params, self.tokens)
        return SimReply(status, body)

    def _route(
        self, method: str, parts: list[str], params: dict[str, str], token: str
    ) -> SimReply | Fault:
        if method == "GET" and parts == ["me", "adaccounts"]:
            return self._list_accounts(params, token)
        if len(parts) == 1 and parts[0].startswith("act_") and method == "GET":
            account = self._account(parts[0], token)
            fault = self._hit("account.get", account.id)
            return fault or SimReply(
                200, account.render(_fields(params, ACCOUNT_FIELDS)), self.usage_headers(account.id)
            )
        if len(parts) == 2 and parts[0].startswith("act_") and method == "GET":
            account = self._account(parts[0], token)
            if parts[1] in EDGE_FIELDS:
                return self._list_campaigns(account, params, parts[1])
            if parts[1] == "insights":
                return self._account_insights(account, params)
        if len(parts) == 1 and parts[0].isdigit():
            account, campaign = self._campaign(parts[0], token)
            if method == "GET":
                fault = self._hit("campaign.get", campaign.id)
                return fault or SimReply(
                    200,
                    campaign.render(
                        _fields(params, EDGE_FIELDS[campaign.edge]),
                        bids.effective_strategy(account, campaign),
                    ),
                    self.usage_headers(account.id),
                )
            if method == "POST":
                return self._update_campaign(account, campaign, params)
        if len(parts) == 2 and parts[0].isdigit() and parts[1] == "insights" and method == "GET":
            account, campaign = self._campaign(parts[0], token)
            return self._campaign_insights(account, campaign, params)
        raise BadRequest(f"Unsupported {method.lower()} request.", code=100, subcode=33)

    def _account(self, account_id: str, token: str) -> SimAccount:
        account = self.accounts.get(account_id)
        if account is None or account_id not in self.tokens[token]:
            raise BadRequest(
                f"Unsupported get request. Object with ID '{account_id}' does not exist, cannot "
                "be loaded due to missing permissions, or does not support this operation.",
                subcode=33,
            )
        return account

    def _campaign(self, campaign_id: str, token: str) -> tuple[SimAccount, SimCampaign]:
        found = self.find_campaign(campaign_id)
        if found is None or found[0].id not in self.tokens[token]:
            raise BadRequest(
                f"Unsupported request. Object with ID '{campaign_id}' does not exist, cannot be "
                "loaded due to missing permissions, or does not support this operation.",
                subcode=33,
            )
        return found

    def _list_accounts(self, params: dict[str, str], token: str) -> SimReply | Fault:
        fault = self._hit("adaccounts.list", None)
        if fault is not None:
            return fault
        fields = _fields(params, ACCOUNT_FIELDS)
        accounts = [self.accounts[a] for a in sorted(self.tokens[token]) if a in self.accounts]
        rows = [a.render(fields) for a in accounts]
        return self._paged(rows, params, "me/adaccounts", None, use_plan=False)

    def _list_campaigns(
        self, account: SimAccount, params: dict[str, str], edge: str = "campaigns"
    ) -> SimReply | Fault:
        filtering = _filtering(params.get("filtering"))
        self.list_params.append(dict(params))
        fault = self._hit("campaigns.list", account.id, filtering=filtering)
        self.filters_seen.append(filtering)
        if fault is not None:
            return fault
        fields = _fields(params, EDGE_FIELDS[edge])
        # Edges leave archived and deleted objects out unless a filter names effective_status
        # (then whatever matches comes back, archived and deleted included).
        names_status = any(f["field"] == "effective_status" for f in filtering)
        matched = [
            c
            for c in account.edge(edge).values()
            if _matches(c, filtering) and (names_status or c.effective_status not in HIDDEN)
        ]
        rows = [c.render(fields, bids.effective_strategy(account, c)) for c in matched]
        return self._paged(rows, params, f"{account.id}/{edge}", account.id, use_plan=True)

    def _paged(
        self,
        rows: list[dict[str, Any]],
        params: dict[str, str],
        path: str,
        account_id: str | None,
        *,
        use_plan: bool,
    ) -> SimReply:
        try:
            limit = int(params.get("limit", "25"))
        except ValueError:
            raise BadRequest("(#100) Param limit must be an integer") from None
        if limit < 1:
            raise BadRequest("(#100) Param limit must be positive")
        offset, page_no = 0, 0
        if params.get("after"):
            try:
                offset, page_no = _uncursor(params["after"])
            except (ValueError, UnicodeDecodeError):
                raise BadRequest("(#100) Invalid cursor") from None
        size = limit
        if use_plan and page_no < len(self.page_sizes):
            size = min(limit, self.page_sizes[page_no])
        chunk = rows[offset : offset + size]
        end = offset + len(chunk)
        body: dict[str, Any] = {"data": chunk}
        paging: dict[str, Any] = {}
        if chunk:
            # An empty page carries no cursors (there is no item for them to point at), only
            # the ``next`` link: a client that rebuilds the query from ``cursors.after`` fails.
            paging["cursors"] = {
                "before": _cursor(offset, page_no),
                "after": _cursor(end, page_no + 1),
            }
        more = end < len(rows)
        if not more and self.trailing_empty_page and use_plan and offset < len(rows):
            more = True  # one more, empty page: Meta sometimes announces it
        if more:
            query = {k: v for k, v in params.items() if k != "after"}
            query["after"] = _cursor(end, page_no + 1)
            if self.repeat_next_link and use_plan and page_no >= 1:
                query["after"] = _cursor(offset, page_no)
            paging["next"] = f"{self.base_url}/{self.version}/{path}?{urlencode(query)}"
        self.next_links.append(paging.get("next"))
        body["paging"] = paging
        return SimReply(200, body, self.usage_headers(account_id))

    def _update_campaign(
        self, account: SimAccount, campaign: SimCampaign, params: dict[str, str]
    ) -> SimReply | Fault:
        fault = self._hit("campaign.update", campaign.id, fields=dict(params))
        if fault is not None:
            return fault
        changes = _campaign_changes(campaign, params)
        _check_values(campaign, changes)
        try:
            bids.check(account, campaign, changes)
        except bids.BidRefused as exc:
            raise BadRequest(str(exc)) from None
        _check_editable(campaign, changes)
        _apply_changes(campaign, changes)
        self.updates.append((campaign.id, changes))
        return SimReply(200, {"success": True}, self.usage_headers(account.id))

    def _insights_row(
        self,
        account: SimAccount,
        campaign: SimCampaign,
        preset: str,
        windows: list[str] | None = None,
    ) -> dict[str, Any] | None:
        if preset in campaign.insights:
            override = campaign.insights[preset]
            row = None if override is None else dict(override)
        elif not campaign.delivering:
            row = None
        else:
            row = generate_row(campaign.id, preset, account.money_decimals)
        if row is None or not windows:
            return row
        return apply_windows(row, windows, account.money_decimals)

    def _windows(self, params: dict[str, str]) -> list[str]:
        """The request's ``action_attribution_windows`` (checked), kept for tests to read."""
        try:
            windows = parse_windows(params.get("action_attribution_windows"))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        self.insights_windows_seen.append(windows)
        return windows

    def _insights_params(self, params: dict[str, str]) -> tuple[str, set[str]]:
        preset = params.get("date_preset", "last_30d")
        if preset not in PRESET_DAYS:
            raise BadRequest(f"(#100) date_preset must be one of {', '.join(PRESET_DAYS)}")
        fields = {f for f in params.get("fields", "").split(",") if f}
        unknown = fields - INSIGHTS_FIELDS
        if unknown:
            raise BadRequest(f"(#100) {', '.join(sorted(unknown))} are not valid for fields param.")
        return preset, fields or {"spend", "impressions"}

    def _shape(
        self, row: dict[str, Any], fields: set[str], account: SimAccount, campaign: SimCampaign
    ) -> dict[str, Any]:
        identity = {
            "campaign_id": campaign.id,
            "campaign_name": campaign.name,
            "account_id": account.id.removeprefix("act_"),
        }
        shaped = {k: v for k, v in row.items() if k in fields}
        shaped.update({k: v for k, v in identity.items() if k in fields})
        shaped["date_start"] = "2026-03-01"
        shaped["date_stop"] = "2026-03-02"
        return shaped

    def _campaign_insights(
        self, account: SimAccount, campaign: SimCampaign, params: dict[str, str]
    ) -> SimReply | Fault:
        preset, fields = self._insights_params(params)
        fault = self._hit("insights", campaign.id, date_preset=preset)
        if fault is not None:
            return fault
        row = self._insights_row(account, campaign, preset, self._windows(params))
        data = [] if row is None else [self._shape(row, fields, account, campaign)]
        return SimReply(200, {"data": data, "paging": {}}, self.usage_headers(account.id))

    def _account_insights(self, account: SimAccount, params: dict[str, str]) -> SimReply | Fault:
        """``level=campaign``: one row per delivering campaign of the account."""
        if "time_range" in params:
            return self._daily_insights(account, params)
        if params.get("level") != "campaign":
            raise BadRequest("(#100) this simulator answers account insights at level=campaign")
        preset, fields = self._insights_params(params)
        windows = self._windows(params)
        filtering = _insights_filtering(params.get("filtering"))
        self.insights_filters_seen.append(filtering)
        fault = self._hit("insights", account.id, date_preset=preset, level="campaign")
        if fault is not None:
            return fault
        # Archived and deleted objects are left out unless the filter names their status.
        named = {
            str(v)
            for f in filtering
            if f["field"] == "campaign.effective_status" and f["operator"] == "IN"
            for v in f["value"]
        }
        rows = []
        for campaign in account.campaigns.values():
            if campaign.effective_status in HIDDEN and campaign.effective_status not in named:
                continue
            if not _matches_insights(campaign, filtering):
                continue
            row = self._insights_row(account, campaign, preset, windows)
            if row is not None:
                rows.append(self._shape(row, fields | {"campaign_id"}, account, campaign))
        return self._paged(rows, params, f"{account.id}/insights", account.id, use_plan=False)

    def _daily_insights(self, account: SimAccount, params: dict[str, str]) -> SimReply | Fault:
        """``time_range`` with ``time_increment=1`` at ``level`` campaign, adset or ad: one row
        per object and day with delivery, each with its ``date_start`` = ``date_stop``, paged."""
        level = params.get("level", "campaign")
        if level not in LEVEL_EDGES:
            raise BadRequest("(#100) level must be one of ad, adset, campaign, account")
        if params.get("time_increment", "1") != "1":
            raise BadRequest("(#100) this simulator answers a time_range with time_increment=1")
        since, until = _time_range(params["time_range"])
        if self.today is not None and since < _months_before(self.today, RETENTION_MONTHS):
            raise BadRequest(
                "(#3018) The start date of the time range cannot be beyond 37 months from the "
                "current date",
                code=3018,
            )
        fields = {f for f in params.get("fields", "").split(",") if f}
        unknown = fields - INSIGHTS_FIELDS
        if unknown:
            raise BadRequest(f"(#100) {', '.join(sorted(unknown))} are not valid for fields param.")
        fields = fields or {"spend", "impressions"}
        filtering = _insights_filtering(params.get("filtering"), level)
        self.insights_filters_seen.append(filtering)
        fault = self._hit("insights", account.id, time_range=(since, until), level=level)
        if fault is not None:
            return fault
        named = {
            str(v)
            for f in filtering
            if f["field"] == f"{level}.effective_status" and f["operator"] == "IN"
            for v in f["value"]
        }
        objects = [
            o
            for o in account.edge(LEVEL_EDGES[level]).values()
            if (o.effective_status not in HIDDEN or o.effective_status in named)
            and _matches_insights(o, filtering, level)
        ]
        last = min(until, self.today) if self.today is not None else until
        rows: list[dict[str, Any]] = []
        day = since
        while day <= last:
            iso = day.isoformat()
            for obj in objects:
                row = self._daily_row(account, obj, day)
                if row is None:
                    continue
                shaped = {k: v for k, v in row.items() if k in fields}
                identity = {
                    f"{level}_id": obj.id,
                    f"{level}_name": obj.name,
                    "account_id": account.id.removeprefix("act_"),
                }
                shaped.update({k: v for k, v in identity.items() if k in fields})
                shaped["date_start"] = iso
                shaped["date_stop"] = iso
                rows.append(shaped)
            day += timedelta(days=1)
        # ``page_sizes`` shapes these pages too: short and empty pages that still announce more.
        return self._paged(rows, params, f"{account.id}/insights", account.id, use_plan=True)

    def _daily_row(self, account: SimAccount, obj: SimCampaign, day: date) -> dict[str, Any] | None:
        iso = day.isoformat()
        if iso in obj.daily:
            override = obj.daily[iso]
            return None if override is None else dict(override)
        if not obj.delivering or day < obj.created_time.date():
            return None
        return generate_daily_row(obj.id, iso, account.money_decimals)


def _time_range(raw: str) -> tuple[date, date]:
    """A ``time_range`` parameter: ``{"since": "YYYY-MM-DD", "until": "YYYY-MM-DD"}``."""
    try:
        value = msgspec.json.decode(raw)
        since = date.fromisoformat(value["since"])
        until = date.fromisoformat(value["until"])
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        raise BadRequest("(#100) param time_range must be {since, until} dates") from None
    if until < since:
        raise BadRequest("(#100) time_range: since must be on or before until")
    return since, until


def _months_before(day: date, months: int) -> date:
    """``day`` moved back by calendar months (the last day of a shorter month)."""
    total = day.year * 12 + (day.month - 1) - months
    year, month = divmod(total, 12)
    month += 1
    for last in (31, 30, 29, 28):
        try:
            return date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable")


def _fields(params: dict[str, str], allowed: frozenset[str]) -> set[str]:
    fields = {f.strip() for f in params.get("fields", "").split(",") if f.strip()}
    unknown = fields - allowed
    if unknown:
        raise BadRequest(f"(#100) Tried accessing nonexisting field ({', '.join(sorted(unknown))})")
    return fields or {"id", "name"}


def _filtering(raw: str | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise BadRequest("(#100) param filtering must be a JSON array") from None
    if not isinstance(value, list):
        raise BadRequest("(#100) param filtering must be a JSON array")
    for item in value:
        if not isinstance(item, dict) or set(item) != {"field", "operator", "value"}:
            raise BadRequest("(#100) each filtering entry has field, operator and value")
        if item["operator"] not in FILTER_OPERATORS:
            raise BadRequest(f"(#100) filtering operator {item['operator']!r} is not supported")
        if item["field"] not in {"id", "name", "effective_status"}:
            raise BadRequest(f"(#100) filtering field {item['field']!r} is not supported")
        if item["operator"] in {"IN", "NOT_IN"} and not isinstance(item["value"], list):
            raise BadRequest(f"(#100) {item['operator']} takes a list value")
    return value


def _insights_filtering(raw: str | None, level: str = "campaign") -> list[dict[str, Any]]:
    """An account-level Insights ``filtering``: fields are prefixed by the level
    (``campaign.id``, ``adset.effective_status``)."""
    if not raw:
        return []
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise BadRequest("(#100) param filtering must be a JSON array") from None
    if not isinstance(value, list):
        raise BadRequest("(#100) param filtering must be a JSON array")
    for item in value:
        if not isinstance(item, dict) or set(item) != {"field", "operator", "value"}:
            raise BadRequest("(#100) each filtering entry has field, operator and value")
        if item["field"] not in {f"{level}.id", f"{level}.effective_status", f"{level}.name"}:
            raise BadRequest(f"(#100) filtering field {item['field']!r} is not supported")
        if item["operator"] not in FILTER_OPERATORS:
            raise BadRequest(f"(#100) filtering operator {item['operator']!r} is not supported")
        if item["operator"] in {"IN", "NOT_IN"} and not isinstance(item["value"], list):
            raise BadRequest(f"(#100) {item['operator']} takes a list value")
    return value


def _matches_insights(
    campaign: SimCampaign, filtering: list[dict[str, Any]], level: str = "campaign"
) -> bool:
    plain = [{**f, "field": f["field"].removeprefix(f"{level}.")} for f in filtering]
    return _matches(campaign, plain)


def _matches(campaign: SimCampaign, filtering: list[dict[str, Any]]) -> bool:
    for item in filtering:
        actual = {"id": campaign.id, "name": campaign.name}.get(
            item["field"], campaign.effective_status
        )
        op, value = item["operator"], item["value"]
        if op == "EQUAL" and actual != str(value):
            return False
        if op == "NOT_EQUAL" and actual == str(value):
            return False
        if op == "IN" and actual not in [str(v) for v in value]:
            return False
        if op == "NOT_IN" and actual in [str(v) for v in value]:
            return False
        if op == "CONTAIN" and str(value).lower() not in actual.lower():
            return False
        if op == "NOT_CONTAIN" and str(value).lower() in actual.lower():
            return False
    return True


# -- a campaign, ad set or ad update, checked in Meta's order --------------------------------------


def _campaign_changes(campaign: SimCampaign, params: dict[str, str]) -> dict[str, str]:
    """The fields the update sets; an unknown field, or none at all, is refused."""
    writable = (
        {"status", "name"}
        | ({"daily_budget", "lifetime_budget"} if campaign.edge != "ads" else set())
        | bids.writable(campaign)
    )
    changes = {k: v for k, v in params.items() if k in writable}
    unknown = set(params) - writable - {"access_token"}
    if unknown or not changes:
        raise BadRequest(f"(#100) Invalid parameter: {', '.join(sorted(unknown)) or 'none'}")
    return changes


def _check_values(campaign: SimCampaign, changes: dict[str, str]) -> None:
    if "lifetime_budget" in changes:
        _check_lifetime_budget(campaign, changes["lifetime_budget"])
    if "status" in changes and changes["status"] not in SETTABLE_STATUSES:
        raise BadRequest("(#100) Param status must be one of {ACTIVE, PAUSED, …}")
    if "daily_budget" in changes:
        _check_daily_budget(campaign, changes["daily_budget"])
    if "name" in changes and not changes["name"].strip():
        raise BadRequest("(#100) Invalid parameter: name")


def _check_lifetime_budget(campaign: SimCampaign, raw: str) -> None:
    if not raw.isdigit() or int(raw) <= 0:
        raise BadRequest("(#100) Invalid parameter: lifetime_budget", subcode=1885272)
    if campaign.lifetime_budget is None:
        raise BadRequest(
            "(#100) An object with a daily budget cannot get a lifetime budget",
            subcode=1885621,
        )


def _check_daily_budget(campaign: SimCampaign, raw: str) -> None:
    if not raw.isdigit() or int(raw) <= 0:
        raise BadRequest("(#100) Invalid parameter: daily_budget", subcode=1885272)
    if campaign.lifetime_budget is not None:
        raise BadRequest(
            "(#100) A campaign with a lifetime budget cannot get a daily budget",
            subcode=1885621,
        )
    if campaign.edge == "campaigns" and campaign.daily_budget is None:
        # The budget sits on the campaign's ad sets (no campaign budget optimisation).
        raise BadRequest(
            "(#100) The campaign has no budget: its ad sets have theirs",
            subcode=1885650,
        )


def _check_editable(campaign: SimCampaign, changes: dict[str, str]) -> None:
    """A deleted object takes no update; an archived one only a new name, or status DELETED."""
    if campaign.effective_status == "DELETED":
        raise BadRequest("(#100) A deleted object cannot be edited", subcode=1487301)
    if campaign.effective_status == "ARCHIVED" and (
        "daily_budget" in changes or changes.get("status", "DELETED") != "DELETED"
    ):
        raise BadRequest(
            "(#100) An archived object can only be renamed or deleted", subcode=1487302
        )


def _apply_changes(campaign: SimCampaign, changes: dict[str, str]) -> None:
    bids.apply(campaign, changes)
    if "status" in changes:
        campaign.effective_status = changes["status"]
    if "daily_budget" in changes:
        campaign.daily_budget = int(changes["daily_budget"])
    if "lifetime_budget" in changes:
        campaign.lifetime_budget = int(changes["lifetime_budget"])
    if "name" in changes:
        campaign.name = changes["name"]
