"""The reviewed list of text, JSON and binary columns that cannot hold a contact's personal data,
each table with the reason.

Together with the personal-data registry (:mod:`app.engines.funnels.contacts.personal_data`) it
covers every such column of the schema: a test fails on a column that is in neither, so a new
table or column is placed in one of them by a person who looked at it — added to the registry
(erased and exported with the contact) or here, with why it names no contact.
"""

from __future__ import annotations

_OTHER_ENGINE = (
    "an engine without contacts (engines do not import each other, so no contact data reaches "
    "it): ad accounts and rules, or tracked keywords and their results"
)
_STAFF = (
    "the instance's own users and their organisation (staff, not contacts), removed with the "
    "user; secrets and tokens are kept as hashes or encrypted"
)
_AUTHORED = (
    "what staff author (funnels, campaigns, forms, names of tags, lists and fields, provider "
    "settings): the creative's placeholders are filled per contact only in the outbox payload"
)
_STATE = "a state, kind, channel, node id, lease owner or key built from ids, never a value"

NON_PERSONAL: dict[str, tuple[tuple[str, ...], str]] = {
    # -- other engines -------------------------------------------------------------------------
    "adrules_ad_accounts": (("meta_id", "name", "currency", "timezone_name"), _OTHER_ENGINE),
    "adrules_batches": (
        ("batch_id", "account_meta_id", "status", "error", "timezone"),
        _OTHER_ENGINE,
    ),
    "adrules_login_states": (("state_hash", "session_hash"), _OTHER_ENGINE),
    "adrules_meta_connections": (("source", "scopes"), _OTHER_ENGINE),
    "adrules_digests": (("batch_id", "channel_key", "channel", "status", "detail"), _OTHER_ENGINE),
    "adrules_proposals": (
        (
            "batch_id",
            "campaign_id",
            "campaign_name",
            "action",
            "write",
            "before",
            "after",
            "status",
            "reason",
            "decided_by",
        ),
        _OTHER_ENGINE,
    ),
    "adrules_records": (
        (
            "batch_id",
            "campaign_id",
            "campaign_name",
            "action",
            "status",
            "reason",
            "parameters",
            "before",
            "after",
            "conditions",
            "steps",
            "timezone",
            "attribution",
        ),
        _OTHER_ENGINE,
    ),
    "adrules_rules": (
        (
            "name",
            "status",
            "level",
            "prefilters",
            "schedule",
            "approval",
            "attribution_windows",
            "last_batch_id",
        ),
        _OTHER_ENGINE,
    ),
    "adrules_sheet_copies": (("spreadsheet_id", "sheet_name", "rows"), _OTHER_ENGINE),
    "adrules_stops": (("scope_key", "reason", "stopped_by"), _OTHER_ENGINE),
    "adrules_tasks": (("name", "document"), _OTHER_ENGINE),
    "rt_activity": (("kind", "code", "message"), _OTHER_ENGINE),
    "rt_alert_deliveries": (("channel", "matches", "state", "error"), _OTHER_ENGINE),
    "rt_annotations": (("keyword", "text"), _OTHER_ENGINE),
    "rt_alert_rules": (
        ("name", "kind", "device", "channel", "recipients", "url", "sealed_secret"),
        _OTHER_ENGINE,
    ),
    "rt_geogrids": (
        (
            "keyword",
            "engine",
            "language_code",
            "business_name",
            "place_id",
            "cid",
            "domain",
            "queue",
            "status",
            "reservation_state",
            "error_message",
        ),
        _OTHER_ENGINE,
    ),
    "rt_geogrid_cells": (
        ("location_coordinate", "task_id", "state", "competitors", "error_message"),
        _OTHER_ENGINE,
    ),
    "rt_keyword_lists": (("name",), _OTHER_ENGINE),
    "rt_keyword_tags": (("keyword", "tag"), _OTHER_ENGINE),
    "rt_ledger": (("kind", "note"), _OTHER_ENGINE),
    "rt_list_keywords": (("keyword",), _OTHER_ENGINE),
    "rt_locations": (("name", "search_text", "country_iso", "kind"), _OTHER_ENGINE),
    "rt_poller_state": (("endpoint", "calls"), _OTHER_ENGINE),
    "rt_report_deliveries": (("period", "state", "error"), _OTHER_ENGINE),
    "rt_report_settings": (("period", "recipients"), _OTHER_ENGINE),
    "rt_report_links": (("token_hash", "prefix"), _OTHER_ENGINE),
    "rt_requests": (("trigger", "queue"), _OTHER_ENGINE),
    "rt_results": (
        (
            "keyword",
            "device",
            "task_id",
            "state",
            "url",
            "features",
            "owned_features",
            "competitors",
            "data",
            "error_code",
        ),
        _OTHER_ENGINE,
    ),
    "rt_runs": (
        (
            "data_type",
            "device",
            "queue",
            "language_code",
            "domain",
            "competitors",
            "packages",
            "keywords",
            "status",
            "error_code",
            "error_message",
            "reservation_state",
        ),
        _OTHER_ENGINE,
    ),
    "rt_snapshots": (("body",), _OTHER_ENGINE),
    "rt_schedules": (
        (
            "name",
            "keywords",
            "data_type",
            "frequency",
            "language_code",
            "domain",
            "competitors",
            "target_urls",
            "devices",
            "packages",
            "status",
            "dedup_key",
        ),
        _OTHER_ENGINE,
    ),
    # -- the platform --------------------------------------------------------------------------
    "organisations": (("name",), _STAFF),
    "workspaces": (
        ("name", "timezone", "ingest_token_hash", "webhook_secret_encrypted"),
        _STAFF,
    ),
    "users": (("email", "name", "password_hash", "org_role"), _STAFF),
    "memberships": (("role",), _STAFF),
    "invitations": (("email", "role", "token_hash"), _STAFF),
    "api_keys": (("name", "prefix", "key_hash", "scope"), _STAFF),
    "workspace_logos": (("content_type", "data"), _STAFF),
    "user_sessions": (("token_hash",), _STAFF),
    "audit_log": (
        ("actor_kind", "client_address", "user_agent", "action", "object_type", "object_id"),
        "who of the staff or which key did what, from which address (staff, not contacts; an "
        "erased contact is named by id only); before/after are in the registry",
    ),
    "user_totp": (("secret_encrypted",), _STAFF),
    "user_recovery_codes": (("code_hash",), _STAFF),
    "organisation_security": (("two_factor_required",), _STAFF),
    "secrets": (("name", "ciphertext"), "workspace secrets (provider keys), encrypted"),
    "idempotency_keys": (
        ("key", "request_hash"),
        "SHA-256 of the caller's key and of the request (the answer itself is in the registry)",
    ),
    "job_attempts": (
        ("job_id", "name", "worker", "outcome"),
        "a job's history: its id, kind, the process that ran it and how the attempt ended (its "
        "error is in the registry)",
    ),
    "jobs": (
        ("id", "name", "queue", "payload", "status", "leased_by"),
        "the queue's bookkeeping; the funnels' job payloads carry ids only (a shard, a campaign "
        "id, a bulk job id), never a contact's value (its error is in the registry)",
    ),
    "sweeper_state": (("name", "lease_owner"), _STATE),
    "bulk_jobs": (("kind", "status", "cursor", "counters"), _STATE + " (a cursor is a row number)"),
    "bulk_job_errors": (("field",), "the name of the refused field (the message is registered)"),
    "alembic_version": (("version_num",), "the schema's revision"),
    # -- the funnels engine --------------------------------------------------------------------
    "contacts": (
        ("consent", "suppressed"),
        "per channel and topic: granted, withdrawn, unsubscribed, bounced (no identity); what "
        "suppression needs survives, without an address (FN-32)",
    ),
    "contact_fields": (("key", "type", "label"), _AUTHORED),
    "contact_lists": (("name",), _AUTHORED),
    "tags": (("name",), _AUTHORED),
    "contact_events": (("name", "source"), "the event's name and where it came from"),
    "funnel_report_nonces": (
        ("provider", "nonce"),
        "a provider's one-time token of a signed webhook request (random, names no one)",
    ),
    "funnel_inbound_events": (("source", "name"), "the event's name and where it came from"),
    "funnels": (("name", "draft"), _AUTHORED),
    "funnel_versions": (("definition",), _AUTHORED),
    "funnel_forms": (
        ("public_id", "name", "fields", "add_tag", "add_list", "success_message"),
        _AUTHORED,
    ),
    "campaigns": (
        (
            "name",
            "subject",
            "preheader",
            "body",
            "html",
            "topic",
            "audience",
            "holdout",
            "status",
            "lease_owner",
        ),
        _AUTHORED,
    ),
    "saved_segments": (("name", "description", "predicate"), _AUTHORED),
    "funnel_providers": (("kind", "shape", "base_url", "options"), _AUTHORED),
    "funnel_webhook_sources": (
        ("public_id", "name", "provider", "receives", "secret_ciphertext"),
        _AUTHORED + "; the signing secret is encrypted",
    ),
    "funnel_runs": (
        ("status", "current_node", "lease_owner", "waiting_event", "woken_by", "exit_reason"),
        _STATE,
    ),
    "funnel_steps": (("node_id", "kind"), _STATE),
    "funnel_outbox": (("node_id", "channel", "idempotency_key", "status", "lease_owner"), _STATE),
    "delivery_events": (("kind",), _STATE),
    "campaign_events": (("kind",), _STATE),
    "campaign_recipients": (("status",), _STATE),
    "funnel_segment_members": (("trigger_key",), _STATE),
    "funnel_trigger_fires": (("trigger_key", "occurrence"), _STATE + " (a date)"),
    "funnel_frequency_counts": (("period",), _STATE + " (a day or a week)"),
    "funnel_throttle": (("key",), _STATE + " (funnel and node ids)"),
    "funnel_experiment_winners": (
        ("node_id", "branch", "decided_by", "reason"),
        "an experiment's decision: a node id, a branch name the funnel's author chose, who decided "
        "(automatic or a person) and the verdict's wording (figures over branches, never a contact)",
    ),
    "funnel_ai_cache": (
        ("cache_key", "model"),
        "a hash of the creative and the attributes used, and the model's name",
    ),
    "funnel_ai_usage": (
        ("idempotency_key", "outcome", "model", "detail"),
        "the ledger: the effect's key, tokens, the model and the quota decision's reason",
    ),
    "funnel_ai_drafts": (
        (
            "description",
            "constraints",
            "model",
            "endpoint",
            "rounds",
            "outcome",
            "findings",
            "simulation",
        ),
        _AUTHORED + ": a description staff wrote, the model's answers and their findings; the "
        "simulation walked made-up sample people, never a contact",
    ),
    "funnel_erased_addresses": (
        ("kind", "digest", "suppressed"),
        "FN-32's keyed hash of an erased address and its suppression, never the address",
    ),
}
"""Columns that hold no contact's personal data, by table, with the reason."""
