"""Pure parsing of WAIT task durations and deadlines (no clock).

* :func:`parse_duration` reads Conductor's WAIT ``duration``: a sequence of
  ``<number><unit>`` pairs, optionally separated by spaces or commas, e.g. ``"30s"``,
  ``"1h 5m"``, ``"2 days"``, ``"1d2h"``, ``"5 minutes, 10 seconds"``. Units: ``d``/``day``/
  ``days``, ``h``/``hr``/``hrs``/``hour``/``hours``, ``m``/``min``/``mins``/``minute``/
  ``minutes``, ``s``/``sec``/``secs``/``second``/``seconds`` (case-insensitive). A bare
  integer is seconds, and an ISO 8601 duration (``"PT1H30M"``, ``"P2D"``) is accepted too.
* :func:`parse_until` reads WAIT ``until``: ISO 8601 (``"2030-01-02T03:04:05Z"``,
  ``"2030-01-02T03:04:05+02:00"``) or Conductor's ``"yyyy-MM-dd HH:mm"``; UTC unless a
  zone is given (a trailing ``UTC``/``GMT``/``Z`` is accepted).

Both raise :class:`ValueError` with a message fit for a task's failure reason.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["parse_duration", "parse_until"]

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
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_duration(text: str) -> int:
    """Seconds in a WAIT ``duration`` text."""
    source = text.strip()
    if not source:
        raise ValueError("empty WAIT duration")
    if source.isdigit():
        return int(source)
    iso = _ISO.fullmatch(source)
    if iso and any(iso.groups()):
        days, hours, minutes, seconds = (int(g) if g else 0 for g in iso.groups())
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    total = 0
    pos = 0
    while pos < len(source):
        match = _PAIR.match(source, pos)
        if match is None:
            raise ValueError(f"invalid WAIT duration {text!r} (expected e.g. '30s', '1h 5m')")
        unit = match.group(2).lower()
        if unit not in _UNITS:
            raise ValueError(f"invalid WAIT duration {text!r}: unknown unit {match.group(2)!r}")
        total += int(match.group(1)) * _UNITS[unit]
        pos = match.end()
    return total


def parse_until(text: str) -> int:
    """Epoch milliseconds of a WAIT ``until`` text."""
    source = text.strip()
    for zone in (" UTC", " GMT", " Z"):
        if source.upper().endswith(zone):
            source = source[: -len(zone)].rstrip() + "+00:00"
            break
    try:
        moment = datetime.fromisoformat(source)
    except ValueError:
        raise ValueError(
            f"invalid WAIT until {text!r} (expected ISO 8601 or 'yyyy-MM-dd HH:mm')"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)
