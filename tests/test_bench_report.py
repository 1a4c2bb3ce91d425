"""`BenchReport`, the typed report: `stiva bench --json` prints the same bytes it printed when the
report was a dict (every key in its place, an int where there was an int), and the CLI, the
Markdown writer and the TUI read the one model.

The golden texts (bench_fixtures/report_golden_*.json) were printed by the dict-building report on
these same runs, with the values that differ from run to run (ids, latencies) replaced by their
type's name: a key moved, dropped or added, or `0` printed as `0.0`, fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_bench_runner import script_pool, write_config, write_suite
from test_systems import stiva

VOLATILE = {
    "bench_id",
    "run_id",
    "latency_s",
    "queue_wait_s",
    "latency_p50_s",
    "latency_p95_s",
    "queue_wait_p50_s",
    "queue_wait_p95_s",
}


def masked(value):
    """`value` with each volatile value replaced by "<its type>", keys kept in their order."""
    if isinstance(value, dict):
        return {k: (f"<{type(v).__name__}>" if k in VOLATILE else masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def printed(capsys, *args) -> tuple[dict, str]:
    code, out, err = stiva(capsys, "bench", *args, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert out == json.dumps(report, indent=2) + "\n"  # exactly `json.dumps(report, indent=2)`, one object
    return report, json.dumps(masked(report), indent=2)


GOLDEN = Path(__file__).parent / "bench_fixtures"


def test_the_json_report_prints_the_bytes_it_always_printed(fake, tmp_path, stiva_home, capsys):
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 2)
    report, text = printed(
        capsys,
        str(suite),
        "--systems",
        "direct:right,direct:wrong,conductor,oracle,random",
        "--config",
        str(config),
        "--answer-cache",
        "--out",
        str(tmp_path / "out"),
    )
    assert text == (GOLDEN / "report_golden_full.json").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report
    markdown = (tmp_path / "out" / "report.md").read_text().replace(report["bench_id"], "<bench_id>")
    latencies = re.compile(r"\| \d+\.\d\d \| \d+\.\d\d \|$", re.M)  # the p50 and p95 columns
    assert latencies.sub("| p50 | p95 |", markdown) == (GOLDEN / "report_golden_full.md").read_text()
    # a bench stopped by its budget before some systems ran an item: their rows are empty
    partial, text = printed(
        capsys,
        str(suite),
        "--systems",
        "direct:wrong,direct:right",
        "--config",
        str(config),
        "--concurrency",
        "1",
        "--budget-usd",
        "0.00001",
        "--fresh",
    )
    assert text == (GOLDEN / "report_golden_partial.json").read_text()
    assert partial["status"] == "stopped" and partial["systems"][1]["n"] == 0
