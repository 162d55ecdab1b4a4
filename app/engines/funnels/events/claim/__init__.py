"""Claim: the matcher (``triggers.py``) leases unmatched contact events, wakes the runs waiting on
them and starts runs. (The ingest job, which claims stored inbound rows, is ``events/ingest.py``.)"""
