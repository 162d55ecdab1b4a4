"""The column-mapping step of a CSV import (FN-78): a look at the uploaded file (its header and its
first rows) and a guess, from each header, of what the column becomes ("Email Address" → email,
"Given name" → first_name, a custom field by its key or label). The guesses are only offered: the
person confirms or changes each column, and the import checks the mapping as it always does
(:func:`~app.engines.funnels.contacts.csv_import.plan_import`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass

from app.engines.funnels.contacts.csv_import import MEMBERSHIP_COLUMNS, SKIP, STANDARD_COLUMNS
from app.errors import ValidationFailed

PREVIEW_ROWS = 10

SYNONYMS: dict[str, tuple[str, ...]] = {
    "email": (
        "email",
        "e mail",
        "email address",
        "e mail address",
        "mail",
        "mail address",
        "courriel",
        "correo",
        "correo electronico",
    ),
    "first_name": (
        "first name",
        "firstname",
        "given name",
        "forename",
        "first",
        "vorname",
        "prenom",
        "nombre",
    ),
    "last_name": (
        "last name",
        "lastname",
        "surname",
        "family name",
        "last",
        "nachname",
        "nom",
        "apellido",
    ),
    "phone": (
        "phone",
        "phone number",
        "mobile",
        "mobile number",
        "telephone",
        "tel",
        "cell",
        "cell phone",
    ),
    "timezone": ("timezone", "time zone", "tz"),
    "tags": ("tags", "tag", "labels", "label"),
    "lists": ("lists", "list", "mailing lists"),
}
_BY_WORDS = {words: target for target, names in SYNONYMS.items() for words in names}


@dataclass(frozen=True, slots=True)
class Sample:
    header: list[str]
    rows: list[list[str]]
    """The first :data:`PREVIEW_ROWS` data rows, each as long as the header."""


def words(header: str) -> str:
    """A header as lower-case words: ``"E-mail_Address "`` → ``"e mail address"``."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", header.strip().lstrip("\ufeff"))
    return " ".join(re.sub(r"[^0-9a-z]+", " ", spaced.lower()).split())


def field_key(header: str) -> str:
    """A custom field key suggested for a column nothing matches (``"Shoe size"`` → ``shoe_size``)."""
    key = words(header).replace(" ", "_")[:64]
    return f"field_{key}" if not key or key[0].isdigit() else key


def guess(header: str, fields: Mapping[str, str], labels: Mapping[str, str]) -> str:
    """What a column most likely becomes: a standard attribute, tags or lists, a custom field (by
    key or label), or :data:`SKIP` when nothing matches."""
    said = words(header)
    if said in _BY_WORDS:
        return _BY_WORDS[said]
    for key in fields:
        if said in (words(key), words(labels.get(key, "") or key)):
            return key
    return SKIP


def guesses(header: list[str], fields: Mapping[str, str], labels: Mapping[str, str]) -> list[str]:
    """One guess per column; a target guessed twice is kept for the first column only."""
    taken: set[str] = set()
    out = []
    for name in header:
        target = guess(name, fields, labels)
        if target in taken:
            target = SKIP
        if target != SKIP:
            taken.add(target)
        out.append(target)
    return out


def targets_offered(fields: Mapping[str, str]) -> list[str]:
    """What a column may become, in the order a person scans them."""
    return [*STANDARD_COLUMNS, *sorted(fields), *MEMBERSHIP_COLUMNS]


def sample(text: str) -> Sample:
    """The header and the first rows of an uploaded file.

    Raises:
        ValidationFailed: naming ``csv`` (no header row, or one that cannot be read).
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lstrip("\ufeff") for h in next(reader, [])]
        if not any(header):
            raise ValidationFailed.field("csv", "the file is empty: a header row is required")
        rows: list[list[str]] = []
        for record in reader:
            if not record:
                continue
            rows.append((record + [""] * len(header))[: len(header)])
            if len(rows) == PREVIEW_ROWS:
                break
    except csv.Error as exc:
        raise ValidationFailed.field("csv", f"the file cannot be read as CSV: {exc}") from None
    return Sample(header, rows)
