"""Backtest: what a rule would have done over a past range, replayed on Meta's daily Insights.

    window     window.py: the range asked for (past, within Meta's 37 months of Insights) and
       |       the days each reporting period covers on a given day, with the lookback to read
    read       daily.py: account-level Insights with ``time_increment=1`` at the rule's level,
       |       many day windows packed into Graph batch calls, every ``paging.next`` followed
    replay     replay.py (pure): day by day in the account's zone, the engine's own condition
       |       evaluation, cooldowns, plans with their clamps, and cross-rule guard on a
       |       simulated status and budget per object; aggregate.py sums the days of a period
    result     service.py: the estimate per account, its objects' paths and would-be actions

It writes nothing — no Graph write, no record, no batch — and its result says it is an estimate:
Insights are what happened under the decisions actually taken. An import-linter contract keeps the
Graph writer, the action runner and the record writers out of this package.
"""
