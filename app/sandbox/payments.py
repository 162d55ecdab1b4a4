"""A loopback simulator of the Stripe API subset the ``create_payment`` action uses, and the
idempotency ledger every provider simulator here shares.

Stripe shape: form-encoded ``POST /v1/payment_intents`` and ``POST /v1/checkout/sessions`` (nested
parameters in bracket notation: ``metadata[order]=7``, ``line_items[0][price_data][currency]=eur``),
``GET`` of each by id, the account's secret key as a bearer token, errors as
``{"error": {"type", "code", "message", "param"}}``.

Idempotency follows Stripe's documented rules, which the other simulators reuse through
:class:`IdempotencyLedger`: the first result of a request that started executing is saved under its
``Idempotency-Key`` (scoped to the account) and replayed for every retry with the header
``Idempotent-Replayed: true``; the same key with different parameters or on another endpoint is an
error; requests rejected before executing (authentication, validation, injected faults) save
nothing, so a retry after them executes.

Faults: before the effect through :class:`~app.sandbox.base.SandboxState` (kinds
``payment_intents.create``, ``checkout_sessions.create``, ``payment_intents.get``,
``checkout_sessions.get``), and *after* it through :class:`LostResponses` — the payment exists but
the reply is a 5xx or arrives too late, the case idempotency keys exist for.

Webhooks: :meth:`PaymentsSandbox.pay` settles a PaymentIntent and gives the event Stripe sends,
:meth:`PaymentsSandbox.complete_checkout` completes a Checkout Session (``checkout.session.completed``);
:attr:`PaymentsSandbox.webhooks` signs and delivers it exactly as Stripe does
(:mod:`app.sandbox.stripe_webhooks`).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.params import FromPath

from app.clock import Clock, SystemClock
from app.sandbox.base import (
    HttpSimulator,
    SandboxState,
    ThreadedServer,
    fault_response,
    restore_defaults,
    simulator_app,
    start_simulator,
)
from app.sandbox.stripe_webhooks import StripeEndpoint


class KeyReused(Exception):
    """An idempotency key came back with different parameters or on another endpoint."""


def fingerprint(method: str, path: str, params: Any) -> str:
    """What makes two requests "the same request" for idempotency: endpoint and parameters."""
    canonical = json.dumps([method, path, params], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class IdempotencyLedger:
    """Saved results by (scope, key). ``scope`` is the account or API key the key belongs to."""

    _saved: dict[tuple[str, str], tuple[str, int, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def replay(self, scope: str, key: str | None, fp: str) -> tuple[int, Any] | None:
        """The saved (status, body) for this key, ``None`` if new; :class:`KeyReused` if it was
        first used for a different request."""
        if not key:
            return None
        with self._lock:
            saved = self._saved.get((scope, key))
        if saved is None:
            return None
        if saved[0] != fp:
            raise KeyReused(key)
        return saved[1], saved[2]

    def save(self, scope: str, key: str | None, fp: str, status: int, body: Any) -> None:
        if key:
            with self._lock:
                self._saved.setdefault((scope, key), (fp, status, body))

    def __len__(self) -> int:
        return len(self._saved)


@dataclass
class LostResponses:
    """Replies lost after the effect happened: the next ``remaining`` successful requests are
    carried out, then answered with ``status`` (after ``delay_seconds``, which, longer than the
    client's timeout, means the client never hears back)."""

    remaining: int = 0
    status: int = 502
    delay_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, times: int = 1, *, status: int = 502, delay_seconds: float = 0.0) -> None:
        with self._lock:
            self.remaining, self.status, self.delay_seconds = times, status, delay_seconds

    async def take(self) -> Response[Any] | None:
        """The reply that replaces a success, if one is armed."""
        with self._lock:
            if self.remaining <= 0:
                return None
            self.remaining -= 1
            status, delay = self.status, self.delay_seconds
        if delay:
            await asyncio.sleep(delay)
        return Response(
            {"error": {"type": "api_error", "message": "upstream connection reset"}},
            status_code=status,
            media_type=MediaType.JSON,
        )


_BRACKETS = re.compile(r"\[([^\]]*)\]")


def parse_bracket_form(items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's form encoding to nested data: ``a[b][0][c]=1`` → ``{"a": {"b": [{"c": "1"}]}}``."""
    root: dict[str, Any] = {}
    for raw_key, value in items:
        head, _, rest = raw_key.partition("[")
        parts = [head, *_BRACKETS.findall("[" + rest)] if rest else [head]
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        # ``tags[]=a&tags[]=b`` appends.
        node[parts[-1] or str(len(node))] = value
    nested: dict[str, Any] = _lists(root)
    return nested


def _lists(node: Any) -> Any:
    """Dicts whose keys are all indexes become lists (``line_items[0]`` …)."""
    if isinstance(node, dict):
        converted = {k: _lists(v) for k, v in node.items()}
        if converted and all(k.isdigit() for k in converted):
            return [converted[k] for k in sorted(converted, key=int)]
        return converted
    return node


def stripe_error(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> Response[Any]:
    error: dict[str, Any] = {"type": type_, "message": message}
    if code:
        error["code"] = code
    if param:
        error["param"] = param
    return Response({"error": error}, status_code=status, media_type=MediaType.JSON)


@dataclass
class PaymentsSandbox(HttpSimulator):
    """Accounts by secret key, the objects created in each and the webhook endpoint;
    :meth:`reset` keeps the keys and the clock."""

    state: SandboxState = field(default_factory=SandboxState)
    secret_keys: dict[str, str] = field(default_factory=lambda: {"sk_test_sandbox": "acct_sandbox"})
    """Secret key → account id."""
    clock: Clock = field(default_factory=SystemClock)
    payment_intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    checkout_sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    ledger: IdempotencyLedger = field(default_factory=IdempotencyLedger)
    lost: LostResponses = field(default_factory=LostResponses)
    webhooks: StripeEndpoint = field(default_factory=StripeEndpoint)
    """The account's webhook endpoint: events signed as Stripe signs them."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):024d}"

    def pay(self, intent_id: str) -> dict[str, Any]:
        """The customer pays a PaymentIntent: it succeeds, and the ``payment_intent.succeeded``
        event Stripe would send to the webhook endpoint is returned (deliver it with
        :meth:`StripeEndpoint.deliver` or sign it with :meth:`StripeEndpoint.signed`)."""
        intent = self.payment_intents[intent_id]
        intent.update(status="succeeded", amount_received=intent["amount"])
        return self.webhooks.event("payment_intent.succeeded", dict(intent))

    def complete_checkout(
        self, session_id: str, *, email: str, name: str = "Jenny Rosen"
    ) -> dict[str, Any]:
        """The customer pays on the hosted Checkout page, typing ``email``: the session completes
        and the ``checkout.session.completed`` event Stripe would send is returned. As Stripe
        documents it, the address the customer typed is in ``customer_details.email`` (while
        ``customer_email`` stays what the session was created with, often ``null``), the amount
        in ``amount_total``, and the payment is a new PaymentIntent."""
        session = self.checkout_sessions[session_id]
        intent = self.new_id("pi")
        session.update(
            status="complete",
            payment_status="paid",
            payment_intent=intent,
            amount_subtotal=session["amount_total"],
            customer=None,
            customer_creation="if_required",
            customer_details={
                "address": {
                    "city": None,
                    "country": "US",
                    "line1": None,
                    "line2": None,
                    "postal_code": "94103",
                    "state": None,
                },
                "email": email,
                "name": name,
                "phone": None,
                "tax_exempt": "none",
                "tax_ids": [],
            },
        )
        return self.webhooks.event("checkout.session.completed", dict(session))

    def reset_data(self) -> None:
        restore_defaults(self, "payment_intents", "checkout_sessions", "ledger", "lost", "_ids")
        # A new endpoint on the same clock: no URL, one fresh signing secret.
        self.webhooks = StripeEndpoint(clock=self.webhooks.clock)

    def create_app(self) -> Litestar:
        return create_payments_app(self)


def _account(sandbox: PaymentsSandbox, request: Request[Any, Any, Any]) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, key = auth.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return sandbox.secret_keys.get(key.strip())


def _masked(request: Request[Any, Any, Any]) -> str:
    key = request.headers.get("authorization", "").partition(" ")[2]
    return f"{key[:8]}{'*' * 4}{key[-4:]}" if len(key) > 12 else "****"


def _positive_int(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return None


def _currency(value: Any) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"[A-Za-z]{3}", value):
        return value.lower()
    return None


def _metadata(params: dict[str, Any]) -> dict[str, str] | Response[Any]:
    metadata = params.get("metadata", {})
    if not isinstance(metadata, dict) or any(not isinstance(v, str) for v in metadata.values()):
        return stripe_error(400, "Invalid metadata: must be a hash of strings", param="metadata")
    return metadata


def _build_intent(
    sandbox: PaymentsSandbox, account: str, params: dict[str, Any]
) -> dict[str, Any] | Response[Any]:
    amount = _positive_int(params.get("amount"))
    if amount is None:
        return stripe_error(
            400, "Missing required param: amount.", code="parameter_missing", param="amount"
        )
    currency = _currency(params.get("currency"))
    if currency is None:
        return stripe_error(
            400, "Missing required param: currency.", code="parameter_missing", param="currency"
        )
    metadata = _metadata(params)
    if isinstance(metadata, Response):
        return metadata
    pid = sandbox.new_id("pi")
    return {
        "id": pid,
        "object": "payment_intent",
        "amount": amount,
        "currency": currency,
        "status": "requires_payment_method",
        "client_secret": f"{pid}_secret_{hashlib.sha256(pid.encode()).hexdigest()[:24]}",
        "description": params.get("description"),
        "receipt_email": params.get("receipt_email"),
        "customer": params.get("customer"),
        "metadata": metadata,
        "created": int(sandbox.clock.now().timestamp()),
        "livemode": False,
        "account": account,
    }


def _build_session(
    sandbox: PaymentsSandbox, account: str, params: dict[str, Any], base_url: str
) -> dict[str, Any] | Response[Any]:
    if params.get("mode") not in ("payment",):
        return stripe_error(400, "Invalid mode: must be payment", param="mode")
    if not isinstance(params.get("success_url"), str):
        return stripe_error(
            400,
            "Missing required param: success_url.",
            code="parameter_missing",
            param="success_url",
        )
    items = params.get("line_items")
    if not isinstance(items, list) or not items:
        return stripe_error(
            400,
            "Missing required param: line_items.",
            code="parameter_missing",
            param="line_items",
        )
    total, currencies = 0, set()
    for index, item in enumerate(items):
        price = item.get("price_data", {}) if isinstance(item, dict) else {}
        unit = _positive_int(price.get("unit_amount"))
        currency = _currency(price.get("currency"))
        quantity = _positive_int(item.get("quantity", "1")) if isinstance(item, dict) else None
        name = price.get("product_data", {}).get("name") if isinstance(price, dict) else None
        if unit is None or currency is None or quantity is None or not name:
            return stripe_error(400, "Invalid line item", param=f"line_items[{index}][price_data]")
        total += unit * quantity
        currencies.add(currency)
    if len(currencies) != 1:
        return stripe_error(400, "All line items must share one currency", param="line_items")
    metadata = _metadata(params)
    if isinstance(metadata, Response):
        return metadata
    sid = sandbox.new_id("cs_test")
    return {
        "id": sid,
        "object": "checkout.session",
        "mode": "payment",
        "url": f"{base_url}/c/pay/{sid}",
        "amount_total": total,
        "currency": currencies.pop(),
        "payment_status": "unpaid",
        "status": "open",
        "customer_email": params.get("customer_email"),
        "client_reference_id": params.get("client_reference_id"),
        "success_url": params["success_url"],
        "cancel_url": params.get("cancel_url"),
        "metadata": metadata,
        "created": int(sandbox.clock.now().timestamp()),
        "livemode": False,
    }


async def _create(
    sandbox: PaymentsSandbox,
    request: Request[Any, Any, Any],
    kind: str,
    store: dict[str, dict[str, Any]],
) -> Response[Any]:
    if (fault := sandbox.state.hit(kind)) is not None:
        return await fault_response(fault)
    account = _account(sandbox, request)
    if account is None:
        return stripe_error(401, f"Invalid API Key provided: {_masked(request)}")
    form = await request.form()
    params = parse_bracket_form(form.multi_items())
    key = request.headers.get("idempotency-key")
    fp = fingerprint("POST", request.url.path, params)
    try:
        saved = sandbox.ledger.replay(account, key, fp)
    except KeyReused:
        return stripe_error(
            400,
            "Keys for idempotent requests can only be used with the same parameters they "
            f"were first used with. Try using a key other than '{key}' if you meant to "
            "execute a different request.",
            type_="idempotency_error",
        )
    if saved is not None:
        return Response(
            saved[1],
            status_code=saved[0],
            media_type=MediaType.JSON,
            headers={"Idempotent-Replayed": "true"},
        )
    if kind == "payment_intents.create":
        built = _build_intent(sandbox, account, params)
    else:
        built = _build_session(sandbox, account, params, str(request.base_url).rstrip("/"))
    if isinstance(built, Response):
        return built
    store[built["id"]] = built
    sandbox.ledger.save(account, key, fp, 200, built)
    if (lost := await sandbox.lost.take()) is not None:
        return lost
    return Response(built, status_code=200, media_type=MediaType.JSON)


async def _fetch(
    sandbox: PaymentsSandbox,
    request: Request[Any, Any, Any],
    kind: str,
    store: dict[str, dict[str, Any]],
    oid: str,
) -> Response[Any]:
    if (fault := sandbox.state.hit(kind)) is not None:
        return await fault_response(fault)
    account = _account(sandbox, request)
    if account is None:
        return stripe_error(401, f"Invalid API Key provided: {_masked(request)}")
    found = store.get(oid)
    if found is None or found.get("account", account) != account:
        return stripe_error(404, f"No such object: '{oid}'", code="resource_missing", param="id")
    return Response(found, media_type=MediaType.JSON)


def create_payments_app(sandbox: PaymentsSandbox) -> Litestar:
    """The routes: a create and a fetch for each kind of object."""

    @post("/v1/payment_intents")
    async def create_intent(request: Request[Any, Any, Any]) -> Response[Any]:
        return await _create(sandbox, request, "payment_intents.create", sandbox.payment_intents)

    @post("/v1/checkout/sessions")
    async def create_session(request: Request[Any, Any, Any]) -> Response[Any]:
        return await _create(
            sandbox, request, "checkout_sessions.create", sandbox.checkout_sessions
        )

    @get("/v1/payment_intents/{oid:str}")
    async def get_intent(request: Request[Any, Any, Any], oid: FromPath[str]) -> Response[Any]:
        return await _fetch(sandbox, request, "payment_intents.get", sandbox.payment_intents, oid)

    @get("/v1/checkout/sessions/{oid:str}")
    async def get_session(request: Request[Any, Any, Any], oid: FromPath[str]) -> Response[Any]:
        return await _fetch(
            sandbox, request, "checkout_sessions.get", sandbox.checkout_sessions, oid
        )

    return simulator_app([create_intent, create_session, get_intent, get_session])


def start_payments_sandbox(sandbox: PaymentsSandbox | None = None) -> ThreadedServer:
    """Serve a payments simulator from its own thread (demo, benchmarks)."""
    return start_simulator(sandbox or PaymentsSandbox())
