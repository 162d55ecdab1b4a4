"""Client of the Twilio Messages API (and providers that copy its shape).

``POST /2010-04-01/Accounts/{AccountSid}/Messages.json``, form-encoded, HTTP basic auth with the
account SID and auth token.

Twilio has no idempotency key for sending: a repeated POST is a second text message. So this client
never blindly repeats a POST whose fate is unknown. Failures that prove the message was not taken
(the connection could not be opened, a 429) are retried at once; after one that leaves it unknown
(a timeout or a 5xx after the request went out) — or when the caller says an earlier delivery of
the effect may have gone out — it first lists the recent messages to the same number and treats one
with the same sender and text, created within the look-back window, as the message already sent.
The cost of that rule: two *different* effects with identical text to the same number inside the
window, the second of which follows an unknown failure, send once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode

import httpx
import msgspec

from app.clock import Clock, SystemClock
from app.integrations.http_guard import (
    NO_RETRY,
    NOT_SENT,
    AddressGuard,
    ProviderHttp,
    RetryPolicy,
    TransientError,
    decode,
    is_rate_limited,
)
from app.integrations.http_guard.retry import backoff_delay
from app.integrations.http_guard.user_agent import USER_AGENT
from app.integrations.sms.message import SmsMessage, SmsReceipt

PROVIDER = "twilio"
DEFAULT_BASE_URL = "https://api.twilio.com"
# Twilio's clock and ours may differ; a message is "ours" if created this long before our attempt.
_SKEW = timedelta(minutes=5)


class TwilioMessage(msgspec.Struct, frozen=True):
    sid: str
    status: str
    to: str
    body: str | None = None
    date_created: str | None = None
    from_: str | None = msgspec.field(default=None, name="from")
    messaging_service_sid: str | None = None


class _Page(msgspec.Struct, frozen=True):
    messages: list[TwilioMessage]


class TwilioSmsClient:
    """One Twilio account (or subaccount).

    Args:
        from_number: Default sender; or ``messaging_service_sid`` to let Twilio pick one.
        status_callback: URL Twilio posts delivery status changes to.
        lookback: How far back a message counts as an earlier delivery of the same effect when
            the caller says one may have gone out.
    """

    def __init__(
        self,
        *,
        account_sid: str,
        auth_token: str,
        from_number: str | None = None,
        messaging_service_sid: str | None = None,
        status_callback: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        policy: RetryPolicy | None = None,
        lookback: timedelta = timedelta(hours=24),
        clock: Clock | None = None,
        guard: AddressGuard | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not from_number and not messaging_service_sid:
            raise ValueError("a Twilio sender needs from_number or messaging_service_sid")
        self._account = account_sid
        self._from = from_number
        self._service = messaging_service_sid
        self._callback = status_callback
        self._lookback = lookback
        self._clock: Clock = clock or SystemClock()
        self._http = ProviderHttp(
            provider=PROVIDER,
            base_url=base_url,
            auth=(account_sid, auth_token),
            timeout=timeout,
            user_agent=user_agent,
            policy=policy,
            clock=self._clock,
            guard=guard,
            transport=transport,
        )
        self._path = f"/2010-04-01/Accounts/{account_sid}/Messages.json"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(
        self, message: SmsMessage, *, idempotency_key: str, previously_attempted: bool = False
    ) -> SmsReceipt:
        """Send unless this effect was already sent (see the module docstring).

        Twilio has no idempotency header; ``idempotency_key`` rides on the ``StatusCallback`` URL
        (as ``effect=…``) so delivery reports name the effect they belong to.
        """
        policy = self._http.policy
        started = self._clock.now()
        unknown_since = started - self._lookback if previously_attempted else None
        failures = 0
        while True:
            if unknown_since is not None:
                earlier = await self._find_sent(message, since=unknown_since - _SKEW)
                if earlier is not None:
                    return earlier
            try:
                return await self._post(message, idempotency_key)
            except TransientError as exc:
                failures += 1
                if (
                    exc.code != NOT_SENT
                    and not is_rate_limited(exc.status)
                    and unknown_since is None
                ):
                    unknown_since = started
                if failures >= policy.attempts or (
                    exc.retry_after is not None and exc.retry_after > policy.max_wait_seconds
                ):
                    raise
                await policy.sleep(backoff_delay(policy, failures, exc.retry_after))

    async def _post(self, message: SmsMessage, idempotency_key: str) -> SmsReceipt:
        form = {"To": message.to, "Body": message.body}
        sender = message.sender or self._from
        if sender:
            form["From"] = sender
        else:
            form["MessagingServiceSid"] = self._service or ""
        if self._callback:
            joiner = "&" if "?" in self._callback else "?"
            form["StatusCallback"] = (
                f"{self._callback}{joiner}{urlencode({'effect': idempotency_key})}"
            )
        response = await self._http.send_once("POST", self._path, form=form)
        return self._receipt(decode(response, TwilioMessage, provider=PROVIDER))

    async def _find_sent(self, message: SmsMessage, *, since: datetime) -> SmsReceipt | None:
        sender = message.sender or self._from
        params = {"To": message.to, "PageSize": "50"}
        if sender:
            params["From"] = sender
        response = await self._http.send("GET", self._path, params=params, policy=NO_RETRY)
        for candidate in decode(response, _Page, provider=PROVIDER).messages:
            if candidate.body != message.body:
                continue
            if not sender and candidate.messaging_service_sid != self._service:
                continue
            created = _parse_date(candidate.date_created)
            if created is not None and created >= since:
                return self._receipt(candidate)
        return None

    @staticmethod
    def _receipt(message: TwilioMessage) -> SmsReceipt:
        return SmsReceipt(provider=PROVIDER, message_id=message.sid, status=message.status)


def _parse_date(raw: str | None) -> datetime | None:
    if not raw:
        return None
    try:
        return parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
