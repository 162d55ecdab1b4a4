"""The demo's ad rules: the sandbox token stored as the workspace secret, the sandbox ad accounts
discovered (the first one activated), the Sheets simulator's API key stored, and a draft rule a
person can switch on to watch a dispatch. The rule's second task reads each campaign's priority from
the demo's Google Sheet (a custom metric); the first works without it."""

from __future__ import annotations

from typing import Any

import msgspec

from app.demo import search_console
from app.demo.parts import DemoPart, DemoWorkspace
from app.engines.adrules import accounts, rules
from app.engines.adrules.schemas import RuleIn
from app.engines.adrules.work.sheets_values import SHEETS_API_KEY_SECRET
from app.integrations.http_guard import shared_guard
from app.integrations.meta.client import GraphClient
from app.integrations.meta.reader import MetaReader
from app.platform.models import Workspace
from app.platform.service import set_secret
from app.runtime import Runtime
from app.sandbox.chat_webhooks import ChatWebhookSandbox, start_chat_sandbox
from app.sandbox.meta.demo import (
    DEMO_SHEET_ID,
    DEMO_SHEET_NAME,
    DEMO_SHEETS_KEY,
    DEMO_STORE,
    DEMO_TOKEN,
    start_demo_sandbox,
)

DEMO_RULE = {
    "name": "Pause summer campaigns with poor ROAS (draft)",
    "status": "draft",
    "prefilters": {
        "name_contains": "Summer",
        "effective_status": {"operator": "in", "values": ["ACTIVE"]},
    },
    "schedule": {"mode": "interval", "minutes": 15},
    "tasks": [
        {
            "name": "Flag losers",
            "conditions": [
                {
                    "type": "metric_value",
                    "metric": "purchase_roas",
                    "period": "last_7d",
                    "operator": "lt",
                    "value": "1.2",
                },
                {
                    "type": "metric_value",
                    "metric": "spend",
                    "period": "today",
                    "operator": "gt",
                    "value": "5",
                },
            ],
            "group": "and",
            "action": {"type": "log_only"},
            "cooldown": "1h",
        },
        {
            "name": "Watch top-priority campaigns (priority from the campaign plan sheet)",
            "conditions": [
                {
                    "type": "custom_metric",
                    "spreadsheet_id": DEMO_SHEET_ID,
                    "sheet_name": DEMO_SHEET_NAME,
                    "lookup_column": "A",
                    "value_column": "C",
                    "operator": "gte",
                    "value": "3",
                },
                {
                    "type": "metric_value",
                    "metric": "spend",
                    "period": "today",
                    "operator": "gt",
                    "value": "5",
                },
            ],
            "group": "and",
            "action": {"type": "log_only"},
            "cooldown": "1h",
        },
    ],
}


def careful_rule(chat_url: str) -> dict[str, Any]:
    """A draft rule that asks before acting: its runs propose budget cuts, and their digests go to
    the demo's Slack and Teams simulators with the approval link."""
    chat = ChatWebhookSandbox()
    chat.url = chat_url  # only its address helpers: the served one is the demo's
    return {
        "name": "Cut budgets of costly campaigns, after approval (draft)",
        "status": "draft",
        "schedule": {"mode": "interval", "minutes": 60},
        "approval": {"required": True, "window_hours": 24},
        "tasks": [
            {
                "name": "Cut costly",
                "conditions": [
                    {
                        "type": "metric_value",
                        "metric": "cpc",
                        "period": "last_7d",
                        "operator": "gt",
                        "value": "1.5",
                    }
                ],
                "action": {"type": "decrease_budget", "by": "percent", "amount": "20", "min": "5"},
                "cooldown": "24h",
            },
            {
                "name": "Tell Slack",
                "conditions": [
                    {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "5"}
                ],
                "action": {"type": "notify_webhook", "format": "slack", "url": chat.slack_url()},
                "cooldown": "1h",
            },
            {
                "name": "Tell Teams",
                "conditions": [
                    {"type": "metric_value", "metric": "spend", "operator": "gt", "value": "5"}
                ],
                "action": {"type": "notify_webhook", "format": "teams", "url": chat.teams_url()},
                "cooldown": "1h",
            },
        ],
    }


async def seed_demo(runtime: Runtime, demo: DemoWorkspace) -> None:
    url = demo.sandbox_urls.get("meta") or runtime.settings.integrations.meta_graph_url
    graph = GraphClient(
        url,
        runtime.settings.integrations.meta_graph_version,
        user_agent=runtime.settings.integrations.user_agent,
    )
    try:
        found = await MetaReader(graph, DEMO_TOKEN).ad_accounts()
    finally:
        await graph.aclose()
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        await accounts.store_token(
            uow.session, runtime.secrets, workspace_id=demo.workspace_id, token=DEMO_TOKEN, now=now
        )
        await set_secret(
            uow.session,
            runtime.secrets,
            workspace_id=demo.workspace_id,
            name=SHEETS_API_KEY_SECRET,
            value=DEMO_SHEETS_KEY,
            now=now,
        )
        stored = await accounts.record_discovered(
            uow.session, workspace_id=demo.workspace_id, found=found, now=now
        )
        store = next(a for a in stored if a.meta_id == DEMO_STORE)
        await accounts.set_active(
            uow.session, workspace_id=demo.workspace_id, account_id=store.id, active=True, now=now
        )
        documents: list[dict[str, Any]] = [DEMO_RULE]
        chat_url = demo.sandbox_urls.get("chat")
        if chat_url:
            # The chat simulators listen on loopback, which the address guard refuses unless the
            # workspace allows private targets: the demo's own workspace does.
            workspace = await uow.session.get(Workspace, demo.workspace_id)
            if workspace is not None:
                workspace.allow_private_http = True
            documents.append(careful_rule(chat_url))
        for document in documents:
            data = msgspec.convert({**document, "account_ids": [store.id]}, RuleIn)
            await rules.create_rule(
                uow.session,
                runtime.secrets,
                shared_guard(runtime.resources, runtime.settings.integrations),
                workspace_id=demo.workspace_id,
                data=data,
                now=now,
            )


PART = DemoPart(
    name="adrules",
    seed=seed_demo,
    sandboxes={
        "meta": start_demo_sandbox,
        # Started by the Search Console demo, which shares its Google token endpoint.
        "sheets": search_console.start_sheets_sandbox,
        "chat": start_chat_sandbox,
    },
)
