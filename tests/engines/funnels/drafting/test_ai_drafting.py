"""Drafting a funnel from a description through the AI simulator (FN-34 to FN-36): the answer
goes through the decoder, the validator and the simulator a drawn graph goes through; findings go
back to the model in the validator's words for at most the configured repair rounds; the draft
is never published; a spent quota, a provider failure or an answer that is not JSON writes
nothing."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from sqlalchemy import func, select

from app.engines.funnels.definitions.service import publish
from app.engines.funnels.drafting.errors import AiDraftFailed, AiProviderMissing, AiQuotaSpent
from app.engines.funnels.drafting.models import AiDraft
from app.engines.funnels.drafting.prompt import DraftRequest
from app.engines.funnels.drafting.schema import definition_schema
from app.engines.funnels.drafting.service import draft_funnel
from app.engines.funnels.errors import InvalidGraph
from app.engines.funnels.models import Contact, Funnel, FunnelVersion, OutboxEffect, Run
from app.engines.funnels.outside import ai_ledger
from app.engines.funnels.outside.models import AiUsage
from app.runtime import Runtime
from app.settings import load_settings
from app.settings_fields import SettingsError
from tests.engines.funnels.drafting.conftest import Drafting, drafting_deps
from tests.engines.funnels.factories import Space, setup_names


def request(description: str, **kw: Any) -> DraftRequest:
    raw: dict[str, Any] = {"description": description, "trigger": {"kind": "manual"}, **kw}
    return msgspec.convert(raw, type=DraftRequest)


async def count(runtime: Runtime, model: Any) -> int:
    async with runtime.db.read() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def nothing_written(runtime: Runtime) -> None:
    assert await count(runtime, Funnel) == 0
    assert await count(runtime, AiDraft) == 0
    assert await count(runtime, FunnelVersion) == 0


async def test_fn34_valid_answer_becomes_a_draft_never_published(drafting: Drafting) -> None:
    """FN-34/FN-35: a structured-output request under the definition's own JSON Schema; a valid
    answer is stored as a new funnel's draft with its record (prompt, model, endpoint, tokens,
    rounds) and a simulation of 20 sample contacts; no version is published and the simulation
    leaves no contact, run or outbox row behind."""
    rt, ai = drafting.runtime, drafting.ai
    row = await draft_funnel(
        drafting.deps,
        drafting.workspace_id,
        request("Begrüße neue Kontakte und schicke zwei Tage später Tipps."),
        user_id=None,
    )
    assert row.outcome == "valid"
    assert len(row.rounds) == 1
    assert row.rounds[0]["findings"] == []
    [sent] = ai.requests
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "funnel_definition"
    assert fmt["json_schema"]["schema"] == json.loads(json.dumps(definition_schema()))
    assert fmt["json_schema"]["schema"]["type"] == "object"
    assert "Begrüße neue Kontakte" in sent["messages"][1]["content"]
    # The record: what was asked, of whom, at what cost.
    assert row.description == "Begrüße neue Kontakte und schicke zwei Tage später Tipps."
    assert row.model == "gpt-4o-mini"
    assert row.endpoint == f"{ai.url}/v1/chat/completions"
    assert row.total_tokens == ai.tokens_billed == ai.completions[0]["usage"]["total_tokens"]
    assert row.prompt_tokens + row.completion_tokens == row.total_tokens
    assert row.constraints == {
        "trigger": {"kind": "manual", "filter": None},
        "audience": None,
        "channels": ["email"],
    }
    async with rt.db.read() as session:
        funnel = await session.get(Funnel, row.funnel_id)
        assert funnel is not None
        assert funnel.current_version_id is None
        assert [n["id"] for n in funnel.draft["nodes"]] == ["welcome", "pause", "tips"]
        quota = await ai_ledger.quota_of(session, drafting.organisation_id, rt.clock.now())
    assert quota.used_tokens == row.total_tokens
    assert await count(rt, FunnelVersion) == 0
    # Twenty made-up people walked the draft: two e-mails each, nothing kept.
    sim = row.simulation
    assert sim["contacts"] == 20
    assert sim["entered"] == 20
    assert sim["messages"] == 40
    assert sim["outcomes"] == {"completed": 20}
    assert list(dict.fromkeys(sim["samples"][0]["path"])) == ["welcome", "pause", "tips"]
    assert await count(rt, Contact) == 0
    assert await count(rt, Run) == 0
    assert await count(rt, OutboxEffect) == 0
    # Publishing stays a person's act, through the validator again.
    async with rt.db.write() as uow:
        version = await publish(
            uow.session, drafting.workspace_id, row.funnel_id, user_id=None, now=rt.clock.now()
        )
    assert version.number == 1


async def test_fn34_invalid_answer_is_repaired_with_the_validators_own_messages(
    drafting: Drafting,
) -> None:
    """FN-34: the first answer's findings go back to the model in the validator's words; the
    repaired answer is valid and the record keeps both rounds."""
    row = await draft_funnel(
        drafting.deps,
        drafting.workspace_id,
        request("Welcome sequence sandbox:repair"),
        user_id=None,
    )
    assert row.outcome == "repaired"
    assert [len(r["findings"]) > 0 for r in row.rounds] == [True, False]
    first = row.rounds[0]["findings"]
    assert {(f["node_id"], f["rule"]) for f in first} >= {
        ("welcome", "FN-24"),
        ("welcome", "FN-25"),
    }
    assert row.findings == []
    repair = drafting.ai.requests[1]["messages"]
    assert [m["role"] for m in repair[-2:]] == ["assistant", "user"]
    for finding in first:
        assert finding["message"] in repair[-1]["content"]
    assert row.total_tokens == drafting.ai.tokens_billed
    assert await count(drafting.runtime, FunnelVersion) == 0
    # The record keeps the whole prompt, each repair request and each answer.
    first_round, second_round = row.rounds
    assert [m["role"] for m in first_round["asked"]] == ["system", "user"]
    assert first_round["asked"][1]["content"].startswith("Welcome sequence sandbox:repair")
    assert [m["role"] for m in second_round["asked"]] == ["user"]
    assert second_round["asked"][0]["content"] == repair[-1]["content"]
    assert json.loads(second_round["answer"])["nodes"][0]["subject"] == "Welcome, {{first_name}}"


async def test_fn34_hopeless_answer_kept_as_a_draft_with_findings_pinned(
    drafting: Drafting,
) -> None:
    """FN-34/FN-35: after the configured repair rounds the draft is kept with the validator's
    remaining findings on their steps; it cannot be published."""
    rt = drafting.runtime
    row = await draft_funnel(
        drafting.deps,
        drafting.workspace_id,
        request("Welcome sequence sandbox:hopeless"),
        user_id=None,
    )
    assert row.outcome == "invalid"
    assert len(row.rounds) == 3  # the first answer and two repair rounds
    assert len(drafting.ai.requests) == 3
    assert {f["node_id"] for f in row.findings} == {"welcome"}
    assert {f["rule"] for f in row.findings} >= {"FN-24", "FN-25"}
    with pytest.raises(InvalidGraph):
        async with rt.db.write() as uow:
            await publish(
                uow.session, drafting.workspace_id, row.funnel_id, user_id=None, now=rt.clock.now()
            )
    assert await count(rt, FunnelVersion) == 0


async def test_fn34_repair_rounds_follow_the_setting(drafting: Drafting) -> None:
    """FN-34: with no repair round allowed, one answer is all there is."""
    deps = drafting_deps(drafting.runtime, ai_draft_repair_rounds=0)
    row = await draft_funnel(deps, drafting.workspace_id, request("sandbox:hopeless"), user_id=None)
    assert row.outcome == "invalid"
    assert len(row.rounds) == 1


async def test_fn34_constraints_trigger_audience_and_channels(drafting: Drafting) -> None:
    """FN-34: the chosen trigger and audience are the draft's, and messages use only the allowed
    channels."""
    rt = drafting.runtime
    await setup_names(rt, drafting.workspace_id, tags=["vip"], lists=["newsletter"])
    row = await draft_funnel(
        drafting.deps,
        drafting.workspace_id,
        request(
            "Text new VIPs",
            trigger={"kind": "tag_added", "tag": "vip"},
            audience={"kind": "in_list", "list": "newsletter"},
            channels=["sms"],
        ),
        user_id=None,
    )
    assert row.outcome == "valid"
    async with rt.db.read() as session:
        funnel = await session.get(Funnel, row.funnel_id)
    assert funnel is not None
    assert funnel.draft["triggers"] == [{"kind": "tag_added", "tag": "vip", "filter": None}]
    assert funnel.draft["entry_predicate"] == {"kind": "in_list", "list": "newsletter"}
    assert {n["kind"] for n in funnel.draft["nodes"]} == {"send_sms", "wait"}
    # The audience admits none of the made-up people: the simulation says so.
    assert row.simulation["entered"] == 0


async def test_fn36_quota_spent_is_refused_before_any_call(drafting: Drafting) -> None:
    """FN-36: a spent quota refuses the draft with a clear message; the provider is not called
    and nothing is written."""
    rt = drafting.runtime
    async with rt.db.write() as uow:
        await ai_ledger.set_quota(uow.session, drafting.organisation_id, 100, rt.clock.now())
    with pytest.raises(AiQuotaSpent) as refused:
        await draft_funnel(drafting.deps, drafting.workspace_id, request("Hi"), user_id=None)
    assert refused.value.status == 429
    assert "AI quota is spent" in refused.value.message
    assert "Nothing was drafted" in refused.value.message
    assert drafting.ai.requests == []
    await nothing_written(rt)


async def test_fn36_garbage_answer_writes_nothing(drafting: Drafting) -> None:
    """FN-36: an answer that is not JSON ends the attempt with a clear error; the call is still
    counted against the quota (the provider billed it)."""
    rt = drafting.runtime
    with pytest.raises(AiDraftFailed) as failed:
        await draft_funnel(
            drafting.deps, drafting.workspace_id, request("sandbox:garbage"), user_id=None
        )
    assert failed.value.status == 502
    assert "not JSON" in failed.value.message
    assert "Nothing was saved" in failed.value.message
    await nothing_written(rt)
    async with rt.db.read() as session:
        quota = await ai_ledger.quota_of(session, drafting.organisation_id, rt.clock.now())
    assert quota.used_tokens == drafting.ai.tokens_billed > 0


async def test_fn36_refusal_writes_nothing(drafting: Drafting) -> None:
    """FN-36: a model that declines (structured output's ``refusal``) is a clear error."""
    with pytest.raises(AiDraftFailed) as failed:
        await draft_funnel(
            drafting.deps, drafting.workspace_id, request("sandbox:refuse"), user_id=None
        )
    assert "declined" in failed.value.message
    await nothing_written(drafting.runtime)


@pytest.mark.parametrize("fault", [{"status": 500}, {"status": 200, "raw": b"<html>oops"}])
async def test_fn36_provider_error_writes_nothing(
    drafting: Drafting, fault: dict[str, Any]
) -> None:
    """FN-36: a provider error or a body that is not a completion is a clear error; nothing is
    written and the reservation is counted (a 5xx may have been billed), never more."""
    rt = drafting.runtime
    drafting.ai.inject("chat.completions", **fault)
    with pytest.raises(AiDraftFailed) as failed:
        await draft_funnel(drafting.deps, drafting.workspace_id, request("Hi"), user_id=None)
    assert "did not answer usably" in failed.value.message
    await nothing_written(rt)
    async with rt.db.read() as session:
        lines = list(await session.scalars(select(AiUsage.outcome)))
    assert lines == ["lost"]


async def test_fn36_timeout_writes_nothing(drafting: Drafting) -> None:
    """FN-36: a provider slower than the drafting timeout is a clear error, nothing written."""
    deps = drafting_deps(drafting.runtime, ai_draft_timeout_seconds=0.2)
    drafting.ai.inject("chat.completions", delay_seconds=1.0, status=200, body={})
    with pytest.raises(AiDraftFailed):
        await draft_funnel(deps, drafting.workspace_id, request("Hi"), user_id=None)
    await nothing_written(drafting.runtime)


async def test_fn36_no_provider_is_refused(runtime: Runtime, space: Space) -> None:
    """FN-36: without an AI provider there is nothing to ask: 409, nothing written."""
    with pytest.raises(AiProviderMissing):
        await draft_funnel(drafting_deps(runtime), space.workspace_id, request("Hi"), user_id=None)
    await nothing_written(runtime)


async def test_fn36_quota_for_one_round_only_keeps_the_first_answer(drafting: Drafting) -> None:
    """FN-36: a repair round the quota cannot cover ends the rounds; the first answer is kept
    as the draft with its findings, and the quota is never exceeded."""
    rt = drafting.runtime
    async with rt.db.write() as uow:
        # Enough for one round's reservation (its prompt and the 4,000-token allowance), not
        # for a second one on top of what the first cost.
        await ai_ledger.set_quota(uow.session, drafting.organisation_id, 4500, rt.clock.now())
    row = await draft_funnel(
        drafting.deps, drafting.workspace_id, request("sandbox:hopeless"), user_id=None
    )
    assert row.outcome == "invalid"
    assert len(row.rounds) == 1
    assert len(drafting.ai.requests) == 1
    async with rt.db.read() as session:
        quota = await ai_ledger.quota_of(session, drafting.organisation_id, rt.clock.now())
    assert quota.used_tokens == row.total_tokens <= 4500


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FUNNEL_AI_DRAFT_REPAIR_ROUNDS", "11"),
        ("FUNNEL_AI_DRAFT_REPAIR_ROUNDS", "-1"),
        ("FUNNEL_AI_DRAFT_MAX_TOKENS", "0"),
        ("FUNNEL_AI_DRAFT_TIMEOUT_SECONDS", "0"),
    ],
)
def test_fn34_drafting_settings_are_bounded(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({name: value})


async def test_fn36_no_answer_that_decodes_writes_nothing(drafting: Drafting) -> None:
    """FN-34/FN-36: JSON that is not a definition is a finding sent back with the decoder's own
    message; when no round decodes, the attempt fails and nothing is written."""
    with pytest.raises(AiDraftFailed) as failed:
        await draft_funnel(
            drafting.deps, drafting.workspace_id, request("sandbox:shapeless"), user_id=None
        )
    assert "in 3 round(s)" in failed.value.message
    assert "unknown field `steps`" in failed.value.message
    repair = drafting.ai.requests[1]["messages"][-1]["content"]
    assert "[FN-26 schema] the graph: Object contains unknown field `steps`" in repair
    await nothing_written(drafting.runtime)
