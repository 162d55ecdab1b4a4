"""The tenancy linter's allow-list: statements on workspace-owned tables that are not scoped to one
workspace by ``app/db/tenancy.py``, and why each may not be.

A key ending in ``/`` allows a package, a module path the whole module, ``path::function`` one
function. Every reason is one of the kinds below; an entry that no longer names a module or a
function fails the linter, so the list shrinks with the code.
"""

from __future__ import annotations

CLAIM = "claims due rows across every workspace; each claimed row carries its workspace onward"
SWEEP = "a timed sweep over every workspace's rows, not a workspace's request"
CLAIMED = (
    "works on rows already claimed or handed over by id (a job's batch, run, delivery, proposal "
    "or step); the row carries its workspace"
)
CHILD = (
    "keyed by a parent the caller read through a scoped statement (a rule's tasks, a schedule's "
    "rules and runs, a funnel's versions and runs, a contact's events); the parent fixes the "
    "workspace"
)
PREDICATE = (
    "part of a condition list or compiled segment predicate that already holds the workspace "
    "criterion (the caller's statement is scoped)"
)
SETWISE = (
    "set-wise over a batch that spans workspaces (contact events, recipients, live versions); "
    "each row is matched with its own workspace_id"
)
ORGANISATION = (
    "organisation-wide by design: the ledger, balances and stop switches belong to the "
    "organisation (a workspace's switch is one key of it)"
)
PUBLIC = "a public endpoint: no workspace is known before its unguessable id or token is looked up"
PERSON = "keyed by the signed-in person: their own rows across the workspaces they belong to"

ALLOWED: dict[str, str] = {
    # ad rules
    "app/engines/adrules/claim/": CLAIM,
    "app/engines/adrules/work/": CLAIMED,
    "app/engines/adrules/approvals/expire.py": SWEEP,
    "app/engines/adrules/approvals/decide.py::_claim": CLAIMED,
    "app/engines/adrules/approvals/decide.py::recount": CLAIMED,
    "app/engines/adrules/approvals/decide.py::_settle_records": CLAIMED,
    "app/engines/adrules/approvals/decide.py::reject": CLAIMED,
    "app/engines/adrules/approvals/decide.py::_load": CLAIMED,
    "app/engines/adrules/approvals/decide.py::_write_back": CLAIMED,
    "app/engines/adrules/budget_history.py::rule_budgets": CHILD,
    "app/engines/adrules/connection/states.py::open_state": PERSON,
    "app/engines/adrules/records.py::recorded_pairs": CLAIMED,
    "app/engines/adrules/records.py::task_names": CLAIMED,
    "app/engines/adrules/records.py::last_executions": CLAIMED,
    "app/engines/adrules/records.py::start_batch": CLAIMED,
    "app/engines/adrules/records.py::batch_counts": CLAIMED,
    "app/engines/adrules/records.py::finish_batch": CLAIMED,
    "app/engines/adrules/records.py::defer_batch": CLAIMED,
    "app/engines/adrules/rule_tasks.py::_task": CHILD,
    "app/engines/adrules/rule_tasks.py::replace_tasks": CHILD,
    "app/engines/adrules/rule_views.py::_last_batch_statuses": CHILD,
    "app/engines/adrules/rule_views.py::list_rules": CHILD,
    "app/engines/adrules/rule_views.py::active_tasks": CHILD,
    "app/engines/adrules/rules.py::set_status": CHILD,
    "app/engines/adrules/stops.py": ORGANISATION,
    # funnels
    "app/engines/funnels/analytics/series.py::load_traces": CHILD,
    "app/engines/funnels/campaigns/claim/lease.py::release": CLAIMED,
    "app/engines/funnels/campaigns/due/audience.py::_chunk": PREDICATE,
    "app/engines/funnels/campaigns/due/audience.py::_estimate": PREDICATE,
    "app/engines/funnels/campaigns/due/audience.py::_claim": CLAIMED,
    "app/engines/funnels/campaigns/due/audience.py::audience_step": CLAIMED,
    "app/engines/funnels/campaigns/due/audience.py::start_materialising": CLAIMED,
    "app/engines/funnels/campaigns/due/campaigns.py::due_to_start": SWEEP,
    "app/engines/funnels/campaigns/due/campaigns.py::without_sender": SWEEP,
    "app/engines/funnels/campaigns/due/campaigns.py::unschedule": SWEEP,
    "app/engines/funnels/campaigns/due/recipients.py::next_pending": CLAIMED,
    "app/engines/funnels/campaigns/jobs.py::send": CLAIMED,
    "app/engines/funnels/campaigns/records/outcomes.py::record_skips": CLAIMED,
    "app/engines/funnels/campaigns/records/outcomes.py::confirm": CLAIMED,
    "app/engines/funnels/campaigns/records/outcomes.py::finish": CLAIMED,
    "app/engines/funnels/campaigns/review.py::audience_ids": PREDICATE,
    "app/engines/funnels/campaigns/review.py::_at_cap": CHILD,
    "app/engines/funnels/consent/gate.py::people": SETWISE,
    "app/engines/funnels/contacts/deletion.py::end_runs_of_contact": CHILD,
    "app/engines/funnels/contacts/erased_addresses.py::recall": SETWISE,
    "app/engines/funnels/contacts/facts.py::load_facts": CHILD,
    "app/engines/funnels/contacts/memberships.py::_tag_names": CHILD,
    "app/engines/funnels/contacts/memberships.py::_list_names": CHILD,
    "app/engines/funnels/contacts/personal_match.py::ByAddress.where": PREDICATE,
    "app/engines/funnels/contacts/store.py::live_contacts": SETWISE,
    "app/engines/funnels/contacts/store.py::contact_ids_by_email": SETWISE,
    "app/engines/funnels/contacts/saved_segments.py::take_daily_counts": SWEEP,
    "app/engines/funnels/contacts/segments.py::compile_sql": PREDICATE,
    "app/engines/funnels/contacts/segments.py::_compile_event_count": PREDICATE,
    "app/engines/funnels/definitions/service.py::publish": CHILD,
    "app/engines/funnels/definitions/service.py::run_counts": CHILD,
    "app/engines/funnels/definitions/service.py::versions": CHILD,
    "app/engines/funnels/definitions/service.py::effects_of_run": CHILD,
    "app/engines/funnels/definitions/service.py::timeline": CHILD,
    "app/engines/funnels/events/forms.py::public_form": PUBLIC,
    "app/engines/funnels/events/ingest.py::_record_outcomes": CLAIMED,
    "app/engines/funnels/events/sources/service.py::verifier": PUBLIC,
    "app/engines/funnels/events/work/segment_triggers.py::live_versions": SETWISE,
    "app/engines/funnels/events/claim/triggers.py::match": SETWISE,
    "app/engines/funnels/events/claim/triggers.py::_wait_filters": SETWISE,
    "app/engines/funnels/events/claim/triggers.py::_wake_waiting": SETWISE,
    "app/engines/funnels/experiments/report.py": CHILD,
    "app/engines/funnels/experiments/routing.py::standing_winner": CHILD,
    "app/engines/funnels/experiments/winners.py::_record": CHILD,
    "app/engines/funnels/experiments/winners.py::decide_automatic": CHILD,
    "app/engines/funnels/experiments/winners.py::revert": CHILD,
    "app/engines/funnels/experiments/winners.py::decide_all": SWEEP,
    "app/engines/funnels/outbox/claim/lease.py::still_ours": CLAIMED,
    "app/engines/funnels/outbox/due/cancel.py::cancel_pending_effects": CHILD,
    "app/engines/funnels/outbox/records/outcomes.py::_sent": CLAIMED,
    "app/engines/funnels/outbox/records/outcomes.py::_hold": CLAIMED,
    "app/engines/funnels/outbox/records/outcomes.py::_retry": CLAIMED,
    "app/engines/funnels/outbox/records/outcomes.py::_finish": CLAIMED,
    "app/engines/funnels/outbox/work/frequency.py::caps_of": SETWISE,
    "app/engines/funnels/outbox/work/frequency.py::reserve": CLAIMED,
    "app/engines/funnels/outside/results.py::effect_state": CLAIMED,
    "app/engines/funnels/outside/results.py::record_in": CLAIMED,
    "app/engines/funnels/reads.py::funnel_view": CHILD,
    "app/engines/funnels/runs/claim/lease.py::held_runs": CLAIMED,
    "app/engines/funnels/runs/due/entry.py::_take_back": CLAIMED,
    "app/engines/funnels/runs/due/entry.py::published_versions": SETWISE,
    "app/engines/funnels/runs/due/goals.py::_versions_with_active_runs": SWEEP,
    "app/engines/funnels/runs/records/reports.py::messages_in_outbox": CHILD,
    "app/engines/funnels/runs/records/reports.py::funnel_report": CHILD,
    "app/engines/funnels/runs/records/reports.py::_runs_by_version": CHILD,
    "app/engines/funnels/runs/records/reports.py::_count_steps": CHILD,
    "app/engines/funnels/runs/records/reports.py::_count_current": CHILD,
    "app/engines/funnels/runs/records/reports.py::_count_outbox": CHILD,
    "app/engines/funnels/runs/records/reports.py::_count_delivery": CHILD,
    "app/engines/funnels/runs/work/batch_writes.py": CLAIMED,
    "app/engines/funnels/runs/work/effect_failures.py::_failed_effect": CLAIMED,
    "app/engines/funnels/runs/work/effect_failures.py::lock_runs_of": CLAIMED,
    "app/engines/funnels/runs/work/runner.py::Runner._contacts": CLAIMED,
    "app/engines/funnels/runs/work/runner.py::Runner._graphs": CLAIMED,
    "app/engines/funnels/sendtime/plan.py::reactions": CHILD,
    # rank tracking
    "app/engines/ranktracking/claim/": CLAIM,
    "app/engines/ranktracking/work/": CLAIMED,
    "app/engines/ranktracking/local/collect.py": SWEEP,
    "app/engines/ranktracking/local/posting.py": CLAIMED,
    "app/engines/ranktracking/local/money.py::_leave_held": CLAIMED,
    "app/engines/ranktracking/local/views.py::cells_of": CHILD,
    "app/engines/ranktracking/local/views.py::stats_of": CHILD,
    "app/engines/ranktracking/alerts/deliver.py::_settle": CLAIMED,
    "app/engines/ranktracking/alerts/evaluate.py": CLAIMED,
    "app/engines/ranktracking/alerts/report.py::claim_due": CLAIM,
    "app/engines/ranktracking/alerts/report.py::_settle": CLAIMED,
    "app/engines/ranktracking/alerts/rules.py": CHILD,
    "app/engines/ranktracking/balance_history.py": ORGANISATION,
    "app/engines/ranktracking/ledger.py": ORGANISATION,
    "app/engines/ranktracking/explain/annotations.py": CHILD,
    "app/engines/ranktracking/keyword_import.py::import_step": CLAIMED,
    "app/engines/ranktracking/records/log.py::groups": CHILD,
    "app/engines/ranktracking/records/results.py::latest_results": CHILD,
    "app/engines/ranktracking/records/schedules.py::launch_out": CHILD,
    "app/engines/ranktracking/reports/charts.py::schedule_charts": CHILD,
    "app/engines/ranktracking/reports/measurements.py": CHILD,
    "app/engines/ranktracking/reports/rivals.py::competitor_figures": CHILD,
    "app/engines/ranktracking/reports/share.py::create_link": CHILD,
    "app/engines/ranktracking/reports/share.py::open_link": PUBLIC,
    "app/engines/ranktracking/schedules/lifecycle.py::close_active_runs": CHILD,
    # web
    "app/web/dashboard/workspace_hint.py::members_workspace_holding": PERSON,
}
