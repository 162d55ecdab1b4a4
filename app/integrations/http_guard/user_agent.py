"""The ``User-Agent`` every outbound request of the product sends (providers ask for one that
names the caller, and it lets a receiver tell our calls apart)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    _VERSION = version("sweepline")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "0"

USER_AGENT = f"Sweepline/{_VERSION}"
