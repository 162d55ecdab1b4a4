"""The API's OpenAPI document is one a client generator accepts (PL-11): every schema component
has a name of its own, and every reference points at a component that is there.

Litestar names a struct's component after the struct's class name; when two structs of different
modules share a name it quietly names both after their module paths (``ranktracking_schemas_RunOut``
next to ``funnels_schemas_RunOut``), and client generators that name their classes after the
schema's title refuse the second one and drop every schema that refers to it. So the check walks
Litestar's own schema generation and fails on any two structs competing for one name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import msgspec
from litestar import Litestar, get

# Litestar's schema generation, walked as the document is built; not a public API (the test
# fails loudly if it moves).
from litestar._openapi.datastructures import OpenAPIContext
from litestar._openapi.path_item import create_path_item_for_route
from litestar._openapi.plugin import OpenAPIPlugin

from app.settings import Settings
from app.web.app import create_app


def competing_component_names(app: Litestar) -> dict[str, list[str]]:
    """Component names that more than one type asked for, with the types (module-qualified)."""
    plugin = app.plugins.get(OpenAPIPlugin)
    context = OpenAPIContext(openapi_config=plugin.openapi_config, plugins=app.plugins.openapi)
    for route in plugin.included_routes.values():
        create_path_item_for_route(context, route)
    groups = context.schema_registry._model_name_groups
    return {
        name: [".".join(registered.key) for registered in group]
        for name, group in groups.items()
        if len(group) > 1
    }


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def missing_components(document: dict[str, Any]) -> set[str]:
    """References that point at no schema component."""
    schemas = document.get("components", {}).get("schemas", {})
    prefix = "#/components/schemas/"
    return {
        ref
        for ref in _references(document)
        if ref.startswith(prefix) and ref[len(prefix) :] not in schemas
    }


def names_alike(document: dict[str, Any]) -> dict[str, list[str]]:
    """Components that become one class in a generated client. A generator names the class after
    the schema's ``title`` when it has one (``Page[ApiKeyOut]`` becomes ``PageApiKeyOut``), else
    after the component's name; ``RunOut``, ``Run_Out`` and ``run_out`` are one class name."""
    alike: defaultdict[str, list[str]] = defaultdict(list)
    for name, schema in document["components"]["schemas"].items():
        title = schema.get("title") or name
        alike[re.sub(r"[^a-z0-9]", "", title.lower())].append(name)
    return {key: names for key, names in alike.items() if len(names) > 1}


def test_every_struct_of_the_api_has_a_component_name_of_its_own_pl11(
    settings: Settings,
) -> None:
    app = create_app(settings, background=False)
    assert competing_component_names(app) == {}
    document = app.openapi_schema.to_schema()
    assert names_alike(document) == {}
    # A name with a module path in it is what Litestar falls back to on a collision.
    assert [name for name in document["components"]["schemas"] if "_schemas_" in name] == []


def test_every_reference_of_the_document_points_at_a_component_pl11(settings: Settings) -> None:
    document = create_app(settings, background=False).openapi_schema.to_schema()
    assert sum(1 for _ in _references(document)) > 100
    assert missing_components(document) == set()


# Two structs of one name in different modules: what the check exists to catch.
_FIRST = msgspec.defstruct("RunOut", [("id", int)], module="app.engines.first.schemas")
_SECOND = msgspec.defstruct("RunOut", [("name", str)], module="app.engines.second.schemas")


@get("/first", sync_to_thread=False)
def _first() -> _FIRST:  # type: ignore[valid-type]
    return _FIRST(id=1)


@get("/second", sync_to_thread=False)
def _second() -> _SECOND:  # type: ignore[valid-type]
    return _SECOND(name="x")


def test_the_check_catches_two_structs_of_one_name_pl11() -> None:
    app = Litestar([_first, _second])
    assert competing_component_names(app) == {
        "RunOut": ["app.engines.first.schemas.RunOut", "app.engines.second.schemas.RunOut"]
    }
    document = app.openapi_schema.to_schema()
    # Litestar's fallback names are distinct; their titles are not, and a generator goes by those.
    assert set(document["components"]["schemas"]) == {
        "first_schemas_RunOut",
        "second_schemas_RunOut",
    }
    assert names_alike(document) == {"runout": ["first_schemas_RunOut", "second_schemas_RunOut"]}
    document["paths"]["/first"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"
    ] = {"$ref": "#/components/schemas/Gone"}
    assert missing_components(document) == {"#/components/schemas/Gone"}
