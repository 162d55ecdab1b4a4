"""Records: what is left for a person to read — each outcome of a delivery written with its
delivery event (``outcomes.py``), and the choice a contact makes through an unsubscribe link,
attributed to the message it came in (``preferences.py``)."""
