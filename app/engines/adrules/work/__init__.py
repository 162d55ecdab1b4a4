"""Work: the per-account job and the decisions it makes — read the facts (Insights, sheets,
campaign fields), evaluate conditions, check cooldowns and cross-rule guards, plan the change and
carry it out (``execute``, the only code that writes to Meta). The preview reads the same way and
writes nothing.
"""
