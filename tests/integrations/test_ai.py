"""The OpenAI-compatible client against its simulator, the cache key and the quota decision
(``ai_generate``: metered against the quota, cached by hash of creative and attributes used)."""

from __future__ import annotations

import json

import pytest

from app.integrations.ai import (
    ChatClient,
    ChatMessage,
    Creative,
    build_messages,
    cache_key,
    decide_quota,
    estimate_tokens,
)
from app.integrations.http_guard import InvalidResponse, PermanentError, RetryPolicy, TransientError
from app.sandbox.ai import AiSandbox
from tests.harness.provider_client import (
    ANSWER_TIMEOUT,
    SILENCE_TIMEOUT,
    ProviderSetup,
    provider_fixtures,
    quick_retries,
)
from tests.harness.sleep import RecordingSleep

API_KEY = "sk-workspace-11-0123456789abcdef"
CREATIVE = Creative(
    model="gpt-4o-mini",
    system="You write one friendly sentence for a newsletter.",
    prompt="Invite {{first_name}} from {{city}} to the spring sale.",
    max_tokens=60,
)


Setup = ProviderSetup[AiSandbox, ChatClient]


def fresh_sandbox() -> AiSandbox:
    return AiSandbox(api_keys={API_KEY})


def new_client(url: str, sleeps: RecordingSleep, timeout: float = ANSWER_TIMEOUT) -> ChatClient:
    return ChatClient(
        api_key=API_KEY,
        base_url=url,
        timeout=timeout,
        policy=quick_retries(sleeps),
    )


served, ai = provider_fixtures(fresh_sandbox, new_client)


MESSAGES = build_messages(CREATIVE, "Invite Ada from London to the spring sale.")


async def test_generates_and_reports_token_usage(ai: Setup) -> None:
    completion = await ai.client.complete(MESSAGES, model="gpt-4o-mini", max_tokens=60)
    assert "Invite Ada from London" in completion.text
    assert completion.finish_reason == "stop"
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert ai.sandbox.tokens_billed == completion.usage.total_tokens
    again = await ai.client.complete(MESSAGES, model="gpt-4o-mini", max_tokens=60)
    assert again.text == completion.text


async def test_the_estimate_bounds_the_real_cost(ai: Setup) -> None:
    """The quota decision is taken on the estimate; the call must never cost more."""
    completion = await ai.client.complete(MESSAGES, model="gpt-4o-mini", max_tokens=60)
    assert completion.usage.total_tokens <= estimate_tokens(MESSAGES, 60)


async def test_max_tokens_cuts_the_text(ai: Setup) -> None:
    completion = await ai.client.complete(MESSAGES, model="gpt-4o-mini", max_tokens=3)
    assert completion.finish_reason == "length"
    assert completion.usage.completion_tokens == 3


async def test_a_cache_hit_does_not_pay_again(ai: Setup) -> None:
    """Two contacts whose used attributes are equal share one generation: one provider call."""
    cache: dict[str, str] = {}
    contacts = [
        {"first_name": "Ada", "city": "London", "email": "ada@example.com"},
        {"first_name": "Ada", "city": "London", "email": "ada.l@example.org"},
        {"first_name": "Grace", "city": "New York", "email": "grace@example.com"},
    ]
    texts = []
    for contact in contacts:
        used = {name: contact[name] for name in ("first_name", "city")}
        key = cache_key(CREATIVE, used)
        if key not in cache:
            prompt = f"Invite {used['first_name']} from {used['city']} to the spring sale."
            completion = await ai.client.complete(
                build_messages(CREATIVE, prompt), model=CREATIVE.model
            )
            cache[key] = completion.text
        texts.append(cache[key])
    assert ai.sandbox.state.count("chat.completions") == 2
    assert texts[0] == texts[1] != texts[2]


async def test_rate_limits_and_server_errors_are_retried(ai: Setup) -> None:
    ai.sandbox.state.inject(
        "chat.completions",
        status=429,
        headers={"Retry-After": "2"},
        body={
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
    )
    ai.sandbox.state.inject("chat.completions", status=500)
    await ai.client.complete(MESSAGES, model="gpt-4o-mini")
    assert ai.sandbox.state.count("chat.completions") == 3
    assert ai.sleeps.waits[0] == 2.0
    assert len(ai.sandbox.completions) == 1


async def test_an_exhausted_provider_account_is_permanent(ai: Setup) -> None:
    ai.sandbox.quota_tokens = 10
    with pytest.raises(PermanentError) as info:
        await ai.client.complete(MESSAGES, model="gpt-4o-mini")
    assert (info.value.status, info.value.code) == (429, "insufficient_quota")
    assert ai.sandbox.state.count("chat.completions") == 1
    assert ai.sleeps.waits == []


@pytest.mark.parametrize(
    ("key", "model", "status", "code"),
    [
        ("sk-wrong-0123456789abcdef", "gpt-4o-mini", 401, "invalid_api_key"),
        (API_KEY, "gpt-9-imaginary", 404, "model_not_found"),
    ],
)
async def test_bad_credentials_and_models_are_permanent(
    ai: Setup, key: str, model: str, status: int, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    client = ChatClient(api_key=key, base_url=ai.url, policy=RetryPolicy(sleep=ai.sleeps))
    try:
        with pytest.raises(PermanentError) as info:
            await client.complete(MESSAGES, model=model)
    finally:
        await client.aclose()
    assert (info.value.status, info.value.code) == (status, code)
    assert ai.sandbox.state.count("chat.completions") == 1
    assert key not in caplog.text + str(info.value)


async def test_a_context_too_long_is_permanent(ai: Setup) -> None:
    with pytest.raises(PermanentError) as info:
        await ai.client.complete([ChatMessage("user", "x" * 40_000)], model="gpt-4o-mini")
    assert info.value.code == "context_length_exceeded"


async def test_garbage_and_silence_are_clear_errors(ai: Setup) -> None:
    ai.sandbox.state.inject("chat.completions", status=200, raw=b"data: [DONE]")
    with pytest.raises(InvalidResponse):
        await ai.client.complete(MESSAGES, model="gpt-4o-mini")
    # A completion without usage cannot be metered: refused, not guessed.
    ai.sandbox.state.inject(
        "chat.completions",
        status=200,
        body={"id": "x", "model": "m", "choices": [{"message": {"content": "hi"}}]},
    )
    with pytest.raises(InvalidResponse):
        await ai.client.complete(MESSAGES, model="gpt-4o-mini")
    ai.sandbox.state.inject("chat.completions", status=200, delay_seconds=3.0, times=-1)
    silent = new_client(ai.url, ai.sleeps, timeout=SILENCE_TIMEOUT)
    try:
        with pytest.raises(TransientError) as info:
            await silent.complete(MESSAGES, model="gpt-4o-mini")
    finally:
        await silent.aclose()
    assert info.value.code == "timeout"


PINNED_DIGEST = "9cc15bded190e94226569979eec720cae2c40c769de657161ac3240c24254458"


def test_the_cache_key_is_stable() -> None:
    """The key depends on content, not on the order attributes were collected in — and it does
    not drift between releases (a drift would silently re-bill every cached generation)."""
    one = cache_key(CREATIVE, {"first_name": "Ada", "city": "London"})
    two = cache_key(CREATIVE, {"city": "London", "first_name": "Ada"})
    assert one == two
    assert one == "ai1:" + PINNED_DIGEST
    assert len(one) == len("ai1:") + 64


@pytest.mark.parametrize(
    "change",
    [
        {"attributes": {"first_name": "Grace", "city": "London"}},
        {"attributes": {"first_name": "Ada", "city": "London", "plan": "pro"}},
        {"attributes": {"first_name": "Ada", "city": None}},
        {
            "creative": Creative(
                model="gpt-4o", prompt=CREATIVE.prompt, system=CREATIVE.system, max_tokens=60
            )
        },
        {
            "creative": Creative(
                model=CREATIVE.model,
                prompt=CREATIVE.prompt + "!",
                system=CREATIVE.system,
                max_tokens=60,
            )
        },
        {
            "creative": Creative(
                model=CREATIVE.model, prompt=CREATIVE.prompt, system=None, max_tokens=60
            )
        },
        {
            "creative": Creative(
                model=CREATIVE.model, prompt=CREATIVE.prompt, system=CREATIVE.system, max_tokens=61
            )
        },
    ],
)
def test_the_cache_key_changes_with_what_the_result_depends_on(change: dict[str, object]) -> None:
    base = cache_key(CREATIVE, {"first_name": "Ada", "city": "London"})
    creative = change.get("creative", CREATIVE)
    attributes = change.get("attributes", {"first_name": "Ada", "city": "London"})
    assert cache_key(creative, attributes) != base  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("used", "quota", "estimate", "allowed", "reason", "remaining"),
    [
        (0, None, 10_000, True, None, None),
        (0, 1000, 400, True, None, 1000),
        (600, 1000, 400, True, None, 400),
        (601, 1000, 400, False, "would_exceed", 399),
        (1000, 1000, 1, False, "exhausted", 0),
        (1500, 1000, 1, False, "exhausted", 0),
        (0, 0, 1, False, "no_quota", 0),
    ],
)
def test_quota_decision(
    used: int,
    quota: int | None,
    estimate: int,
    allowed: bool,
    reason: str | None,
    remaining: int | None,
) -> None:
    decision = decide_quota(used_tokens=used, quota_tokens=quota, estimated_tokens=estimate)
    assert (decision.allowed, decision.reason, decision.remaining_tokens) == (
        allowed,
        reason,
        remaining,
    )


# -- structured output (funnel drafting, FN-34) -------------------------------------------------

GRAPH_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "funnel_definition", "schema": {"type": "object"}, "strict": False},
}


async def test_structured_output_answers_a_json_document(ai: Setup) -> None:
    """FN-34: with ``response_format`` the request carries it and the content is the document."""
    asked = [ChatMessage("user", "Welcome new people")]
    completion = await ai.client.complete(
        asked, model="gpt-4o-mini", max_tokens=2000, response_format=GRAPH_FORMAT
    )
    assert ai.sandbox.requests[-1]["response_format"] == GRAPH_FORMAT
    document = json.loads(completion.text)
    assert [n["id"] for n in document["nodes"]] == ["welcome", "pause", "tips"]
    assert completion.usage.total_tokens == ai.sandbox.tokens_billed


async def test_structured_output_refusal_is_an_invalid_response(ai: Setup) -> None:
    """FN-36: a model that declines answers ``refusal`` instead of content."""
    with pytest.raises(InvalidResponse, match="declined"):
        await ai.client.complete(
            [ChatMessage("user", "sandbox:refuse")],
            model="gpt-4o-mini",
            response_format=GRAPH_FORMAT,
        )


async def test_a_malformed_response_format_is_refused_naming_it(ai: Setup) -> None:
    bad = {"type": "json_schema", "json_schema": {"name": "has spaces", "schema": {}}}
    with pytest.raises(PermanentError) as refused:
        await ai.client.complete(
            [ChatMessage("user", "Hi")], model="gpt-4o-mini", response_format=bad
        )
    assert refused.value.status == 400
    assert ai.sandbox.tokens_billed == 0
