"""Due: an effect is due when it is ``pending`` and its ``next_attempt_at`` has come. The runner
writes it in the transaction that advances its run (``funnels/runs/runner.py``, FN-7); a retry
is due again after its backoff (``retry.py``); ``cancel.py`` takes effects out of what is due
(a contact deleted, a run that left, a goal met)."""
