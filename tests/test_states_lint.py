"""States by construction: a ``status``/``state`` column is written only through its machine
(``app/db/states.py``), and the linter ``.ci/states_lint.py`` (run by ``make lint``) refuses a
write around it. It runs here on injected violations, so a write that bypasses the declared
moves fails the suite."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.usefixtures("collector_paused")

REPO = Path(__file__).resolve().parents[1]
LINTER = REPO / ".ci" / "states_lint.py"


def _load_linter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("states_lint", LINTER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


linter = _load_linter()
COLUMNS, CLASSES = linter.machines()


def _findings(source: str, path: str = "app/engines/funnels/example.py") -> list[str]:
    return list(linter.check_source(path, source, COLUMNS, CLASSES))


def test_the_tree_writes_every_state_through_its_machine() -> None:
    found = subprocess.run(
        [sys.executable, str(LINTER)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert found.returncode == 0, found.stdout + found.stderr


def test_the_machines_are_read_from_the_models() -> None:
    assert {"status", "state", "reservation_state"} <= COLUMNS
    assert {"Job", "BulkJob", "Campaign"} <= CLASSES


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("run.status = 'done'\n", "assigns .status"),
        ("scan.reservation_state = X\n", "assigns .reservation_state"),
        ("stmt = update(Job).values(status=DONE)\n", ".values() writes status"),
        ("stmt = update(Job).values({'state': 'x'})\n", ".values() writes state"),
        ("job = Job(id=1, status='queued')\n", "Job(status=...)"),
        ("SQL = \"UPDATE jobs SET status = 'done'\"\n", "SQL text names a state"),
        ("SQL = f\"WHERE status IN ('{A}', '{B}')\"\n", "SQL text names a state"),
        ("CLAIM = Claim(sets={'state': SENDING, 'attempts': 'attempts + 1'})\n", "a claim sets"),
        # A state test a partial index could answer, in a statement that finds rows by key.
        (
            'SQL = f"UPDATE o SET x = 1 WHERE id = ANY($1) AND {OUTBOX.where(PENDING)}"\n',
            "SQL text finding rows by id tests its state with where()",
        ),
        (
            "stmt = select(Run).where(Run.id.in_(ids), Run.owner == me, Run.status == ACTIVE)\n",
            "a statement found by key tests its state with where()",
        ),
        (
            "stmt = update(Run).where(and_(tuple_(Run.id, Run.x).in_(p), Run.status.in_(S)))\n",
            "a statement found by key tests its state with where()",
        ),
        ("CLAIM = Claim(held=JOBS.where(RUNNING))\n", "a claim's renewal (found by key)"),
    ],
)
def test_a_write_around_the_machine_is_refused(source: str, said: str) -> None:
    found = _findings(source)
    assert len(found) == 1
    assert said in found[0]
    assert found[0].startswith("app/engines/funnels/example.py:1:")


@pytest.mark.parametrize(
    "source",
    [
        "RUNS.move(run, DONE)\n",
        "stmt = JOBS.transition(update(Job).where(Job.id == 1), DONE).values(finished_at=now)\n",
        "job = Job(id=1, **JOBS.create(QUEUED))\n",
        "CLAIM = Claim(sets={**claim_moves(JOBS, RUNNING), 'attempts': 'attempts + 1'})\n",
        'SQL = f"UPDATE jobs SET {JOBS.set_sql(DONE)} WHERE {JOBS.where(RUNNING)}"\n',
        '"""A docstring may say status = \'done\' in prose."""\n',
        'SQL = f"UPDATE o SET x = 1 WHERE id = ANY($1) AND {OUTBOX.where_keyed(PENDING)}"\n',
        "stmt = select(Run).where(Run.id.in_(ids), RUNS.keyed(ACTIVE))\n",
        "CLAIM = Claim(held=JOBS.where_keyed(RUNNING))\n",
        # Looking for due rows: the partial index is what the state test is for.
        'SQL = f"SELECT id FROM o WHERE {OUTBOX.where(PENDING)} AND next_attempt_at <= :now"\n',
        "stmt = select(Run).where((Run.id == 1) | (Run.status == ACTIVE))\n",  # not by key
        "stmt = select(A).where(A.id == B.a_id, B.status == DONE)\n",  # another table's state
        # The id is another statement's (a WITH before), not this WHERE's.
        'SQL = f"WITH c AS (SELECT id FROM c WHERE id = $1) UPDATE r SET x = 1 '
        'WHERE campaign_id = (SELECT id FROM c) AND {R.where(PENDING)}"\n',
        "out = RunOut(status=run.status)\n",  # a response shape, not a row
        "response = Response(status=200)\n",
    ],
)
def test_writes_through_the_machine_and_other_statuses_pass(source: str) -> None:
    assert _findings(source) == []
