"""Operations on position tracking schedules (RT-1 to RT-29), one job a module:

    rules        the field rules a schedule is stored by, as pure functions (RT-3, RT-5, RT-7,
                 RT-12, RT-15, RT-20, RT-26): a request checked into a configuration, the
                 duplicate key, the refusals several operations give (over the per-run limit,
                 no priority queue for keyword data)
    lookup       find a schedule in its workspace (to read, or locked for a change), list them
    config       a schedule's configuration, from the form or from the row, and its keyword
                 count checked against the per-run limit (RT-5)
    duplicates   refuse a second live schedule with the same duplicate key (RT-15)
    estimates    the admission estimate and the monthly figure (RT-18, RT-19)
    creation     save a schedule and request its first baseline (RT-1 to RT-17, RT-27)
    edits        change the editable fields, set the direct selection (RT-3, RT-16)
    drafts       "duplicate for mobile": a new schedule pre-filled from another (RT-17)
    lifecycle    pause, resume, end (RT-28, RT-29)
    manual_runs  "run now" and "measure quickly", through admission (RT-25, RT-26)

What a person reads about a schedule is shaped in :mod:`app.engines.ranktracking.records.schedules`.

Services never commit; the caller's unit of work does. Every lookup is scoped by workspace, so
another workspace's id answers "not found".
"""
