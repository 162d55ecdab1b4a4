"""A loopback simulator of the Graph API subset Sweepline uses (spec §7).

:mod:`.world` holds the data (ad accounts, campaigns, seeded insights) and answers calls as plain
functions; :mod:`.app` serves it over HTTP with versioned paths, the batch endpoint and the usage
headers; :mod:`.insights` generates deterministic Insights rows; :mod:`.demo` builds the demo's data.
"""

from app.sandbox.meta.app import create_app, serve_world
from app.sandbox.meta.world import GraphWorld, SimAccount, SimCampaign, graph_error

__all__ = ["GraphWorld", "SimAccount", "SimCampaign", "create_app", "graph_error", "serve_world"]
