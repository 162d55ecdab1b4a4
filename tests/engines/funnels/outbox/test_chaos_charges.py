"""How the SIGKILL chaos test (test_chaos_sends.py, opt-in) charges repeated messages to kills:
each repeat to the first kill after the message's previous copy, so a message whose second
sender was killed too counts once against each kill."""

from __future__ import annotations

from collections import Counter

from tests.engines.funnels.outbox.test_chaos_sends import Kill, charge


def test_a_message_repeated_twice_is_charged_once_to_each_kill_that_cost_a_copy() -> None:
    # <run-1> is sent, its sender killed (after 2 arrivals), sent again by another process,
    # that one killed too (after 4), and sent a third time.
    kills = [Kill("worker", 1, arrived=2), Kill("serve", 2, arrived=4)]
    arrivals = ["<run-1>", "<run-2>", "<run-1>", "<run-3>", "<run-1>", "<run-4>"]
    assert charge(kills, arrivals) == [Counter(funnel=1), Counter(funnel=1)]


def test_campaign_messages_are_counted_apart() -> None:
    kills = [Kill("worker", 1, arrived=2)]
    assert charge(kills, ["<c1.r1>", "<run-1>", "<c1.r1>", "<run-1>"]) == [
        Counter(campaign=1, funnel=1)
    ]
