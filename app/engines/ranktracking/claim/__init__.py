"""Claim: due schedules become child runs exactly once — the hourly sweep picks the due active
schedules (``dispatch``), admission claims each one with its money reserved in the same
transaction (on the shared claim primitive), and the hand-off gives the admitted runs to the queue.
"""
