"""FN-31, FN-32: the consent gate is the only reader of a contact's consent and suppression.

Senders ask :mod:`app.engines.funnels.consent`; they never read ``Contact.suppressed`` /
``Contact.consent`` nor the erased addresses' hashes themselves, so no sender can grow a check of
its own that forgets a rule (a topic, an erased address). This walks the syntax tree of every
module of ``app/`` and fails on a read anywhere but in the gate and the places that **write**
suppression or consent (the contact store, the preference page, delivery-report ingestion,
erasure) or define or present the columns. The checker is proven on injected violations below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_paused")

APP = Path(__file__).resolve().parents[4] / "app"

GUARDED_ATTRIBUTES = frozenset({"suppressed", "consent"})
ERASED_READERS = frozenset({"recall", "ErasedAddress"})

ALLOWED: dict[str, str] = {
    "engines/funnels/consent/policy.py": "the gate's decision",
    "engines/funnels/consent/gate.py": "the gate's reader",
    "engines/funnels/models.py": "defines the columns",
    "engines/funnels/contacts/store.py": "writes what the API and imports set",
    "engines/funnels/contacts/erased_addresses.py": "keeps the erased addresses' suppression",
    "engines/funnels/contacts/erasure.py": "erasure",
    "engines/funnels/contacts/deletion.py": "erasure",
    "engines/funnels/outbox/records/preferences.py": "writes the contact's choice (unsubscribe pages)",
    "engines/funnels/events/ingest.py": "writes bounces and complaints from delivery reports",
    "engines/funnels/schemas.py": "the contact's record in and out of the API",
}
"""Modules allowed to touch the guarded data, and why."""


def violations(source: str, name: str = "<module>") -> list[str]:
    """Where ``source`` reads consent or suppression itself (``line: what``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, name)):
        if (isinstance(node, ast.Attribute) and node.attr in GUARDED_ATTRIBUTES) or (
            isinstance(node, ast.Attribute) and node.attr in ERASED_READERS
        ):
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ERASED_READERS:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom) and any(
            alias.name in ERASED_READERS for alias in node.names
        ):
            found.append(f"{node.lineno}: imports {[a.name for a in node.names]}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "setattr"}
            and any(
                isinstance(a, ast.Constant) and a.value in GUARDED_ATTRIBUTES for a in node.args
            )
        ):
            found.append(f"{node.lineno}: {node.func.id}(…)")
    return found


def test_fn31_fn32_no_module_but_the_gate_and_the_writers_reads_consent_or_suppression() -> None:
    offenders = {}
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP).as_posix()
        if relative in ALLOWED or relative.startswith("migrations/"):
            continue
        found = violations(path.read_text(), relative)
        if found:
            offenders[relative] = found
    assert offenders == {}, (
        "read consent/suppression through app.engines.funnels.consent (the gate), not directly"
    )


def test_every_allowed_module_exists() -> None:
    """A renamed module cannot leave a stale hole in the rule."""
    assert [m for m in ALLOWED if not (APP / m).is_file()] == []


def test_the_checker_catches_injected_violations() -> None:
    """Each way a sender could read the guarded data itself is caught (and clean code is not)."""
    injected = {
        "if contact.suppressed.get('email'): return": ".suppressed",
        "if row.consent.get('email') == 'withdrawn': return": ".consent",
        "select(Contact.suppressed, Contact.email)": ".suppressed",
        "from app.engines.funnels.contacts.erased_addresses import recall": "imports",
        "await erased_addresses.recall(session, key, contacts)": ".recall",
        "select(ErasedAddress)": "ErasedAddress",
        "getattr(contact, 'suppressed')": "getattr",
    }
    for source, what in injected.items():
        found = violations(source)
        assert len(found) == 1, (source, found)
        assert what in found[0], (source, found)
    assert violations("decide(message_of(e.channel, e.payload), people[e.contact_id], now)") == []


def test_the_checker_catches_a_violation_injected_into_the_deliverer() -> None:
    """The real deliverer with one line of its own suppression check added is an offender."""
    source = (APP / "engines/funnels/outbox/work/deliver.py").read_text()
    assert violations(source) == []
    tampered = source.replace(
        "    async def _prepare(",
        "    def _own_check(self, contact: Any) -> bool:\n"
        "        return bool(contact.suppressed.get('email'))\n\n"
        "    async def _prepare(",
    )
    assert tampered != source
    assert [v.split(": ")[1] for v in violations(tampered)] == [".suppressed"]
