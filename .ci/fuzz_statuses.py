"""The statuses a schemathesis run received with its key, from its VCR cassette; fails (exit 1) when
more than a given share of them were 401/403, or any was a 5xx.

Only the generated requests count: the ``ignored_auth`` check's own probes (sent without the key
and with a wrong one, their 401 the answer it wants) are recorded with no checks of their own. A 403 from an operation matching
``--expected-403`` (organisation-level or operator-only, rightly refused to a workspace key) is
left out of the count. The cassette is read line by line (it runs to tens of megabytes, which a
YAML parser takes long to read); schemathesis writes every interaction in the same layout.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from urllib.parse import urlsplit

_START = re.compile(r"^- id: ")
_URI = re.compile(r"^    uri: '(.*)'$")
_METHOD = re.compile(r"^    method: '(.*)'$")
_PROBE = re.compile(r"^  checks: \[\]$")
_CODE = re.compile(r"^      code: '(\d{3})'$")


def interactions(path: str) -> list[tuple[str, str, bool, int]]:
    """``(method, path, probe, status)`` of every recorded request that got an answer."""
    out: list[tuple[str, str, bool, int]] = []
    method = uri = ""
    probe = False
    status: int | None = None

    def flush() -> None:
        if uri and status is not None:
            out.append((method, urlsplit(uri).path, probe, status))

    with open(path, encoding="utf-8", errors="replace") as cassette:
        for line in cassette:
            line = line.rstrip("\n")
            if _START.match(line):
                flush()
                method, uri, probe, status = "", "", False, None
            elif m := _URI.match(line):
                uri = m.group(1)
            elif m := _METHOD.match(line):
                method = m.group(1)
            elif _PROBE.match(line):
                probe = True
            elif m := _CODE.match(line):
                status = int(m.group(1))
    flush()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cassette")
    parser.add_argument("--expected-403", default="^$", help="operations whose 403 is right")
    parser.add_argument("--max-denied-percent", type=float, default=2.0)
    args = parser.parse_args()
    expected = re.compile(args.expected_403)

    counted: Counter[int] = Counter()
    denied: Counter[str] = Counter()
    server_errors: Counter[str] = Counter()
    for method, path, probe, status in interactions(args.cassette):
        if status >= 500:
            server_errors[f"{method} {path} -> {status}"] += 1
        if probe or (status == 403 and expected.search(path)):
            continue
        counted[status] += 1
        if status in (401, 403):
            denied[f"{method} {path} -> {status}"] += 1

    total = sum(counted.values())
    refused = counted[401] + counted[403]
    share = 100.0 * refused / total if total else 100.0
    by_status = ", ".join(f"{code}: {n}" for code, n in sorted(counted.items()))
    print(f"generated requests: {total} ({by_status}); 401/403: {refused} ({share:.1f}%)")
    failed = False
    if total == 0 or share > args.max_denied_percent:
        print(f"FAIL: more than {args.max_denied_percent}% of the requests were refused:")
        for what, n in denied.most_common(15):
            print(f"  {n:5} x {what}")
        failed = True
    if server_errors:
        print("FAIL: server errors:")
        for what, n in server_errors.most_common(15):
            print(f"  {n:5} x {what}")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
