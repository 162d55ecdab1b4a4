"""Records: what a person reads about runs — the schedule log of child runs, the latest results
and the activity feed. The position reports (``reports/``) read the same results.
"""
