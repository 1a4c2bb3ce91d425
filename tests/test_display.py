"""One way to write money, durations, step numbers and counts, for the app, the CLI and exports."""

from __future__ import annotations

from stiva_tui.core import display as fmt


def test_money_is_written_one_way():
    assert [fmt.money(v) for v in (None, 0, 0.000028, 0.0023, 0.0142, 0.5, 1.5, 1234.5)] == [
        "$0.00",
        "$0.00",
        "$0.000028",
        "$0.0023",
        "$0.014",
        "$0.500",
        "$1.50",
        "$1,234.50",
    ]


def test_durations_are_written_one_way():
    assert [fmt.seconds(v) for v in (None, 0.48, 10.91, 59.96, 71.2, 3600)] == [
        "",
        "0.5s",
        "10.9s",
        "1m00s",
        "1m11s",
        "60m00s",
    ]


def test_counts_say_one_step_and_two_steps():
    assert [fmt.count(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]


def test_steps_are_numbered_from_one_where_people_read_them():
    assert fmt.step(0) == "1" and fmt.steps([0, 2]) == "1,3"
    assert fmt.reads(2, (0, 1), False) == "← 1,2"
    assert fmt.reads(1, (), False) == ""  # only the question
    assert fmt.reads(3, (), True) == "← all"
    assert fmt.reads(0, (), True) == ""  # a lone (or first) step has no earlier step to read
