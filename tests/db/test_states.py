"""Entity states are held by the schema: every status column has a CHECK constraint naming
exactly the states its entity's module declares, in the models and in the migrated database;
the state diagrams in ``docs/states.md`` are the ones the transition tables draw."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal

import pytest
from alembic import command
from sqlalchemy import CheckConstraint, String, inspect, select, update
from sqlalchemy.ext.asyncio import create_async_engine

from app import state_diagrams
from app.db.migrate import alembic_config, upgrade
from app.db.states import REGISTRY, InvalidTransition, StateMachine, literal_states
from app.models import metadata
from app.runtime import Runtime
from app.scheduling.job_states import JOB_DONE, JOB_QUEUED, JOB_RUNNING, JOBS
from app.scheduling.models import Job
from tests.conftest import TEST_DATABASE_URL, _create_pg_database, _drop_pg_database, is_postgres

STATE_COLUMN = re.compile(r"^(status|state|\w+_state)$")


def _state_columns() -> list[tuple[str, str]]:
    return sorted(
        (table.name, column.name)
        for table in metadata.sorted_tables
        for column in table.columns
        if STATE_COLUMN.match(column.name) and isinstance(column.type, String)
    )


def _states_in(sql: str) -> set[str]:
    """The quoted states a CHECK's text names, whatever the dialect made of it."""
    return set(re.findall(r"'([a-z_]+)'", sql))


def test_every_status_column_has_a_declared_machine() -> None:
    assert _state_columns(), "no status column found: the pattern is wrong"
    missing = [key for key in _state_columns() if key not in REGISTRY]
    assert not missing, f"status columns without a states module: {missing}"
    unknown = [key for key in REGISTRY if key not in _state_columns()]
    assert not unknown, f"states modules naming no status column: {unknown}"


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=lambda k: ".".join(k))
def test_model_check_constraint_names_exactly_the_literal(key: tuple[str, str]) -> None:
    machine = REGISTRY[key]
    table = metadata.tables[machine.table]
    checks = [
        str(c.sqltext)
        for c in table.constraints
        if isinstance(c, CheckConstraint) and str(c.sqltext).startswith(f"{machine.column} IN")
    ]
    assert checks == [machine.check_sql]
    assert _states_in(checks[0]) == set(machine.states)


async def test_migrated_database_checks_name_exactly_the_states(database_url: str) -> None:
    """The migrations built the same constraints the models declare (alembic's own comparison
    does not look at CHECK constraints)."""
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            found = await conn.run_sync(
                lambda sync: {
                    key: [
                        c["sqltext"]
                        for c in inspect(sync).get_check_constraints(key[0])
                        if re.match(rf"\(*{key[1]}\b", c["sqltext"])
                    ]
                    for key in REGISTRY
                }
            )
    finally:
        await engine.dispose()
    for key, machine in REGISTRY.items():
        assert len(found[key]) == 1, (key, found[key])
        assert _states_in(found[key][0]) == set(machine.states), key


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=lambda k: ".".join(k))
def test_every_state_is_reachable_from_a_creation_state(key: tuple[str, str]) -> None:
    machine = REGISTRY[key]
    reached, frontier = set(machine.initial), list(machine.initial)
    while frontier:
        for new in machine.transitions.get(frontier.pop(), ()):
            if new not in reached:
                reached.add(new)
                frontier.append(new)
    assert reached == set(machine.states)


def test_docs_states_md_is_what_the_code_declares() -> None:
    """Fails when a state or a transition changed without ``python -m app.state_diagrams``."""
    assert state_diagrams.DOC.read_text(encoding="utf-8") == state_diagrams.render()
    assert state_diagrams.main(["--check"]) == 0


def test_every_machine_has_a_diagram_and_its_module_is_linked() -> None:
    doc = state_diagrams.DOC.read_text(encoding="utf-8")
    for machine in REGISTRY.values():
        module = state_diagrams.declaring_module(machine)
        assert module.endswith("states")
        assert f"`{machine.table}.{machine.column}`" in doc
        path = module.replace(".", "/") + ".py"
        assert (Path(state_diagrams.__file__).parent.parent / path).exists()
    assert doc.count("stateDiagram-v2") == len(REGISTRY)


def test_architecture_glossary_links_the_state_diagrams() -> None:
    architecture = state_diagrams.DOC.parent / "architecture.md"
    text = architecture.read_text(encoding="utf-8")
    assert "## Glossary" in text
    assert "(states.md)" in text


# -- the declaration itself --------------------------------------------------------------------

Colour = Literal["red", "amber", "green"]


def _lights() -> StateMachine:
    REGISTRY.pop(("lights", "colour"), None)
    return StateMachine(
        table="lights",
        column="colour",
        title="Lights",
        states=literal_states(Colour),
        initial=("red",),
        transitions={"red": ("green",), "green": ("amber",), "amber": ("red",)},
    )


@pytest.fixture
def lights() -> Iterator[StateMachine]:
    machine = _lights()
    yield machine
    REGISTRY.pop(("lights", "colour"), None)


def test_check_and_where_are_built_from_the_states(lights: StateMachine) -> None:
    assert lights.check_sql == "colour IN ('red', 'amber', 'green')"
    assert lights.check().name == "colour"
    assert lights.where("red") == "colour = 'red'"
    assert lights.where("red", "amber", qualified=True) == "lights.colour IN ('red', 'amber')"
    assert lights.where("red", negate=True) == "colour != 'red'"
    with pytest.raises(ValueError, match="blue"):
        lights.where("blue")


def test_transitions_are_checked_against_the_table(lights: StateMachine) -> None:
    lights.require("red", "green")
    assert lights.sources("red") == ("amber",)
    with pytest.raises(InvalidTransition, match="red → amber"):
        lights.require("red", "amber")
    assert lights.final == ()


def test_move_sets_a_declared_state_and_refuses_the_others(lights: StateMachine) -> None:
    class Row:
        colour = "red"

    row = Row()
    lights.move(row, "red")  # the state it has: nothing moves
    lights.move(row, "green")
    assert row.colour == "green"
    with pytest.raises(InvalidTransition, match="green → red"):
        lights.move(row, "red")
    assert row.colour == "green"


def test_create_names_only_a_creation_state(lights: StateMachine) -> None:
    assert lights.create("red") == {"colour": "red"}
    with pytest.raises(InvalidTransition, match="not created green"):
        lights.create("green")


def test_set_sql_names_a_state_some_move_reaches(lights: StateMachine) -> None:
    assert lights.set_sql("green") == "colour = 'green'"
    assert lights.set_sql("amber", qualified="l") == "l.colour = 'amber'"
    REGISTRY.pop(("lights", "colour"), None)
    unreachable = StateMachine(
        table="lights",
        column="colour",
        title="Lights",
        states=literal_states(Colour),
        initial=("red",),
        transitions={"red": ("green",)},
    )
    with pytest.raises(InvalidTransition, match="no move reaches amber"):
        unreachable.set_sql("amber")


def test_transition_guards_the_update_with_the_declared_sources() -> None:
    statement = JOBS.transition(update(Job).where(Job.id == 7), JOB_DONE).values(finished_at=None)
    sql = str(statement.compile(compile_kwargs={"literal_binds": True}))
    assert "SET status='done', finished_at=NULL" in sql
    # Written so that no partial index of the source states can answer it (where_keyed).
    assert "jobs.id = 7 AND (jobs.status || '') IN ('queued', 'running')" in sql
    narrowed = JOBS.transition(update(Job), JOB_DONE, from_=[JOB_RUNNING])
    assert "(jobs.status || '') IN ('running')" in str(
        narrowed.compile(compile_kwargs={"literal_binds": True})
    )
    with pytest.raises(InvalidTransition, match="done → queued"):
        JOBS.transition(update(Job), JOB_QUEUED, from_=[JOB_DONE])


async def test_a_guarded_transition_leaves_a_row_in_another_state(runtime: Runtime) -> None:
    now = runtime.clock.now()
    async with runtime.db.write() as uow:
        for job_id in ("a", "b"):
            fields = {"name": "noop", "queue": "q", "payload": b"", "max_tries": 1}
            uow.session.add(
                Job(id=job_id, run_at=now, created_at=now, **fields, **JOBS.create(JOB_QUEUED))
            )
        await uow.session.flush()
        claimed = await uow.session.execute(
            JOBS.transition(update(Job).where(Job.id == "b"), JOB_RUNNING)
        )
        finished = await uow.session.execute(
            JOBS.transition(update(Job), JOB_DONE, from_=[JOB_RUNNING])
        )
    assert (claimed.rowcount, finished.rowcount) == (1, 1)  # type: ignore[attr-defined]
    async with runtime.db.read() as session:
        rows = {r.id: r.status for r in await session.execute(select(Job.id, Job.status))}
    assert rows == {"a": JOB_QUEUED, "b": JOB_DONE}


def test_a_transition_to_an_undeclared_state_is_refused() -> None:
    with pytest.raises(ValueError, match="blue"):
        StateMachine(
            table="lights_bad",
            column="colour",
            title="Lights",
            states=literal_states(Colour),
            initial=("red",),
            transitions={"red": ("blue",)},
        )
    assert ("lights_bad", "colour") not in REGISTRY


def test_literal_states_needs_a_literal_of_strings() -> None:
    with pytest.raises(TypeError):
        literal_states(int)


# -- the migration -------------------------------------------------------------------------------


@pytest.fixture
async def fresh_url(tmp_path: Path) -> AsyncIterator[str]:
    if is_postgres():
        url = await _create_pg_database(TEST_DATABASE_URL)
        yield url
        await _drop_pg_database(url)
    else:
        yield f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"


async def test_state_checks_migration_downgrades_and_upgrades_again(fresh_url: str) -> None:
    await upgrade(fresh_url)
    config = alembic_config(fresh_url)

    async def checked_tables() -> set[str]:
        engine = create_async_engine(fresh_url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(
                    lambda sync: {
                        table
                        for table, column in REGISTRY
                        if any(
                            re.match(rf"\(*{column}\b", c["sqltext"])
                            for c in inspect(sync).get_check_constraints(table)
                        )
                    }
                )
        finally:
            await engine.dispose()

    assert await checked_tables() == {table for table, _ in REGISTRY}
    await asyncio.to_thread(command.downgrade, config, "0670_state_checks-1")
    assert "funnel_runs" not in await checked_tables()
    assert "jobs" in await checked_tables()  # an older migration's constraint stays
    await upgrade(fresh_url)
    assert await checked_tables() == {table for table, _ in REGISTRY}
