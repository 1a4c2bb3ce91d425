"""The markdown tables docs/measurements.md quotes, printed from real_routing.json (no figure typed by hand).

python -m benchmarks.experiments.real_routing_tables [PATH]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.experiments.real_routing import OUT

SHORT = {
    "gpt-4o-2024-05-13": "GPT-4o",
    "gpt-4o-mini-2024-07-18": "4o-mini",
    "claude-3-5-sonnet-20240620": "Sonnet",
    "claude-3-haiku-20240307": "Haiku",
    "gemini-1.5-pro": "Gemini Pro",
    "gemini-1.5-flash": "Flash",
    "Meta-Llama-3.1-8B-Instruct": "Llama-8B",
    "Meta-Llama-3.1-70B-Instruct": "Llama-70B",
    "Llama-3.1-405B-Inst@sambanova": "Llama-405B",
    "Qwen2-72B-Instruct": "Qwen2-72B",
    "gemma-2-9b-it": "Gemma-9B",
}


def short(name: str) -> str:
    for long, brief in sorted(SHORT.items(), key=lambda kv: -len(kv[0])):
        name = name.replace(long, brief)
    return name


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def usd(x: float) -> str:
    return f"${x:.2f}"


def versus(row: dict) -> str:
    low, high = row["paired_bootstrap_points_95"]
    return f"{row['points_vs_best_single']:+.1f} ({low:+.1f} to {high:+.1f}) at {row['cost_share_of_best_single']:.2f}x"


def tables(f: dict) -> str:
    out = []
    best = f["best_single"]
    s = f["router_summary"]
    sets = len(f["per_data_set"])
    out.append(f"| test half, all {sets} data sets | accuracy | USD per 1,000 | against the best single model |")
    out.append("|---|---|---|---|")
    out.append(
        f"| {SHORT[best['model']]}, the best single model (chosen on train) | {pct(best['accuracy'])} | {usd(best['usd_per_1000'])} | |"
    )
    out.append(f"| oracle | {pct(f['oracle']['accuracy'])} | {usd(f['oracle']['usd_per_1000'])} | |")
    out.append(f"| random model | {pct(f['random_draw']['accuracy'])} | {usd(f['random_draw']['usd_per_1000'])} | |")
    for label, row in f["fixed_workflows"].items():
        out.append(f"| `{label}` | {pct(row['accuracy'])} | {usd(row['usd_per_1000'])} | {versus(row)} |")
    for level in ("best", "balanced", "cheap", "0.1", "0.2"):
        row = s[level]
        lo, hi = row["accuracy_range"]
        name = f"router at `{level}`" if not level[0].isdigit() else f"router at `--prefer {level}`"
        runs = "fixed workflow" if row["runs"] == "fixed" else "choice per question"
        low, high = row["paired_bootstrap_points_95"]
        out.append(
            f"| {name} (runs: {runs}) | {pct(row['accuracy_median'])} ({pct(lo)}–{pct(hi)}) | "
            f"{usd(row['usd_per_1000_median'])} | {row['points_vs_best_single']:+.1f} ({low:+.1f} to {high:+.1f}) at "
            f"{row['cost_share_of_best_single']:.2f}x |"
        )
        fixed = row.get("best_fixed_at_no_more_cost")
        if fixed:
            vr, vf = fixed["validation_router"], fixed["validation_fixed"]
            out.append(
                f"| … beside it: best fixed at no more cost, `{short(fixed['system'])}` (validation: router "
                f"{pct(vr['accuracy'])}, fixed {pct(vf['accuracy'])}) | {pct(fixed['accuracy'])} | "
                f"{usd(fixed['usd_per_1000'])} | {versus(fixed)} |"
            )
    out.append("")
    cascade = next(
        label for label in f["fixed_workflows"] if label.startswith("cascade") and label.endswith("> GPT-4o")
    )
    out.append(
        f"| per data set (test items) | best single ({SHORT[best['model']]}) | most accurate single | router `best` | "
        f"router `balanced` | {cascade.removeprefix('cascade: ')} | oracle |"
    )
    out.append("|---|---|---|---|---|---|---|")
    for d, v in f["per_data_set"].items():
        b, t, rb, rl = v["best_single"], v["most_accurate_single"], v["router"]["best"], v["router"]["balanced"]
        c = v["fixed_workflows"][cascade]
        out.append(
            f"| {d} ({v['test_items']}) | {pct(b['accuracy'])} {usd(b['usd_per_1000'])} | {SHORT[t['model']]} "
            f"{pct(t['accuracy'])} {usd(t['usd_per_1000'])} | {pct(rb['accuracy'])} {usd(rb['usd_per_1000'])} | "
            f"{pct(rl['accuracy'])} {usd(rl['usd_per_1000'])} | {pct(c['accuracy'])} {usd(c['usd_per_1000'])} | "
            f"{pct(v['oracle']['accuracy'])} |"
        )
    out.append("")
    out.append(
        f"| left out (trained on the others) | best single ({SHORT[best['model']]}) | most accurate single | "
        "router `best` | router `balanced` | router `cheap` |"
    )
    out.append("|---|---|---|---|---|---|")
    for d, v in f["leave_one_out"].items():
        b, t = v["best_single"], v["most_accurate_single"]
        cells = []
        for level in ("best", "balanced", "cheap"):
            row = v["router"][level]
            low, high = row["paired_bootstrap_points_95"]
            cells.append(
                f"{pct(row['accuracy'])} {usd(row['usd_per_1000'])} ({row['points_vs_best_single']:+.1f}, {low:+.1f} to {high:+.1f})"
            )
        out.append(
            f"| {d} ({v['test_items']}; trained on {' + '.join(v['trained_on'])}) | {pct(b['accuracy'])} "
            f"{usd(b['usd_per_1000'])} | {SHORT[t['model']]} {pct(t['accuracy'])} | " + " | ".join(cells) + " |"
        )
    out.append("")
    for label, v in f["order"].items():
        rows = "; ".join(f"`{short(n)}` {pct(p['accuracy'])}" for n, p in v["rows"].items())
        out.append(f"- order, {label}: spread {v['spread_points']:.2f} points ({rows})")
    out.append("")
    g = f["goals"]
    out.append("goals: " + json.dumps(g, indent=1))
    out.append(f"aiq: {json.dumps(f['aiq'])}")
    out.append(f"decision_s: {json.dumps(f['decision_s'])}; nl: {json.dumps(f.get('nl_conductor'))}")
    out.append(f"seconds: {f['seconds']}, bench_s: {f['bench_s']}, data: {json.dumps(f['data'])}")
    return "\n".join(out)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    print(tables(json.loads(path.read_text())))
