"""What the pipelines run: a funnel's definition and the tools of the person drawing it.

``graph.py`` is the definition (nodes, triggers, entry predicate, settings), ``validate.py`` the
pure check a graph must pass to be published, ``service.py`` funnels, drafts and their immutable
versions (and the reading of runs, steps and timelines), ``simulate.py`` a walk of a contact
through a graph on a simulated clock, ``trial_send.py`` a test send of one message node and
``preview.py`` a message node rendered for one contact as the editor shows it.
"""
