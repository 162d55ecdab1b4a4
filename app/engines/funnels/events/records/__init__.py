"""Records: what providers reported about our messages (``delivery_reports.py``) and the nonces
that make a report count once (``report_nonces.py``)."""
