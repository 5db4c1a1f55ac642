"""Offset message ids and client unique ids (spec §6).

Offset msgId = hex upper-case of ``storeIP (4|16 bytes) + int32 port + int64
phyOffset``: 32 chars for IPv4, 56 for IPv6.  It is derived, never stored.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from ..errors import OptionError

_PORT_OFFSET = struct.Struct(">iq")


def host_bytes_to_str(addr: bytes, port: int) -> str:
    """Render an address the way the golden corpora (Java) print it.

    IPv4 ``a.b.c.d:port``; IPv6 in Java's uncompressed form
    ``[2001:db8:0:0:0:0:0:1]:port``.
    """
    if len(addr) == 4:
        return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}"
    groups = struct.unpack(">8H", addr)
    return "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """Parse ``a.b.c.d:port`` or ``[v6]:port`` into (address bytes, port)."""
    try:
        if text.startswith("["):
            host, _, port = text[1:].partition("]:")
            return ipaddress.IPv6Address(host).packed, int(port)
        host, _, port = text.rpartition(":")
        return ipaddress.IPv4Address(host).packed, int(port)
    except (ValueError, ipaddress.AddressValueError) as exc:
        raise OptionError(f"not a host:port address: {text!r}") from exc


def create_offset_msg_id(store_addr: bytes, store_port: int, phy_offset: int) -> str:
    return (store_addr + _PORT_OFFSET.pack(store_port, phy_offset)).hex().upper()


@dataclass(frozen=True)
class OffsetMsgId:
    store_addr: bytes
    store_port: int
    phy_offset: int

    @property
    def store_host(self) -> str:
        return host_bytes_to_str(self.store_addr, self.store_port)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Inverse of :func:`create_offset_msg_id` (32 chars → IPv4, 56 → IPv6)."""
    text = msg_id.strip()
    if len(text) not in (32, 56):
        raise OptionError(f"offset msgId must have 32 or 56 hex digits, got {len(text)}: {msg_id!r}")
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise OptionError(f"offset msgId is not hexadecimal: {msg_id!r}") from exc
    ip_len = 4 if len(raw) == 16 else 16
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return OffsetMsgId(raw[:ip_len], port, offset)
