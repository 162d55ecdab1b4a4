"""Due: what makes an event happen at a time — a contact's date field (``date_triggers.py``) and a
funnel's schedule (``schedule_triggers.py``); each occurrence is claimed once by inserting its row.
(A stored inbound row, the other due thing, is written by ``events/ingest.py``.)"""
