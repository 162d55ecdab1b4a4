"""Records: each recipient's outcome and the campaign's checkpoint as the sender commits them
(``outcomes.py``), and the counters a person reads, recomputed from them and from the delivery
events (``counters.py``)."""
