"""The heap of a started process, moved out of the collector's way.

Python's full (generation 2) collection walks every tracked object, and a started process holds a
quarter of a million of them that live as long as it does: modules, the engines' plug-ins and
their dependencies, SQLAlchemy's metadata and compiled statements, and in ``serve`` the Litestar
application and its templates. Under ingestion load a full collection ran about every second and
a half and took ~400 ms on this machine (a pause of every request and job in flight: the 0.5-1 s
p99 at 64 requests in flight); :func:`gc.freeze` moves what is alive at the end of start-up to the
permanent generation, which collections skip, so they walk only what was made since (a few
milliseconds). Objects frozen are never collected, which is what they would be anyway; garbage
made before the freeze is collected first.

Both processes call :func:`settle_startup_heap` once started: ``serve``
(:func:`app.web.app.create_app`'s lifespan) and ``worker`` (:func:`app.runtime.run_worker_process`);
``HEAP_FREEZE=off`` leaves the heap to the collector (to compare, or should a workload ever fare
worse frozen). It lives beside the runtime, not in the web layer, because the worker process never
imports the web layer.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect once, then leave everything still alive out of later collections; logs and
    returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("start-up heap frozen: %d objects left out of garbage collection", frozen)
    return frozen


def settle_startup_heap(freeze: bool) -> int:
    """What a started process does with its start-up heap: freeze it (``HEAP_FREEZE``, on by
    default) or leave it to the collector, saying so in the log; returns how many objects are
    frozen (0 when left)."""
    if freeze:
        return freeze_startup_heap()
    log.info("start-up heap left to garbage collection (HEAP_FREEZE is off)")
    return 0
