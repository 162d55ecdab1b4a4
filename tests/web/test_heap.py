"""The served process leaves its started heap out of the collector's full collections."""

from __future__ import annotations

import gc

from app.web.heap import freeze_startup_heap


def test_what_is_alive_after_start_up_is_left_out_of_collections() -> None:
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
