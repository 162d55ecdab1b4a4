"""Every error an outside API raises to our code is an :class:`OutboundError`, with the same
attributes (``provider``, ``transient``, ``status``), so one ``except OutboundError`` and one retry
decision cover them all. An exception class under ``app/integrations`` that is not one must say why
here."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import app.integrations
from app.integrations.http_guard import OutboundError, PermanentError, TransientError
from app.integrations.mail import MailError, PermanentMailError, TransientMailError
from app.integrations.mail.sns import SnsError

NOT_OUTBOUND: dict[str, str] = {
    "app.integrations.mail.postmark.PostmarkRefused": "an inbound webhook's credentials do not "
    "match: our answer to a request someone sent us, not an outside API's failure",
    "app.integrations.mail.sendgrid.SendGridRefused": "an inbound webhook's signature does not "
    "verify: our answer to a request someone sent us, not an outside API's failure",
    "app.integrations.mail.reports.MailgunRefused": "an inbound webhook's signature does not "
    "verify: our answer to a request someone sent us, not an outside API's failure",
}
"""Exception classes defined under ``app/integrations`` that are deliberately not outbound errors,
each with the reason."""


def _modules() -> list[ModuleType]:
    names = [
        info.name
        for info in pkgutil.walk_packages(app.integrations.__path__, prefix="app.integrations.")
    ]
    return [importlib.import_module(name) for name in sorted(names)]


def _subclasses(root: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    pending = [root]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                pending.append(sub)
    return found


def _integration_exceptions() -> dict[str, type[BaseException]]:
    _modules()
    return {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for cls in _subclasses(Exception)
        if cls.__module__.startswith("app.integrations.")
    }


def test_every_integration_exception_is_an_outbound_error_or_says_why_not() -> None:
    classes = _integration_exceptions()
    assert "app.integrations.mail.sns.SnsError" in classes, "the walk found nothing"
    outsiders = sorted(
        name
        for name, cls in classes.items()
        if not issubclass(cls, OutboundError) and name not in NOT_OUTBOUND
    )
    assert not outsiders, f"derive from OutboundError or list in NOT_OUTBOUND with why: {outsiders}"


def test_the_exemptions_are_real_and_not_outbound_errors() -> None:
    """A stale entry would hide the next class of that name."""
    classes = _integration_exceptions()
    for name in NOT_OUTBOUND:
        assert name in classes, f"{name} no longer exists: drop it from NOT_OUTBOUND"
        assert not issubclass(classes[name], OutboundError), f"{name} is outbound now"


@pytest.mark.parametrize(
    ("error", "transient", "status"),
    [
        (TransientMailError("SMTP 451: try later", code=451), True, 451),
        (PermanentMailError("SMTP 550: no such user", code=550), False, 550),
        (TransientMailError("SMTP connection failed: refused"), True, None),
    ],
)
def test_mail_errors_carry_the_outbound_attributes(
    error: MailError, transient: bool, status: int | None
) -> None:
    assert isinstance(error, OutboundError)
    assert isinstance(error, TransientError if transient else PermanentError)
    assert error.provider == "smtp"
    assert error.transient is transient
    assert error.status == status == error.reply_code
    assert str(error) == error.message, "the message reads as before, without a prefix"


def test_sns_errors_carry_the_outbound_attributes() -> None:
    refused = SnsError("the SNS signature does not verify")
    assert isinstance(refused, OutboundError)
    assert (refused.provider, refused.transient, refused.status) == ("sns", False, None)
    assert str(refused) == "the SNS signature does not verify"
    outage = SnsError(
        "the signing certificate could not be fetched (503)", status=503, transient=True
    )
    assert (outage.transient, outage.status) == (True, 503)
