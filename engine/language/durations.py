"""Pure parsing of WAIT task durations and deadlines (no clock): the one parser of both,
used by registration (engine/language/validation.py) and by the run
(engine/decider/tasks/wait.py), so that a value accepted by one is accepted by the other.

* :func:`parse_duration` reads Conductor's WAIT ``duration``: a sequence of
  ``<number><unit>`` pairs, optionally separated by spaces or commas, e.g. ``"30s"``,
  ``"1h 5m"``, ``"2 days"``, ``"1d2h"``, ``"5 minutes, 10 seconds"``. Units: ``d``/``day``/
  ``days``, ``h``/``hr``/``hrs``/``hour``/``hours``, ``m``/``min``/``mins``/``minute``/
  ``minutes``, ``s``/``sec``/``secs``/``second``/``seconds`` (case-insensitive). A bare
  integer (a JSON number or a text of digits) is seconds, and an ISO 8601 duration
  (``"PT1H30M"``, ``"P2D"``) is accepted too.
* :func:`parse_until` reads WAIT ``until``: ISO 8601 (``"2030-01-02T03:04:05Z"``,
  ``"2030-01-02T03:04:05+02:00"``, ``"2030-01-02"``) or Conductor's ``"yyyy-MM-dd HH:mm"``,
  optionally followed by a zone (``UTC``/``GMT``/``Z``, an offset such as ``+0200``, or an
  IANA name such as ``Europe/Berlin``); UTC unless a zone is given.

Both are bounded by :data:`MAX_WAIT_SECONDS` and raise :class:`ValueError` with a
message fit for a task's failure reason (and a registration's 400).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["MAX_WAIT_DAYS", "MAX_WAIT_SECONDS", "parse_duration", "parse_until"]

#: The longest a WAIT (or a HUMAN task's ``timeoutSeconds``) may last: 100 years. Durable
#: Task timers themselves have no upper bound (the SDK splits a long timer into 3-day
#: timers, as the .NET and Java SDKs do), so the bound is the engine's: long enough for
#: any wait a workflow means (the task definition timeouts stop at 2^31-1 seconds, about
#: 68 years), and far enough inside ``datetime``'s range (year 9999) that the time of a
#: timer armed from now can always be represented.
MAX_WAIT_DAYS = 36_500
MAX_WAIT_SECONDS = MAX_WAIT_DAYS * 86_400

_LIMIT = f"at most {MAX_WAIT_DAYS} days (100 years)"

_UNITS: dict[str, int] = {}
for _names, _seconds in (
    (("d", "day", "days"), 86400),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("s", "sec", "secs", "second", "seconds"), 1),
):
    for _name in _names:
        _UNITS[_name] = _seconds

_PAIR = re.compile(r"\s*(\d+)\s*([A-Za-z]+)\s*,?")
_ISO = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_ZONED = re.compile(r"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\S+)")
#: GMT+04:00, GMT-8, UTC+0530: an offset after GMT (or UTC), as Java's time zones write it
_GMT_OFFSET = re.compile(r"(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?", re.IGNORECASE)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _int(digits: str) -> int:
    """A count of units; one too long to matter is past any bound (and past int()'s
    digit limit), so it is reported as too long, not as unreadable."""
    return int(digits) if len(digits) <= 18 else MAX_WAIT_SECONDS + 1


def _bounded(seconds: int, value: Any) -> int:
    if seconds > MAX_WAIT_SECONDS:
        raise ValueError(f"WAIT duration {_short(value)} is too long: {_LIMIT}")
    return seconds


def parse_duration(value: Any) -> int:
    """Seconds in a WAIT ``duration`` (a text, or an integer of seconds), at most
    :data:`MAX_WAIT_SECONDS`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"invalid WAIT duration {_short(value)}: not negative")
        return _bounded(value, value)
    if not isinstance(value, str):
        raise ValueError(
            f"invalid WAIT duration {_short(value)} (expected a text such as '30s', '1h 5m', "
            "or a whole number of seconds)"
        )
    source = value.strip()
    if not source:
        raise ValueError("empty WAIT duration")
    if _DIGITS.fullmatch(source):
        return _bounded(_int(source), value)
    iso = _ISO.fullmatch(source)
    if iso and any(iso.groups()):
        days, hours, minutes, seconds = (_int(g) if g else 0 for g in iso.groups())
        return _bounded(days * 86400 + hours * 3600 + minutes * 60 + seconds, value)
    total = 0
    pos = 0
    while pos < len(source):
        match = _PAIR.match(source, pos)
        if match is None:
            raise ValueError(
                f"invalid WAIT duration {_short(value)} (expected e.g. '30s', '1h 5m')"
            )
        unit = match.group(2).lower()
        if unit not in _UNITS:
            raise ValueError(
                f"invalid WAIT duration {_short(value)}: unknown unit {match.group(2)!r}"
            )
        total += _int(match.group(1)) * _UNITS[unit]
        pos = match.end()
    return _bounded(total, value)


def _moment(source: str) -> datetime | None:
    try:
        return datetime.fromisoformat(source)
    except ValueError:
        pass
    zoned = _ZONED.fullmatch(source)
    if zoned is None:
        return None
    local, zone = zoned.groups()
    if zone.upper() in ("UTC", "GMT", "Z"):
        zone = "+00:00"
    gmt = _GMT_OFFSET.fullmatch(zone)
    if gmt is not None:
        # Java's general time zone (Conductor parses ``until`` with SimpleDateFormat's
        # "yyyy-MM-dd HH:mm z"; its docs' example is "2024-04-30 15:20 GMT+04:00")
        sign, hours, minutes = gmt.groups()
        zone = f"{sign}{int(hours):02d}:{minutes or '00'}"
    try:
        moment = datetime.fromisoformat(local + zone)  # an offset: +02:00, -1400
    except ValueError:
        try:
            info = ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            return None
        try:
            moment = datetime.fromisoformat(local).replace(tzinfo=info)
        except ValueError:
            return None
    return moment if moment.tzinfo is not None else None


def parse_until(value: Any, now_ms: int) -> int:
    """Epoch milliseconds of a WAIT ``until`` text; at most :data:`MAX_WAIT_SECONDS` after
    ``now_ms`` (a time already past is fine: the wait ends at once)."""
    moment = _moment(value.strip()) if isinstance(value, str) else None
    if moment is None:
        raise ValueError(
            f"invalid WAIT until {_short(value)} (expected ISO 8601 or 'yyyy-MM-dd HH:mm', "
            "UTC unless a zone follows)"
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # a difference, never a conversion: 9999-12-31T23:59-14:00 is past datetime's range in UTC
    at_ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if at_ms - now_ms > MAX_WAIT_SECONDS * 1000:
        raise ValueError(f"WAIT until {_short(value)} is too far ahead: {_LIMIT} from now")
    return at_ms
