"""Every ``httpx.AsyncClient`` of the product comes from the one factory
(:func:`app.integrations.http_guard.outbound_client`), PL-16: a module that builds its own would
escape the settings, the address guard, the user agent and the lost-lease check."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_paused")

APP = Path(__file__).resolve().parents[2] / "app"
FACTORY = APP / "integrations" / "http_guard" / "client.py"
CLIENT_CLASSES = frozenset({"AsyncClient", "TracedClient"})

ALLOWED_TREES = {
    APP / "sandbox": "the simulators stand for the outside world: their callbacks are a "
    "provider's requests, not the product's outbound calls",
}


def _built_clients(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in CLIENT_CLASSES:
            lines.append(node.lineno)
    return lines


def _allowed(path: Path) -> bool:
    return path == FACTORY or any(path.is_relative_to(tree) for tree in ALLOWED_TREES)


def test_only_the_factory_constructs_http_clients() -> None:
    offenders = [
        f"{path.relative_to(APP.parent)}:{line}"
        for path in sorted(APP.rglob("*.py"))
        if not _allowed(path)
        for line in _built_clients(path)
    ]
    assert not offenders, f"build clients with outbound_client(), not directly: {offenders}"


def test_the_guard_sees_a_client_built_anywhere(tmp_path: Path) -> None:
    """The check itself: both spellings of a construction are found, a mere mention is not."""
    module = tmp_path / "rogue.py"
    module.write_text(
        "import httpx\nfrom httpx import AsyncClient\n"
        "a = httpx.AsyncClient(timeout=5)\nb = AsyncClient()\nc = httpx.AsyncClient\n"
    )
    assert _built_clients(module) == [3, 4]
    assert _built_clients(FACTORY), "the factory itself builds the client"
