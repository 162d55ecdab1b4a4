"""Experiments with a verdict: a split declared an experiment (its goal, the evidence a verdict
needs, an optional automatic winner), a funnel's holdout (a control share that gets nothing),
deterministic assignment per contact, and the statistics that judge them (standard library only).
"""
