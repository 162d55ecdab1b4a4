"""Turning due rows into work exactly once: the job queue, leasing and the periodic sweepers."""
