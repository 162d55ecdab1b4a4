"""Records: what a person reads about schedules and their runs — a schedule's shape and the
answer to a request, the schedule log of child runs, the latest results and the activity feed.
The position reports (``reports/``) read the same results.
"""
