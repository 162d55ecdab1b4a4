"""The README stays true: its environment table is the one the code describes, and it names the
two set-up commands."""

from __future__ import annotations

from pathlib import Path

from app.__main__ import environment_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_lists_every_environment_variable() -> None:
    assert environment_table() in README.read_text(), (
        "README's environment table is stale: run `python -m app env --update-readme README.md`"
    )


def test_readme_quick_start_is_two_commands() -> None:
    text = README.read_text()
    assert "make run" in text
    assert "make test" in text
