"""Ad rules: rules that watch Meta campaigns and act on them, run per ad account.

    due      rules.py stores each rule's next_execution_at; due.py computes it in the
       |     workspace's time zone
    claim    claim/: the 10-second sweep claims due rules once (advancing their due time),
       |     fetches each active account's campaigns through the pre-filters (reads only)
       |     and queues one job per account with its batch record
    work     work/: the account job reads facts (Insights, sheets), evaluates conditions,
       |     checks cooldowns and guards, plans the change and executes it (the only writer)
    records  records.py: batches and execution records, what the rule log shows

The backtest (backtest/) replays a rule over past daily Insights on the work stage's own
evaluation, cooldown, planner and guard, and writes nothing.

Beside the stages: rules.py writes rules (rule_tasks.py their tasks, rule_views.py reads them as
the API and dashboard show them), models.py and run_models.py (tables), schemas.py, errors.py,
payloads.py (the job the claim stage hands to the work stage), jobs.py, plugin.py.
"""

# The worker's tables live in their own module; importing them with the package puts them in the
# metadata wherever the engine's models are loaded (migration checks, test clean-up).
from app.engines.adrules import connection_models as _connection_models  # noqa: F401
from app.engines.adrules import notify_models as _notify_models  # noqa: F401
from app.engines.adrules import run_models as _run_models  # noqa: F401
