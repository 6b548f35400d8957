"""engine.language.durations: the one parser of WAIT duration / until, and its bound."""

from __future__ import annotations

from typing import Any

import pytest

from engine.language.durations import MAX_WAIT_SECONDS, parse_duration, parse_until

NOW = 1_700_000_000_000  # 2023-11-14


def test_the_bound_is_100_years() -> None:
    assert MAX_WAIT_SECONDS == 36_500 * 86_400
    assert parse_duration("36500d") == parse_duration(MAX_WAIT_SECONDS) == MAX_WAIT_SECONDS


@pytest.mark.parametrize(
    "value",
    [
        "99999999999d",
        "3000000d",
        "36500d 1s",
        "P99999999999D",
        "PT99999999999999999999S",
        "999999999999999999999999",
        "9" * 5000,  # past int()'s digit limit: still "too long", not a crash
        MAX_WAIT_SECONDS + 1,
        10**30,
    ],
)
def test_duration_past_the_bound_names_it(value: Any) -> None:
    with pytest.raises(ValueError, match=r"too long: at most 36500 days \(100 years\)"):
        parse_duration(value)


@pytest.mark.parametrize(
    "value", ["9999-12-31T23:59:59-14:00", "9999-12-31 23:59 -1400", "2123-11-15T00:00:00Z"]
)
def test_until_past_the_bound_names_it(value: str) -> None:
    with pytest.raises(ValueError, match=r"too far ahead: at most 36500 days \(100 years\)"):
        parse_until(value, NOW)


def test_until_inside_the_bound_and_in_the_past() -> None:
    assert parse_until("2123-10-01T00:00:00Z", NOW) > NOW
    assert parse_until("0001-01-01T00:00:00Z", NOW) < 0  # past: the wait ends at once


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("2030-01-02 03:04 Europe/Berlin", 1_893_553_440_000 - 3_600_000),
        ("2030-01-02 03:04 +0200", 1_893_553_440_000 - 7_200_000),
        ("2030-01-02 03:04 GMT", 1_893_553_440_000),
        # Java's general time zone, the form of Conductor's docs ("2024-04-30 15:20 GMT+04:00")
        ("2030-01-02 03:04 GMT+04:00", 1_893_553_440_000 - 4 * 3_600_000),
        ("2030-01-02 03:04 GMT-8", 1_893_553_440_000 + 8 * 3_600_000),
        ("2030-01-02 03:04 UTC+0530", 1_893_553_440_000 - 5 * 3_600_000 - 1_800_000),
        ("2030-01-02 03:04 GMT+00:00", 1_893_553_440_000),
        ("2030-01-02", 1_893_542_400_000),
    ],
)
def test_until_zones(value: str, ms: int) -> None:
    assert parse_until(value, NOW) == ms


@pytest.mark.parametrize("value", [1.5, True, None, [], "1.5s", "-5s", -1])
def test_duration_not_a_duration(value: Any) -> None:
    with pytest.raises(ValueError, match="WAIT duration"):
        parse_duration(value)
