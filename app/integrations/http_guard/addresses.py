"""Which IP addresses an outbound request to a user-supplied URL may reach (pure).

Refused unless the workspace allows private targets: loopback, private (RFC 1918, unique local
fc00::/7), link-local (169.254.0.0/16 — cloud metadata lives there — and fe80::/10), carrier-grade
NAT and every other range that is not globally routable. Never allowed: the unspecified address
(0.0.0.0 and :: reach the local host on Linux) and multicast.

IPv6 forms that embed an IPv4 address are judged by the embedded address with the IPv4 rules, so
``[::ffff:127.0.0.1]`` and ``[::127.0.0.1]`` are loopback: IPv4-mapped ``::ffff:a.b.c.d``,
IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64 (the well-known
``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``), 6to4 ``2002::/16``, Teredo ``2001::/32``
(server and client, the client's address de-obfuscated) and ISATAP interface identifiers
(``…:0:5efe:a.b.c.d``, ``…:200:5efe:a.b.c.d``). A local-use NAT64 prefix may be any RFC 6052
length from /48 to /96 and the address does not say which, so the IPv4 address is read at every
such position whose suffix (the bits after the IPv4 address, zero by RFC 6052) is zero, and each
reading must pass. When every embedded address is public the address is
allowed (it stands for, or tunnels to, that address), except ISATAP, whose own prefix is then
judged as any IPv6 address (``fe80::5efe:8.8.8.8`` is still link-local).

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

_COMPATIBLE = IPv6Network("::/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")
_NAT64_LOCAL_USE_PREFIX_LENGTHS = (48, 56, 64, 96)
"""RFC 6052 prefix lengths a network may use inside the local-use /48 (RFC 8215)."""
_ISATAP_ID = 0x00005EFE
"""The upper half of an ISATAP interface identifier, with its u and g bits cleared (RFC 5214)."""
_ISATAP_ID_MASK = 0xFCFFFFFF
_LOW_32 = 0xFFFFFFFF
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


def rfc6052_ipv4(ip: IPv6Address, prefix_length: int) -> IPv4Address:
    """The IPv4 address RFC 6052 places after a ``prefix_length`` NAT64 prefix: its bits skip
    bits 64 to 71 (the "u" octet) of the IPv6 address."""
    value = int(ip)
    # Drop the u octet: 120 bits remain, and the IPv4 address is 32 of them in a row.
    packed = ((value >> 64) << 56) | (value & ((1 << 56) - 1))
    start = prefix_length if prefix_length <= 64 else prefix_length - 8
    return IPv4Address((packed >> (120 - start - 32)) & _LOW_32)


def _rfc6052_suffix_is_zero(ip: IPv6Address, prefix_length: int) -> bool:
    # The IPv4 address ends 32 bits after the prefix, 8 more when it comes after the u octet.
    end = prefix_length + 32 + (8 if prefix_length <= 64 else 0)
    return end >= 128 or int(ip) & ((1 << (128 - end)) - 1) == 0


def embedded_ipv4(ip: IPv6Address) -> tuple[str, tuple[IPv4Address, ...]] | None:
    """The form and every IPv4 address an IPv6 address carries, or ``None`` when it carries none."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", (ip.ipv4_mapped,)
    if ip in _TRANSLATED:
        return "IPv4-translated", (IPv4Address(int(ip) & _LOW_32),)
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are the unspecified and loopback addresses
        return "IPv4-compatible", (IPv4Address(int(ip) & _LOW_32),)
    if ip in _NAT64_WELL_KNOWN:
        return "NAT64", (rfc6052_ipv4(ip, 96),)
    if ip in _NAT64_LOCAL_USE:
        return "local-use NAT64", tuple(
            rfc6052_ipv4(ip, length)
            for length in _NAT64_LOCAL_USE_PREFIX_LENGTHS
            if _rfc6052_suffix_is_zero(ip, length)
        )
    if ip.sixtofour is not None:
        return "6to4", (ip.sixtofour,)
    if ip.teredo is not None:
        server, client = ip.teredo
        return "Teredo", (server, client)
    if (int(ip) >> 32) & _ISATAP_ID_MASK == _ISATAP_ID:
        return "ISATAP", (IPv4Address(int(ip) & _LOW_32),)
    return None


def _embedded_refusal(
    ip: IPv6Address, form: str, inner: tuple[IPv4Address, ...], allow_private: bool
) -> str | None:
    for address in inner:
        reason = refusal_reason(address, allow_private=allow_private)
        if reason is not None:
            return f"{reason} ({address}, embedded in {form} {ip})"
    return None


def refusal_reason(ip: IPAddress, *, allow_private: bool = False) -> str | None:
    """Why a request may not connect to ``ip``, or ``None`` when it may."""
    if isinstance(ip, IPv6Address) and (embedded := embedded_ipv4(ip)) is not None:
        form, inner = embedded
        reason = _embedded_refusal(ip, form, inner, allow_private)
        if reason is not None or form != "ISATAP":
            return reason
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
