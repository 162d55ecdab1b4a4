"""Work: the messages composed (``compose.py``), the SMTP connections they go out on
(``transport.py``), the sender that walks a campaign's recipients (``sender.py``), and the
composer's preview and test send (``trial.py``)."""
