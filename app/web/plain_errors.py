"""How a validation error reads to a person: the field's label and what the field allows.

Every error a person can cause by typing reaches this module before it is shown, whether it comes
from msgspec (``Expected `int` >= 1 - at `$.schedule.minutes```), from Litestar, or from one of
our ``ValidationFailed`` details (``field`` + ``message``). Two tables make it one policy:

- **labels**: a field's machine path, indices left out (``tasks[].conditions[].value``), to the
  label its form shows (``Value``), with the unit a number is counted in and the shape a text must
  take; a form passes its own table, and a path no table knows is spelled out from its last name;
- **kinds**: the library's wording of each kind of error to a plain sentence saying what is
  allowed (``Expected `int` >= 1`` → "enter a whole number of minutes, 1 or more").

A message already written for people (our services' own) passes through unchanged. The machine
path stays available to programs (the API's ``field``); it never appears in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldText:
    """What a form calls a field, and what it accepts beyond the type's own bounds."""

    label: str
    unit: str = ""
    """What a whole number counts ("minutes"): "a whole number of minutes, 1 or more"."""
    shape: str = ""
    """What a text must look like when it does not ("enter times like 09:00, 17:30")."""


Label = str | FieldText
Labels = Mapping[str, Label]

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")
_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`")
_MISSING = re.compile(r"Object missing required field `([^`]+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `([^`]+)`")

# A list's entries are named by what one of them is: ``tasks[1]`` is "task 2".
_ENTRY_NOUNS = {
    "tasks": "task",
    "conditions": "condition",
    "nodes": "step",
    "steps": "step",
    "branches": "branch",
    "fields": "field",
    "keywords": "keyword",
    "recipients": "recipient",
    "hours": "hour",
    "account_ids": "account",
    "campaign_ids": "campaign id",
    "rows": "row",
    "items": "item",
    "locations": "location",
    "variants": "variant",
}

# Patterns our schemas use, said as the shape they ask for.
_PATTERN_SHAPES = {
    r"^([01][0-9]|2[0-3]):[0-5][0-9]$": "enter a time like 09:30 (hours 00 to 23)",
    r"^[0-9]{1,32}$": "enter digits only",
    r"^[A-Z]{1,3}$": "enter a column letter like B (capital letters, up to 3)",
    r"^[A-Za-z0-9_-]{10,100}$": (
        "paste the spreadsheet id from the sheet's address (10 to 100 letters, digits, - or _)"
    ),
    r"^[a-z]{2}(_[A-Z]{2})?$": "enter a locale like de_DE",
    r"^https?://[^\s]+$": "enter an address starting with https://",
    r"^[^@\s]+@[^@\s]+\.[^@\s]+$": "enter an e-mail address, with an @ and a domain",
}

_NUMBER_WORDS = {"int": "a whole number", "float": "a number", "decimal": "a number"}
_TYPE_WORDS = {
    "int": "enter a whole number",
    "float": "enter a number",
    "decimal": "enter a number, like 12 or 1.5",
    "str": "enter text",
    "bool": "choose yes or no",
    "array": "choose or enter a list of values",
    "object": "fill in this group of settings",
    "date": "enter a date like 2026-12-31",
    "datetime": "enter a date and time like 2026-12-31 09:00",
    "time": "enter a time like 09:30",
    "uuid": "enter an id in the form shown",
    "null": "leave this empty",
}
_FALLBACK = "this value is not one the field accepts"


def _bound(number: str) -> str:
    """``10080`` as "10,080", ``0.0`` as "0" (the library writes floats' bounds with a point)."""
    if re.fullmatch(r"-?\d+\.0", number):
        number = number[:-2]
    if re.fullmatch(r"-?\d+", number):
        return f"{int(number):,}"
    return number


def _number_sentence(kind: str, op: str, bound: str, unit: str) -> str:
    what = _NUMBER_WORDS.get(kind, "a number")
    if unit:
        what = f"{what} of {unit}"
    limit = _bound(bound)
    said = {
        ">=": f"{limit} or more",
        ">": f"more than {limit}",
        "<=": f"{limit} or less",
        "<": f"less than {limit}",
    }[op]
    return f"enter {what}, {said}"


def _length_sentence(kind: str, op: str, bound: str) -> str:
    n = int(bound)
    if kind == "str":
        if op == ">=":
            return "fill this in" if n == 1 else f"enter at least {n} characters"
        return f"enter at most {n:,} characters"
    if kind == "array":
        if op == ">=":
            return "choose or enter at least one" if n == 1 else f"choose or enter at least {n}"
        return f"choose or enter at most {n:,}"
    return "fill this in" if op == ">=" else f"keep this to at most {n:,}"


_KINDS: list[tuple[re.Pattern[str], Callable[[re.Match[str], FieldText], str]]] = [
    (
        re.compile(r"Expected `(int|float|decimal)` (>=|>|<=|<) (-?[\d.]+)"),
        lambda m, f: _number_sentence(m.group(1), m.group(2), m.group(3), f.unit),
    ),
    (
        re.compile(r"Expected `(str|array|object)` of length (>=|<=) (\d+)"),
        lambda m, f: _length_sentence(m.group(1), m.group(2), m.group(3)),
    ),
    (
        re.compile(r"Expected `str` matching regex '(.*)'", re.DOTALL),
        lambda m, f: f.shape or _PATTERN_SHAPES.get(m.group(1), "enter it in the form shown"),
    ),
    (
        re.compile(r"Expected `int` that is a multiple of (\d+)"),
        lambda m, f: f"enter a multiple of {m.group(1)}",
    ),
    (
        re.compile(r"Expected `(\w+)`(?:, got `\w+`)?"),
        lambda m, f: _typed(m.group(1), f),
    ),
    (re.compile(r"Invalid decimal string"), lambda m, f: _typed("decimal", f)),
    (re.compile(r"Invalid RFC3339 encoded date(?!time)"), lambda m, f: _TYPE_WORDS["date"]),
    (re.compile(r"Invalid RFC3339 encoded datetime"), lambda m, f: _TYPE_WORDS["datetime"]),
    (re.compile(r"Invalid RFC3339 encoded time"), lambda m, f: _TYPE_WORDS["time"]),
    (re.compile(r"Invalid enum value"), lambda m, f: "choose one of the options offered"),
    (re.compile(r"Invalid value"), lambda m, f: "choose one of the kinds offered"),
    (re.compile(r"Invalid UUID"), lambda m, f: _TYPE_WORDS["uuid"]),
    (re.compile(r"Object missing required field"), lambda m, f: "fill this in"),
    (re.compile(r"Number out of range"), lambda m, f: "enter a smaller number"),
    (re.compile(r"Invalid base64"), lambda m, f: "this value could not be read"),
]


def _typed(kind: str, field: FieldText) -> str:
    if kind == "str" and field.shape:
        return field.shape
    if kind in ("int", "float", "decimal") and field.unit:
        return f"{_TYPE_WORDS[kind].replace('a whole number', 'a whole number of ' + field.unit)}"
    return _TYPE_WORDS.get(kind, _FALLBACK)


# Wording that belongs to a library, never to be shown to a person.
LIBRARY_WORDING = re.compile(
    r"Expected `|Invalid (?:decimal|enum|value|RFC3339|UUID|base64)|msgspec|Object (?:missing|contains)"
)


def sentence(message: str, field: FieldText | None = None) -> str:
    """What the field allows, said plainly; a message already written for people is kept."""
    text = _AT_PATH.sub("", message).strip()
    spec = field or FieldText(label="")
    for pattern, say in _KINDS:
        if m := pattern.match(text):
            return say(m, spec)
    if LIBRARY_WORDING.search(text):
        return _FALLBACK
    return text


def split_path(field: str, message: str) -> tuple[str, str]:
    """The field a message is about: msgspec names a missing or unknown key in the message and
    the containing object in the path; the key belongs to the path."""
    path = field
    if m := _AT_PATH.search(message):
        inner = m.group(1)
        path = f"{path}.{inner}" if path and inner else (inner or path)
    for pattern in (_MISSING, _UNKNOWN):
        if m := pattern.search(message):
            path = f"{path}.{m.group(1)}" if path else m.group(1)
    return path, message


def _segments(path: str) -> list[tuple[str, int | None]]:
    """``tasks[0].conditions[1].value`` as ``[("tasks", 0), ("conditions", 1), ("value", None)]``."""
    out: list[tuple[str, int | None]] = []
    for name, index in _SEGMENT.findall(path):
        if name:
            out.append((name, None))
        elif out:
            out[-1] = (out[-1][0], int(index))
    return out


def generic_path(path: str) -> str:
    """The path with its indices left out: ``tasks[].conditions[].value``."""
    return ".".join(name + ("[]" if i is not None else "") for name, i in _segments(path))


def _spelled(name: str) -> str:
    return name.replace("_", " ").strip().capitalize() or "This field"


def field_text(path: str, labels: Labels) -> FieldText:
    """The label (and unit, shape) of ``path``: the form's entry for the whole path (indices
    left out, or the path without its last index), else for its first name, else its last name
    spelled out."""
    segments = _segments(path)
    generic = generic_path(path)
    candidates = [generic, generic.removesuffix("[]")]
    if segments:
        candidates.append(segments[0][0])
    for key in candidates:
        if key and (found := labels.get(key)) is not None:
            return found if isinstance(found, FieldText) else FieldText(label=found)
    last = segments[-1][0] if segments else ""
    return FieldText(label=_spelled(last))


def position(path: str) -> str:
    """Where in a list the field is, for people: "task 1, condition 2" (1-based)."""
    parts = []
    for name, index in _segments(path):
        if index is not None:
            parts.append(f"{_ENTRY_NOUNS.get(name, 'entry')} {index + 1}")
    return ", ".join(parts)


def plain_error(field: str, message: str, labels: Labels | None = None) -> str:
    """One error as a person reads it: "Run every: enter a whole number of minutes, 1 or more"."""
    path, message = split_path(field, message)
    if m := _UNKNOWN.search(message):
        return f"“{m.group(1)}” is not a setting this form knows: leave it out"
    if not path:
        return _capital(sentence(message))
    spec = field_text(path, labels or {})
    where = position(path)
    label = f"{spec.label} ({where})" if where else spec.label
    return f"{label}: {sentence(message, spec)}"


def plain_detail(field: str, message: str) -> tuple[str, str]:
    """An API detail's machine path (kept for programs) and its readable sentence."""
    path, message = split_path(field, message)
    if m := _UNKNOWN.search(message):
        return path, f"“{m.group(1)}” is an unknown field: leave it out"
    return path, sentence(message)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
