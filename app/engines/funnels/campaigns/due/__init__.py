"""Due: what a campaign has to send — its audience snapshot stored as numbered recipients
(``audience.py``), the campaigns whose time has come (``campaigns.py``, the sweep's reads) and the
next pending recipients of one campaign (``recipients.py``, the sender's reads)."""
