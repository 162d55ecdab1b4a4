"""Which IP addresses an outbound request to a user-supplied URL may reach (pure).

Refused unless the workspace allows private targets: loopback, private (RFC 1918, unique local
fc00::/7), link-local (169.254.0.0/16 — cloud metadata lives there — and fe80::/10), carrier-grade
NAT and every other range that is not globally routable. Never allowed: the unspecified address
(0.0.0.0 and :: reach the local host on Linux) and multicast. IPv6 forms that embed an IPv4 address
(IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the embedded address,
so ``[::ffff:127.0.0.1]`` is loopback.

Host names in the legacy numeric forms that ``inet_aton`` (and so the system resolver) accepts —
decimal ``2130706433``, hexadecimal ``0x7f000001``, octal ``0177.0.0.1``, short ``127.1`` — are
read as the address they stand for, so they are judged without asking any resolver.

Cloud metadata endpoints are refused even when private targets are allowed: an operator who lets
workspaces reach a loopback test server has not meant to hand out the host's cloud credentials.
"""

from __future__ import annotations

import re
import socket
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address

IPAddress = IPv4Address | IPv6Address

_NAT64 = IPv6Network("64:ff9b::/96")
METADATA_ADDRESSES = frozenset(
    {
        IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean …
        IPv4Address("169.254.170.2"),  # AWS ECS task credentials
        IPv4Address("100.100.100.200"),  # Alibaba Cloud
        IPv6Address("fd00:ec2::254"),  # AWS over IPv6
    }
)
# Only digits, hex digits, "x" and dots: a candidate for inet_aton's legacy numeric forms.
_LEGACY_NUMERIC = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$", re.IGNORECASE)


def embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it is one of the translation forms."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    return None


def refusal_reason(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why a request may not connect to ``ip``, or ``None`` when it may."""
    if isinstance(ip, IPv6Address) and (inner := embedded_ipv4(ip)) is not None:
        reason = refusal_reason(inner, allow_private=allow_private)
        return f"{reason} (embedded in {ip})" if reason else None
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_multicast:
        return "multicast address"
    if allow_private:
        return None
    if ip.is_loopback:
        return "loopback address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_private:
        return "private address"
    if not ip.is_global:
        return "address that is not globally routable"
    return None


def parse_ip(text: str) -> IPAddress | None:
    """``text`` as an IP address (brackets and an IPv6 zone allowed), or ``None`` for a host name."""
    candidate = text.strip("[]").split("%", 1)[0].rstrip(".")
    try:
        return ip_address(candidate)
    except ValueError:
        pass
    if _LEGACY_NUMERIC.match(candidate):
        try:
            return IPv4Address(socket.inet_aton(candidate))
        except OSError:
            return None
    return None
