"""Contacts and what describes them, one module per job.

``store.py`` creates, reads, updates and lists contacts (their data checked); ``fields.py`` the
workspace's typed custom fields; ``memberships.py`` tags and lists; ``events.py`` the contact
events funnels react to, recorded in the transaction that caused them; ``facts.py`` what the
segment predicates (``segments.py``) evaluate; ``deletion.py`` a deletion that really ends things,
with ``erasure.py`` (personal data emptied everywhere, and the access export), both walking
``personal_data.py`` (the registry of where personal data is stored, with ``personal_match.py``
finding a person's rows and ``non_personal.py`` the reviewed rest of the schema) and
``erased_addresses.py`` (what suppression keeps of an erased address); ``csv_import.py`` the CSV
import as a bulk job with a per-row report (``import_report.py``: the row's values masked); ``channel_fields.py`` the fields each message channel
needs to reach a contact.
"""
