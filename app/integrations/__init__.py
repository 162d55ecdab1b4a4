"""Clients of outside APIs, one package per API. A package that writes keeps its GET-only reader
(``reader.py``) apart from its writer (``writer.py``)."""
