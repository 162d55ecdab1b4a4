"""The SERP / keyword-data provider client (DataForSEO's queued "task" API).

Work is queued with ``task_post`` (at most 100 tasks a call), finished tasks are listed by
``tasks_ready`` and collected one by one with ``task_get``. One client from the shared outbound
core (:func:`~app.integrations.http_guard.outbound_client`; the provider URL is the operator's
setting, never a workspace's) carries every call; transient failures (5xx, timeouts, ``40202`` rate
limit, ``50000``) are retried with exponential backoff on an injectable ``sleep`` by the shared
:class:`~app.integrations.http_guard.RetryPolicy`, permanent ones (``40200`` payment required,
``40501`` invalid field, rejected credentials, unreadable answers) are raised at once. Every error
is a :class:`~.errors.ProviderError`, an :class:`~app.integrations.http_guard.OutboundError`.

A ``task_post`` whose answer was lost (read timeout, dropped connection, a gateway's 502/504) is
**not** sent again: the provider may have created — and billed — the tasks, and a second post would
create them twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, Final, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from app.clock import SystemClock
from app.integrations.http_guard import (
    ClientOptions,
    OutboundError,
    RetryPolicy,
    classify_exception,
    gateway_gave_up,
    is_rate_limited,
    is_transient_status,
    outbound_client,
)
from app.integrations.http_guard.retry import retry_after_seconds
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.serp import codes
from app.integrations.serp.errors import (
    PROVIDER,
    AuthenticationFailed,
    InvalidRequest,
    PaymentRequired,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from app.integrations.serp.local_finder import (
    LOCAL_FINDER_PATH,
    MAX_LOCAL_FINDER_DEPTH,
    local_finder_result,
)
from app.integrations.serp.locations import LOCATIONS_PATH, LocationEntry
from app.integrations.serp.maps import (
    MAPS_PATH,
    MAX_MAPS_DEPTH,
    MapsTask,
    MapsTaskResult,
    WireMapsResult,
    maps_body,
    maps_result,
)
from app.integrations.serp.pacing import Pacer, Unpaced
from app.integrations.serp.results import keyword_data_result, serp_result
from app.integrations.serp.structs import (
    KeywordDataResult,
    KeywordDataTask,
    PostedTask,
    ReadyTask,
    SerpTask,
    SerpTaskResult,
)
from app.integrations.serp.wire import (
    Envelope,
    WireKeyword,
    WireReady,
    WireSerpResult,
    WireTask,
    decode_envelope,
    decode_head,
)
from app.settings import IntegrationSettings

log = logging.getLogger(__name__)

R = TypeVar("R")
Sleep = Callable[[float], Awaitable[None]]

SERP_PATH: Final = "/v3/serp/google/organic"
KEYWORD_DATA_PATH: Final = "/v3/keywords_data/google_ads/search_volume"
MAX_TASKS_PER_POST: Final = 100
MAX_KEYWORDS_PER_TASK: Final = 1000


class SerpClient:
    """Client of the provider's queued SERP and keyword-data endpoints.

    Args:
        base_url: the provider's root URL (the simulator's URL in tests and the demo).
        login, password: the account's HTTP basic credentials (never logged).
        http: a shared client; when omitted one is created and closed by :meth:`aclose`.
        timeout_seconds: timeout of one HTTP request (when the client is created here).
        retries: how many times a transient failure is retried before it is raised.
        backoff_seconds, max_backoff_seconds: the wait before retry *n* is
            ``min(backoff_seconds * 2**n, max_backoff_seconds)``, or the provider's ``Retry-After``.
        sleep: waits between retries (a test passes one that records the schedule).
        pacer: gives every request (retries included) its slot under the account's general
            rate limit (:mod:`~.pacing`); none: unpaced.
    """

    def __init__(
        self,
        base_url: str,
        login: str,
        password: str,
        http: httpx.AsyncClient | None = None,
        *,
        timeout_seconds: float = 30.0,
        user_agent: str = USER_AGENT,
        retries: int = 3,
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 60.0,
        sleep: Sleep = asyncio.sleep,
        pacer: Pacer | None = None,
    ) -> None:
        self._pacer: Pacer = pacer or Unpaced()
        self._base_url = base_url.rstrip("/")
        self._auth = httpx.BasicAuth(login, password)
        self._owns_http = http is None
        self._http = http or outbound_client(
            provider=PROVIDER,
            options=ClientOptions(
                timeout_seconds=timeout_seconds,
                connect_timeout_seconds=min(timeout_seconds, 10.0),
                user_agent=user_agent,
            ),
        )
        # Retry n waits min(backoff × 2ⁿ, cap), or the provider's Retry-After when longer; a
        # Retry-After beyond the cap ends the retries (the poller comes back on its next tick).
        self._policy = RetryPolicy(
            schedule=tuple(
                min(backoff_seconds * 2**n, max_backoff_seconds) for n in range(retries)
            ),
            max_wait_seconds=max_backoff_seconds,
            sleep=sleep,
        )
        self._retries = retries

    @classmethod
    def from_settings(
        cls, settings: IntegrationSettings, http: httpx.AsyncClient | None = None, **kwargs: Any
    ) -> SerpClient:
        kwargs.setdefault("timeout_seconds", settings.http_timeout_seconds)
        kwargs.setdefault("user_agent", settings.user_agent)
        return cls(settings.serp_url, settings.serp_login, settings.serp_password, http, **kwargs)

    def __repr__(self) -> str:
        return f"SerpClient({self._base_url!r})"

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
        close = getattr(self._pacer, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> SerpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- SERP ------------------------------------------------------------------------------------

    async def post_serp_tasks(self, tasks: Sequence[SerpTask]) -> list[PostedTask]:
        """Queue SERP checks, 100 per call; one :class:`PostedTask` per task, in order.

        A task the provider refuses (``40501`` invalid field, …) comes back with its code and an
        empty ``task_id``. If a call fails after earlier chunks were created, the error carries
        those in ``posted``.
        """
        return await self._post_chunks(f"{SERP_PATH}/task_post", [_serp_body(t) for t in tasks])

    async def serp_tasks_ready(self) -> list[ReadyTask]:
        return await self._tasks_ready(f"{SERP_PATH}/tasks_ready")

    async def get_serp_task(self, task_id: str) -> SerpTaskResult:
        endpoint = f"{SERP_PATH}/task_get/regular/{quote(task_id, safe='')}"
        task = _single(await self._call("GET", endpoint, WireSerpResult), endpoint)
        return serp_result(task, task_id)

    # -- Google Maps -----------------------------------------------------------------------------

    async def post_maps_tasks(self, tasks: Sequence[MapsTask]) -> list[PostedTask]:
        """Queue Google Maps searches, 100 per call; one :class:`PostedTask` per task, in order."""
        for task in tasks:
            if not 1 <= task.depth <= MAX_MAPS_DEPTH:
                raise ValueError(f"a Maps task's depth is 1..{MAX_MAPS_DEPTH}, got {task.depth}")
            if (task.location_coordinate is None) == (task.location_code is None):
                raise ValueError("a Maps task has a location_coordinate or a location_code")
        return await self._post_chunks(f"{MAPS_PATH}/task_post", [maps_body(t) for t in tasks])

    async def get_maps_task(self, task_id: str) -> MapsTaskResult:
        endpoint = f"{MAPS_PATH}/task_get/advanced/{quote(task_id, safe='')}"
        task = _single(await self._call("GET", endpoint, WireMapsResult), endpoint)
        return maps_result(task, task_id)

    async def post_local_finder_tasks(self, tasks: Sequence[MapsTask]) -> list[PostedTask]:
        """Queue Google Local Finder searches (same parameters as Maps), 100 per call."""
        for task in tasks:
            if not 1 <= task.depth <= MAX_LOCAL_FINDER_DEPTH:
                raise ValueError(
                    f"a Local Finder task's depth is 1..{MAX_LOCAL_FINDER_DEPTH}, got {task.depth}"
                )
            if (task.location_coordinate is None) == (task.location_code is None):
                raise ValueError("a Local Finder task has a location_coordinate or a location_code")
        bodies = [maps_body(t) for t in tasks]
        return await self._post_chunks(f"{LOCAL_FINDER_PATH}/task_post", bodies)

    async def get_local_finder_task(self, task_id: str) -> MapsTaskResult:
        endpoint = f"{LOCAL_FINDER_PATH}/task_get/advanced/{quote(task_id, safe='')}"
        task = _single(await self._call("GET", endpoint, WireMapsResult), endpoint)
        return local_finder_result(task, task_id)

    # -- keyword data ----------------------------------------------------------------------------

    async def post_keyword_data_tasks(self, tasks: Sequence[KeywordDataTask]) -> list[PostedTask]:
        """Queue keyword-data tasks (each at most 1,000 keywords), 100 tasks per call."""
        for task in tasks:
            if len(task.keywords) > MAX_KEYWORDS_PER_TASK:
                raise ValueError(
                    f"a keyword-data task holds at most {MAX_KEYWORDS_PER_TASK} keywords, "
                    f"task {task.tag!r} has {len(task.keywords)}"
                )
        return await self._post_chunks(
            f"{KEYWORD_DATA_PATH}/task_post", [_keyword_body(t) for t in tasks]
        )

    async def keyword_data_tasks_ready(self) -> list[ReadyTask]:
        return await self._tasks_ready(f"{KEYWORD_DATA_PATH}/tasks_ready")

    async def get_keyword_data_task(self, task_id: str) -> KeywordDataResult:
        endpoint = f"{KEYWORD_DATA_PATH}/task_get/{quote(task_id, safe='')}"
        task = _single(await self._call("GET", endpoint, WireKeyword), endpoint)
        return keyword_data_result(task, task_id)

    # -- locations -------------------------------------------------------------------------------

    async def serp_locations(
        self, country_iso: str | None = None, *, retry: bool = True
    ) -> list[LocationEntry]:
        """Every location the provider can search from, or one country's (ISO code, ``fr``).
        ``retry=False``: one attempt, for a caller that a person is waiting on."""
        endpoint = LOCATIONS_PATH
        if country_iso:
            endpoint += "/" + quote(country_iso.lower(), safe="")
        if retry:
            envelope = await self._call("GET", endpoint, LocationEntry)
        else:
            envelope = await self._once("GET", endpoint, LocationEntry, None)
        task = _single(envelope, endpoint)
        if task.status_code != codes.OK:
            raise _error_for(task.status_code, task.status_message, endpoint, None)
        return list(task.result or [])

    # -- shared ----------------------------------------------------------------------------------

    async def _post_chunks(self, endpoint: str, bodies: list[dict[str, Any]]) -> list[PostedTask]:
        posted: list[PostedTask] = []
        for start in range(0, len(bodies), MAX_TASKS_PER_POST):
            chunk = bodies[start : start + MAX_TASKS_PER_POST]
            try:
                envelope = await self._call("POST", endpoint, dict[str, Any], json=chunk)
            except ProviderError as exc:
                exc.posted = posted
                raise
            tasks = envelope.tasks or []
            for index, task in enumerate(tasks):
                tag = task.data_str("tag")
                if not tag and len(tasks) == len(chunk):
                    tag = str(chunk[index].get("tag", ""))
                posted.append(
                    PostedTask(
                        task_id=task.id if task.status_code == codes.TASK_CREATED else "",
                        tag=tag,
                        status_code=task.status_code,
                        status_message=task.status_message,
                        cost=task.cost or Decimal(0),
                    )
                )
        return posted

    async def _tasks_ready(self, endpoint: str) -> list[ReadyTask]:
        envelope = await self._call("GET", endpoint, WireReady)
        ready: list[ReadyTask] = []
        for task in envelope.tasks or []:
            if task.status_code != codes.OK:
                raise _error_for(task.status_code, task.status_message, endpoint, None)
            ready.extend(ReadyTask(task_id=r.id, tag=r.tag or "") for r in task.result or [])
        return ready

    async def _call(
        self, method: str, endpoint: str, result_type: type[R], json: Any = None
    ) -> Envelope[R]:
        """One logical call: the request, retried while it fails transiently and safely can be
        (an error with ``may_have_succeeded`` is not ``repeatable``)."""

        def logged(exc: OutboundError, retry: int, wait: float) -> None:
            log.warning(
                "serp provider: %s %s failed transiently (%s); retry %d/%d in %.1fs",
                method,
                endpoint,
                exc.message,
                retry,
                self._retries,
                wait,
            )

        policy = dataclasses.replace(self._policy, on_retry=logged)
        return await policy.run(lambda: self._once(method, endpoint, result_type, json))

    async def _once(
        self, method: str, endpoint: str, result_type: type[R], json: Any
    ) -> Envelope[R]:
        content = None if json is None else msgspec.json.encode(json)
        await self._pacer.acquire()
        try:
            response = await self._http.request(
                method,
                self._base_url + endpoint,
                content=content,
                headers={"Content-Type": "application/json"} if content is not None else None,
                auth=self._auth,
            )
        except httpx.TransportError as exc:
            failure = classify_exception(exc)
            if not failure.transient:
                raise ProviderError(f"{method} {endpoint}: {failure.reason}") from None
            if not failure.sent:
                # Failed before the request left this machine: sending it again duplicates nothing.
                raise TransientProviderError(
                    f"{method} {endpoint}: provider unreachable ({type(exc).__name__})"
                ) from None
            # The request may have reached the provider: only idempotent reads are safe to repeat.
            raise TransientProviderError(
                f"{method} {endpoint}: no answer ({type(exc).__name__})",
                may_have_succeeded=method != "GET",
            ) from None
        log.debug("serp provider: %s %s -> HTTP %d", method, endpoint, response.status_code)

        head = decode_head(response.content)
        if head is None:
            raise _http_error(response, endpoint, may_have_succeeded=method != "GET")
        if head.status_code != codes.OK:
            raise _error_for(head.status_code, head.status_message, endpoint, response)
        return decode_envelope(response.content, result_type, endpoint)


def _retry_after(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    return retry_after_seconds(response.headers, SystemClock().now())


def _error_for(
    status_code: int, message: str, endpoint: str, response: httpx.Response | None
) -> ProviderError:
    """The exception for a provider status code (in the envelope or a ``tasks_ready`` task)."""
    http_status = response.status_code if response is not None else None
    text = f"{endpoint}: {status_code} {message}".rstrip()
    if status_code == codes.RATE_LIMIT:
        return RateLimited(
            text,
            status_code=status_code,
            http_status=http_status,
            retry_after=_retry_after(response),
        )
    if codes.is_transient(status_code):
        return TransientProviderError(text, status_code=status_code, http_status=http_status)
    if status_code == codes.PAYMENT_REQUIRED:
        return PaymentRequired(text, status_code=status_code, http_status=http_status)
    if status_code == codes.AUTH_FAILED:
        return AuthenticationFailed(text, status_code=status_code, http_status=http_status)
    return InvalidRequest(text, status_code=status_code, http_status=http_status)


def _http_error(
    response: httpx.Response, endpoint: str, *, may_have_succeeded: bool
) -> ProviderError:
    """The exception for an answer that is not a provider envelope at all."""
    status = response.status_code
    text = f"{endpoint}: HTTP {status} with an unreadable body"
    if is_rate_limited(status):
        return RateLimited(text, http_status=status, retry_after=_retry_after(response))
    if is_transient_status(status):
        # A gateway that gave up waiting (502, 504) may have handed the request on before it did.
        return TransientProviderError(
            text,
            http_status=status,
            may_have_succeeded=may_have_succeeded and gateway_gave_up(status),
        )
    if status == 401:
        return AuthenticationFailed(f"{endpoint}: credentials rejected", http_status=status)
    return ProviderError(text, http_status=status)


def _single(envelope: Envelope[R], endpoint: str) -> WireTask[R]:
    if not envelope.tasks:
        raise ProviderError(f"unreadable answer from {endpoint}: no task in the envelope")
    return envelope.tasks[0]


def _serp_body(task: SerpTask) -> dict[str, Any]:
    body: dict[str, Any] = {
        "keyword": task.keyword,
        "location_code": task.location_code,
        "language_code": task.language_code,
        "device": task.device,
        "depth": task.depth,
        "priority": task.priority,
        "tag": task.tag,
    }
    if task.postback_url:
        body["postback_url"] = task.postback_url
        body["postback_data"] = "regular"
    if task.pingback_url:
        body["pingback_url"] = task.pingback_url
    return body


def _keyword_body(task: KeywordDataTask) -> dict[str, Any]:
    body: dict[str, Any] = {
        "keywords": list(task.keywords),
        "location_code": task.location_code,
        "language_code": task.language_code,
        "tag": task.tag,
    }
    if task.postback_url:
        body["postback_url"] = task.postback_url
    if task.pingback_url:
        body["pingback_url"] = task.pingback_url
    return body
