"""Real calls, with a client generated from the API's OpenAPI document, against a running server.

``.ci/client-check`` serves the demo workspace, writes the document, generates a client with
``openapi-python-client`` and runs this module with the generated package's directory on
``sys.path``. Every operation of the document is called once through the generated client (GETs
first, so the ids they list feed the calls that need one; then the writes; the deletions last,
on objects the run created itself, so the key it uses is never revoked). The run fails when an
operation is missing from the generated client, when one answers 5xx or a status the document
does not list, or when an answer does not decode into the generated models. It prints how many
operations were generated and called, and which answered 4xx (an input the API refused).

Not collected by pytest (it needs the generated client); run it with ``python -m``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.contract.valid_input import BODIES, PATH_VALUES, QUERY_VALUES, Known

_METHOD_URL = re.compile(r'"method": "(\w+)",\s*"url": "([^"]+)"')
_PARAM = re.compile(r"\{(\w+)\}")
# Calls whose effect ends what later calls need (a schedule ended, a campaign cancelled, every
# rule stopped, the demo's Meta token replaced): made after the other writes.
_LATE_SUFFIXES = (
    "/end",
    "/cancel",
    "/deactivate",
    "/discard",
    "/adrules/stop",
    "/rotate",
    "/meta-token",
)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    schema: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.method.upper()} {self.path}"


@dataclass
class Outcome:
    status: int | None = None
    problem: str | None = None
    said: str = ""


@dataclass
class Run:
    document: dict[str, Any]
    modules: dict[tuple[str, str], ModuleType]
    client: Any
    package: str
    known: Known = field(default_factory=Known)
    outcomes: dict[str, Outcome] = field(default_factory=dict)


def document_operations(document: dict[str, Any]) -> list[Operation]:
    return [
        Operation(method, path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def generated_modules(package: str) -> dict[tuple[str, str], ModuleType]:
    """The generated client's operation modules by (method, path template)."""
    api = importlib.import_module(f"{package}.api")
    found: dict[tuple[str, str], ModuleType] = {}
    for info in pkgutil.walk_packages(api.__path__, f"{package}.api."):
        module = importlib.import_module(info.name)
        if not hasattr(module, "sync_detailed"):
            continue
        match = _METHOD_URL.search(inspect.getsource(module))
        if match:
            found[(match.group(1), match.group(2))] = module
    return found


def _ordered(operations: list[Operation]) -> Iterator[Operation]:
    def depth(op: Operation) -> int:
        return len(_PARAM.findall(op.path))

    reads = [op for op in operations if op.method == "get"]
    writes = [op for op in operations if op.method in ("post", "put", "patch")]
    late = [op for op in writes if op.path.endswith(_LATE_SUFFIXES)]
    deletes = [op for op in operations if op.method == "delete"]
    yield from sorted(reads, key=depth)
    yield from sorted((op for op in writes if op not in late), key=depth)
    yield from late
    yield from sorted(deletes, key=depth, reverse=True)
    # A second look: what the writes created (a rule's batch, a funnel's runs) is there now.
    yield from sorted(reads, key=depth)


def _path_value(run: Run, op: Operation, name: str, concrete: str) -> Any:
    special = PATH_VALUES.get(name)
    if special is not None:
        value = special(run.known, op.path)
        if value is not None:
            return value
    collection = concrete
    if op.method == "delete" and op.path.endswith("{" + name + "}"):
        # Deletions remove what the run created; never what it found (its own key among them).
        return run.known.created.get(collection, 2**31 - 1)
    found = run.known.listed.get(collection) or run.known.created.get(collection)
    if found is None:
        found = run.known.by_name.get(name)
    return found if found is not None else 2**31 - 1


def _arguments(run: Run, op: Operation, module: ModuleType) -> dict[str, Any]:
    signature = inspect.signature(module.sync_detailed)
    kwargs: dict[str, Any] = {"client": run.client}
    concrete = ""
    for segment in op.path.split("/")[1:]:
        match = _PARAM.fullmatch(segment)
        if match:
            value = _path_value(run, op, match.group(1), concrete)
            kwargs[match.group(1)] = value
            concrete += f"/{value}"
        else:
            concrete += f"/{segment}"
    for name, parameter in signature.parameters.items():
        if name in kwargs or name == "client":
            continue
        if name == "body":
            kwargs["body"] = _body(run, op, parameter.annotation)
        elif parameter.default is inspect.Parameter.empty:
            kwargs[name] = QUERY_VALUES[name](run.known)
    return kwargs


def _body(run: Run, op: Operation, annotation: Any) -> Any:
    model = _resolve(annotation, run.package)
    maker = BODIES.get((op.method, op.path))
    data = maker(run.known) if maker else {}
    return model.from_dict(data)


def _resolve(annotation: Any, package: str) -> Any:
    """The generated model class of a ``body`` annotation (a class, or its name in a string)."""
    if isinstance(annotation, types.UnionType):
        # An optional body (``Model | Unset``): the generated model among the members.
        return next(m for m in typing.get_args(annotation) if hasattr(m, "from_dict"))
    if not isinstance(annotation, str):
        return annotation
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", annotation).lower()
    module = importlib.import_module(f"{package}.models.{snake}")
    return getattr(module, annotation)


def _harvest(run: Run, op: Operation, concrete: str, response: Any) -> None:
    try:
        data = json.loads(response.content) if response.content else None
    except ValueError:
        return
    run.known.remember(op.method, concrete, data)


def call(run: Run, op: Operation) -> None:
    module = run.modules.get((op.method, op.path))
    if module is None:
        run.outcomes[op.label] = Outcome(problem="missing from the generated client")
        return
    previous = run.outcomes.get(op.label)
    if previous is not None and previous.problem:
        return
    try:
        kwargs = _arguments(run, op, module)
    except Exception as exc:  # a body the generated model refuses, named in the report
        run.outcomes[op.label] = Outcome(problem=f"no call made: {type(exc).__name__}: {exc}")
        return
    concrete = _concrete(op.path, kwargs)
    try:
        response = module.sync_detailed(**kwargs)
    except Exception as exc:  # an undecodable or undocumented answer, named in the report
        run.outcomes[op.label] = Outcome(problem=f"{type(exc).__name__}: {exc}"[:300])
        return
    status = int(response.status_code)
    outcome = Outcome(status=status)
    if status >= 500:
        outcome.problem = f"{status}: {response.content[:300]!r}"
    elif 200 <= status < 300:
        _harvest(run, op, concrete, response)
    else:
        outcome.said = _said(response.parsed)
    if previous is None or outcome.problem or status < (previous.status or 0):
        run.outcomes[op.label] = outcome


def _said(error: Any) -> str:
    """The error body's message and first field problem, for the report."""
    message = str(getattr(error, "message", ""))
    details = getattr(error, "details", None) or []
    if details:
        first = details[0].to_dict() if hasattr(details[0], "to_dict") else details[0]
        message += f" {first}"
    return message[:200]


def _concrete(path: str, kwargs: dict[str, Any]) -> str:
    return _PARAM.sub(lambda m: str(kwargs[m.group(1)]), path)


def _client(package: str, base_url: str, key: str) -> Any:
    client_module = importlib.import_module(f"{package}.client")
    return client_module.AuthenticatedClient(
        base_url=base_url, token=key, raise_on_unexpected_status=True, timeout=30.0
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--document", type=Path, required=True)
    parser.add_argument("--client-dir", type=Path, required=True, help="holds the package")
    parser.add_argument("--package", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.client_dir))
    document = json.loads(args.document.read_text())
    operations = document_operations(document)
    run = Run(
        document=document,
        modules=generated_modules(args.package),
        client=_client(args.package, args.base_url, args.key),
        package=args.package,
    )
    for op in _ordered(operations):
        call(run, op)
    return report(run, operations)


def report(run: Run, operations: list[Operation]) -> int:
    generated = sum(1 for op in operations if (op.method, op.path) in run.modules)
    called = [o for o in run.outcomes.values() if o.status is not None]
    refused = {label: o for label, o in run.outcomes.items() if (o.status or 0) >= 400}
    problems = {label: o.problem for label, o in run.outcomes.items() if o.problem}
    print(f"operations in the document: {len(operations)}")
    print(f"generated in the client:    {generated}")
    print(f"called with the client:     {len(called)}")
    print(f"answered 2xx:               {sum(1 for o in called if (o.status or 0) < 300)}")
    print(f"answered 4xx:               {sum(1 for o in refused.values() if not o.problem)}")
    for label, o in sorted(refused.items()):
        print(f"  {o.status} {label}: {o.said}")
    for label, problem in sorted(problems.items()):
        print(f"FAIL {label}: {problem}")
    return 1 if problems or generated < len(operations) or len(called) < len(operations) else 0


if __name__ == "__main__":
    raise SystemExit(main())
