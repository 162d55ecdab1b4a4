"""Tenancy by construction: a statement on a workspace's rows starts from ``app/db/tenancy.py``,
and the linter ``.ci/tenancy_lint.py`` (run by ``make lint``) refuses a bare ``select``/
``update``/``delete``/``exists`` of a workspace-owned table outside its reasoned allow-list. It
runs here on the real tree, and on injected violations, so a forgotten filter fails the suite."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import delete, exists, select, update

from app.db.tenancy import scoped_delete, scoped_exists, scoped_select, scoped_update
from app.engines.funnels.models import Contact, Tag

pytestmark = pytest.mark.usefixtures("collector_paused")

REPO = Path(__file__).resolve().parents[1]
LINTER = REPO / ".ci" / "tenancy_lint.py"


def _load_linter() -> ModuleType:
    sys.path.insert(0, str(LINTER.parent))
    spec = importlib.util.spec_from_file_location("tenancy_lint", LINTER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tenancy_lint"] = module  # its dataclass looks its module up while being built
    spec.loader.exec_module(module)
    return module


linter = _load_linter()
OWNED = linter.workspace_owned_classes()


def _findings(source: str, path: str = "app/engines/funnels/example.py") -> list[str]:
    header = "from sqlalchemy import delete, exists, select, update\n"
    return [str(f) for f in linter.check_source(path, header + source, OWNED)]


def test_the_tree_passes_the_tenancy_linter() -> None:
    found = subprocess.run(
        [sys.executable, str(LINTER)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert found.returncode == 0, found.stdout + found.stderr


def test_every_table_with_a_workspace_column_is_workspace_owned() -> None:
    assert {"Contact", "Rule", "Schedule", "Campaign", "Funnel"} <= OWNED
    assert "Workspace" not in OWNED  # the workspace itself has no workspace_id


@pytest.mark.parametrize(
    "statement",
    [
        "select(Contact).where(Contact.id == 1)",
        "select(Contact.email).where(Contact.workspace_id == ws)",  # by hand: still refused
        "select(func.count()).select_from(Contact)",
        "update(Contact).values(email=None)",
        "delete(Contact).where(Contact.id == 1)",
        "select(exists().where(Contact.id == 1))",
        "sa.select(Contact)",
    ],
)
def test_a_bare_statement_on_a_workspace_table_is_refused(statement: str) -> None:
    found = _findings(f"async def read(ws):\n    return {statement}\n")
    assert len(found) >= 1
    assert "Contact" in found[0]
    assert "example.py:3 (read)" in found[0]


@pytest.mark.parametrize(
    "statement",
    [
        "scoped_select(Contact, ws).where(Contact.id == 1)",
        "scoped_select(Contact, ws, func.count())",
        "scoped_update(Contact, ws).values(email=None)",
        "scoped_delete(Contact, ws).where(Contact.id == 1)",
        "select(scoped_exists(Contact, ws, Contact.id == 1))",
        "scoped_select(Tag, ws).where(Tag.id.in_(scoped_select(Contact, ws, Contact.id)))",
        "select(Workspace).where(Workspace.id == ws)",  # not workspace-owned
    ],
)
def test_a_scoped_statement_passes(statement: str) -> None:
    assert _findings(f"async def read(ws):\n    return {statement}\n") == []


def test_a_filter_by_hand_on_a_table_held_in_a_variable_is_refused() -> None:
    """The model's name is not in the statement, but its ``workspace_id`` is."""
    found = _findings(
        "def read(kind, ws):\n    return select(kind.model.id).where(kind.model.workspace_id == ws)\n"
    )
    assert len(found) == 1
    assert "kind.model" in found[0]


def test_a_core_table_of_a_workspace_model_is_workspace_owned() -> None:
    source = "_CONTACTS = cast(Table, Contact.__table__)\n\ndef read():\n    return select(_CONTACTS.c.id)\n"
    found = _findings(source)
    assert len(found) == 1
    assert "_CONTACTS" in found[0]


def test_a_bare_subquery_inside_a_scoped_statement_is_refused() -> None:
    statement = "scoped_select(Tag, ws).where(Tag.id.in_(select(Contact.id)))"
    found = _findings(f"def read(ws):\n    return {statement}\n")
    assert len(found) == 1
    assert "select() on workspace-owned Contact" in found[0]


def test_the_allow_list_covers_its_function_only() -> None:
    source = "async def claim_due(ws):\n    return select(Contact)\n\ndef other():\n    return select(Contact)\n"
    path = "app/engines/ranktracking/alerts/report.py"  # allows claim_due only
    found = _findings(source, path)
    assert len(found) == 1
    assert "(other)" in found[0]


def test_every_allow_list_entry_has_a_reason_and_exists() -> None:
    assert all(reason.strip() for reason in linter.ALLOWED.values())
    assert linter.stale_entries() == []


def test_the_linter_runs_with_the_other_linters() -> None:
    assert "tenancy_lint.py" in (REPO / "Makefile").read_text()


def test_the_helpers_build_the_filter_written_by_hand() -> None:
    """Same SQL as the hand-written statements they replaced (no behaviour change)."""
    pairs = [
        (scoped_select(Contact, 7), select(Contact).where(Contact.workspace_id == 7)),
        (
            scoped_select(Tag, 7, Tag.name),
            select(Tag.name).where(Tag.workspace_id == 7),
        ),
        (
            scoped_update(Tag, 7).values(name="x"),
            update(Tag).where(Tag.workspace_id == 7).values(name="x"),
        ),
        (scoped_delete(Tag, 7), delete(Tag).where(Tag.workspace_id == 7)),
        (
            select(scoped_exists(Tag, 7, Tag.name == "a")),
            select(exists().where(Tag.workspace_id == 7, Tag.name == "a")),
        ),
    ]
    for scoped, by_hand in pairs:
        assert str(scoped.compile(compile_kwargs={"literal_binds": True})) == str(
            by_hand.compile(compile_kwargs={"literal_binds": True})
        )
