"""A run digest as each channel reads it (spec AR-27): pure functions of :class:`Digest`.

- e-mail: plain text, the subject from the action's template;
- ``signed_json``: our JSON document (the sender signs it);
- ``slack``: a Slack incoming-webhook message, ``text`` (the notification's fallback) and
  ``blocks`` (header, sections in ``mrkdwn``, context, link buttons), within Block Kit's limits
  (header 150 characters, section text 3,000, 50 blocks);
- ``teams``: a Microsoft Teams incoming-webhook message: ``type: message`` with one attachment of
  ``contentType`` ``application/vnd.microsoft.card.adaptive`` holding an Adaptive Card (TextBlocks,
  a FactSet, ``Action.OpenUrl`` buttons).
"""

from __future__ import annotations

from typing import Any

from app.engines.adrules.notify.digest import Digest

SLACK_HEADER_MAX = 150
SLACK_TEXT_MAX = 3000
ADAPTIVE_CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
ADAPTIVE_CARD_VERSION = "1.4"
ADAPTIVE_CARD_TYPE = "application/vnd.microsoft.card.adaptive"

_OUTCOME = {
    "executed": "done",
    "would_execute": "would be done (shadow)",
    "proposed": "awaiting approval",
    "not_executed": "conditions not met",
    "skipped": "skipped",
    "error": "failed",
}


def headline(d: Digest) -> str:
    what = {"campaign": "campaigns", "adset": "ad sets", "ad": "ads"}.get(d.level, "objects")
    text = f"Rule “{d.rule_name}”: {d.matched} of {d.objects} {what} matched"
    if d.proposals:
        text += f", {d.proposals} changes await approval"
    if d.errors:
        text += f", {d.errors} errors"
    return text


def count_lines(d: Digest) -> list[str]:
    return [
        f"{c.action.replace('_', ' ')}: {c.count} {_OUTCOME.get(c.status, c.status)}"
        for c in d.counts
    ]


def top_lines(d: Digest) -> list[str]:
    return [f"{t.name} ({t.id}): {t.describe()}" for t in d.top]


def _when(d: Digest) -> str:
    return f"{d.at:%Y-%m-%d %H:%M} UTC"


def email_subject(template: str, d: Digest, render: Any) -> str:
    return str(
        render(
            template,
            # One object: its name, as the per-object subject had; more: how many.
            name=d.top[0].name if d.matched == 1 and d.top else f"{d.matched} objects",
            rule=d.rule_name,
            date=f"{d.at:%Y-%m-%d}",
            campaign_id="",
        )
    )


def email_text(d: Digest) -> str:
    lines = [
        headline(d),
        "",
        f"Run {d.batch_id} at {_when(d)} on {', '.join(d.accounts)}",
        "",
        "What the run did:",
        *(f"  {line}" for line in count_lines(d)),
    ]
    if d.top:
        lines += ["", f"Top {len(d.top)} objects:", *(f"  {line}" for line in top_lines(d))]
    if d.approve_url:
        until = f" until {d.approve_until:%Y-%m-%d %H:%M} UTC" if d.approve_until else ""
        lines += ["", f"Review and approve the changes{until}:", d.approve_url]
    lines += ["", f"The run: {d.run_url}"]
    return "\n".join(lines) + "\n"


def json_body(d: Digest) -> dict[str, Any]:
    return {
        "event": "adrules.run_digest",
        "rule": {"id": d.rule_id, "name": d.rule_name},
        "batch_id": d.batch_id,
        "at": d.at.isoformat(),
        "level": d.level,
        "ad_accounts": list(d.accounts),
        "records": d.records,
        "matched": d.matched,
        "errors": d.errors,
        "counts": [{"action": c.action, "status": c.status, "count": c.count} for c in d.counts],
        "top": [
            {
                "id": t.id,
                "name": t.name,
                "action": t.action,
                "status": t.status,
                "before": t.before,
                "after": t.after,
                "change": str(t.change) if t.change is not None else None,
                "spend": str(t.spend) if t.spend is not None else None,
            }
            for t in d.top
        ],
        "proposals": d.proposals,
        "links": {"run": d.run_url, "approve": d.approve_url},
        "approve_until": d.approve_until.isoformat() if d.approve_until else None,
    }


def _slack_escape(text: str) -> str:
    """Slack's mrkdwn control characters (its documented escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_body(d: Digest) -> dict[str, Any]:
    counts = "\n".join(f"• {_slack_escape(line)}" for line in count_lines(d))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(headline(d), 150)}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip("*What the run did*\n" + counts, 3000)},
        },
    ]
    if d.top:
        top = "\n".join(
            f"• *{_slack_escape(t.name)}* (`{t.id}`): {_slack_escape(t.describe())}" for t in d.top
        )
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _clip(f"*Top {len(d.top)}*\n" + top, 3000)},
            }
        )
    context = f"Run `{d.batch_id}` at {_when(d)} on {_slack_escape(', '.join(d.accounts))}"
    if d.approve_until:
        context += f" · approve until {d.approve_until:%Y-%m-%d %H:%M} UTC"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    buttons: list[dict[str, Any]] = []
    if d.approve_url:
        buttons.append(
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Review and approve"},
                "url": d.approve_url,
                "style": "primary",
                "action_id": "approve",
            }
        )
    buttons.append(
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Open the run"},
            "url": d.run_url,
            "action_id": "open_run",
        }
    )
    blocks.append({"type": "actions", "elements": buttons})
    return {"text": headline(d), "blocks": blocks}


def teams_body(d: Digest) -> dict[str, Any]:
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": headline(d),
            "size": "Medium",
            "weight": "Bolder",
            "wrap": True,
        },
        {
            "type": "TextBlock",
            "text": f"Run {d.batch_id} at {_when(d)} on {', '.join(d.accounts)}",
            "isSubtle": True,
            "wrap": True,
        },
        {
            "type": "FactSet",
            "facts": [
                {
                    "title": c.action.replace("_", " "),
                    "value": f"{c.count} {_OUTCOME.get(c.status, c.status)}",
                }
                for c in d.counts
            ],
        },
    ]
    if d.top:
        body.append(
            {"type": "TextBlock", "text": f"Top {len(d.top)}", "weight": "Bolder", "wrap": True}
        )
        body.extend(
            {"type": "TextBlock", "text": f"- {line}", "wrap": True} for line in top_lines(d)
        )
    actions: list[dict[str, Any]] = []
    if d.approve_url:
        actions.append(
            {"type": "Action.OpenUrl", "title": "Review and approve", "url": d.approve_url}
        )
    actions.append({"type": "Action.OpenUrl", "title": "Open the run", "url": d.run_url})
    card = {
        "$schema": ADAPTIVE_CARD_SCHEMA,
        "type": "AdaptiveCard",
        "version": ADAPTIVE_CARD_VERSION,
        "body": body,
        "actions": actions,
    }
    return {
        "type": "message",
        "attachments": [{"contentType": ADAPTIVE_CARD_TYPE, "contentUrl": None, "content": card}],
    }
