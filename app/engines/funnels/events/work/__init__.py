"""Work: an inbound event applied to its contact (``inbound.py`` one by one, ``apply_set.py`` a
batch set-wise) and the ``segment_enter`` evaluation handed to the matcher
(``segment_triggers.py``)."""
