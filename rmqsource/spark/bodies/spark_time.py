"""Spark's default parsing of date and timestamp strings (DateTimeUtils.stringToDate / stringToTimestamp,
what from_json uses when no dateFormat / timestampFormat is given), to days and microseconds since the epoch.

Timestamps: ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d``, then ``T`` or a space and ``[h]h[:[m]m[:[s]s[.f]]]``
and a zone (``Z``, ``+hh[:mm]``, ``+hhmm``, ``UTC+01:00``, ``GMT``, a region such as ``Europe/Paris``).
Without a zone the time is UTC: the task cannot see the session's spark.sql.session.timeZone (the tests and
docs run in UTC). Years outside 1..9999 and time-only strings are not taken (bad records here).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Optional

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DATE = re.compile(r"[+]?(\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?", re.S)
_TIMESTAMP = re.compile(r"[+]?(\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T](?:(\d{1,2})(?::(\d{1,2})(?::(\d{1,2})"
                        r"(?:\.(\d*))?)?)?)?(?:\s*(\S.*))?)?)?)?", re.S)
_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


def _days(y: str, m: Optional[str], d: Optional[str]) -> int:
    return dt.date(int(y), int(m or 1), int(d or 1)).toordinal() - _EPOCH


def parse_date(text: str) -> int:
    """Days since 1970-01-01; ValueError when Spark would not take the string."""
    m = _DATE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a date")
    return _days(*m.groups())


def parse_timestamp(text: str, ntz: bool = False) -> int:
    """Microseconds since the epoch (UTC, or the zone the string names); ``ntz``: no zone taken."""
    m = _TIMESTAMP.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a timestamp")
    y, mo, d, hh, mi, ss, frac, zone = m.groups()
    h, minute, s = int(hh or 0), int(mi or 0), int(ss or 0)
    if h > 23 or minute > 59 or s > 59:
        raise ValueError(f"{text!r} is not a timestamp")
    days = _days(y, mo, d)
    micros = int(((frac or "") + "000000")[:6])
    local = (days * 86400 + h * 3600 + minute * 60 + s) * 1_000_000 + micros
    if zone is None:
        return local
    if ntz:
        raise ValueError(f"{text!r} names a time zone")
    return local - _zone_offset(zone, days, h, minute, s) * 1_000_000


def _zone_offset(zone: str, days: int, h: int, minute: int, s: int) -> int:
    """Seconds east of UTC of ``zone`` at that local time."""
    z = zone.strip()
    upper = z.upper()
    if upper in ("Z", "UTC", "GMT", "UT", "Z ", "ZULU"):
        return 0
    for prefix in ("UTC", "GMT", "UT"):
        if upper.startswith(prefix) and upper[len(prefix):len(prefix) + 1] in ("+", "-"):
            z = z[len(prefix):]
            break
    m = _OFFSET.fullmatch(z)
    if m:
        sign, hh, mm, ss = m.groups()
        seconds = int(hh) * 3600 + int(mm or 0) * 60 + int(ss or 0)
        if int(hh) > 18 or int(mm or 0) > 59 or int(ss or 0) > 59:
            raise ValueError(f"bad zone offset {zone!r}")
        return -seconds if sign == "-" else seconds
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        tz = ZoneInfo(z)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r}") from None
    local = dt.datetime.fromordinal(days + _EPOCH).replace(hour=h, minute=minute, second=s, tzinfo=tz)
    return int(local.utcoffset().total_seconds())
