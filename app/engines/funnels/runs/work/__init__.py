"""Work: the runner executes leased runs (``runner.py``) through the node executors (``nodes/``)
and writes each batch's steps, outbox effects and run advances in one statement each
(``batch_writes.py``); ``context.py`` addresses the values a run produced, and
``effect_failures.py`` moves a run whose effect cannot go out."""
