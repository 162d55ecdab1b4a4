"""Position tracking: keyword positions measured through a SERP provider on a schedule, paid
from an organisation balance.

    due      schedules/ stores schedules by the rules of schedules/rules.py (creation, edits,
       |     pause/resume/end, manual requests, estimates); due.py computes their due times
    claim    claim/: the hourly sweep (:20 UTC) picks due schedules, admission claims each
       |     with its money reserved, the hand-off queues one job per child run
    work     work/: post the run's tasks to the provider, collect finished tasks (poller,
       |     postbacks), end runs and settle them in the ledger, reconcile what a crash left
    records  records/ (schedules, run log, results, activity feed) and reports/ (positions,
             charts, exports), read by people; alerts/ turns a finished run's results into alerts
             and the periodic e-mail report

Beside the stages: models.py, schemas.py, errors.py, the money modules (ledger.py, money.py,
amounts.py, pricing.py), keyword lists (lists.py, keywords.py, keyword_import.py, members.py) and
plugin.py.
"""
