"""Work: the provider calls and what follows them — post a run's tasks (``runs``), collect
finished tasks for the whole provider account (``poller``) or as they are posted back
(``postback``), end runs and settle their reservations, close what a crash left open
(``reconcile``) and send the pause notice.
"""
