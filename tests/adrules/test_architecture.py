"""AR-19: the dispatcher cannot change an ad. Checked on the real import graph (the same check the
import-linter contract in ``pyproject.toml`` runs in CI), and on the read client's surface."""

from __future__ import annotations

import inspect

import grimp
import pytest

from app.integrations.meta import reader

DISPATCH_SIDE = [
    "app.engines.adrules.dispatch",
    "app.engines.adrules.claim",
    "app.engines.adrules.fetch",
    "app.engines.adrules.prefilters",
    "app.engines.adrules.schedule",
]
WRITE_SIDE = [
    "app.integrations.meta.writer",
    "app.engines.adrules.execute",
    "app.engines.adrules.worker",
]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("app")


@pytest.mark.parametrize("source", DISPATCH_SIDE)
def test_ar19_dispatch_modules_cannot_reach_the_write_client(
    graph: grimp.ImportGraph, source: str
) -> None:
    for forbidden in WRITE_SIDE:
        if forbidden in graph.modules:
            chain = graph.find_shortest_chain(importer=source, imported=forbidden)
            assert chain is None, f"{source} reaches {forbidden} via {chain}"


def test_ar19_the_reader_only_issues_reads() -> None:
    source = inspect.getsource(reader)
    # The one POST is the batch endpoint, and every sub-request it builds is a GET.
    assert source.count('"POST"') == 1
    assert '"method": "GET"' in source
    assert "writer" not in source.split('"""', 2)[2]
