"""The resident memory of a process that answers on the embedded model, stage by stage.

    python -m benchmarks.perf.memory [--questions 3] [--no-save]

A fresh process holds the product's own runtime with the model in-process, as `stiva ask`'s warm
worker does (the app and `stiva serve` hold the model in a process of their own, whose figures
are in tui.json): its RSS after the
runtime is made, after the conductor (the embedded 270M) loads, and after each question, split as
/proc/self/status splits it: RssAnon (the process's own heap: Python, torch, transformers, the
tokenizer) and RssFile (mapped files: the model's safetensors, whose pages count once a forward
pass has read them, and shared libraries). Saves memory.json beside itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.harness import HERE, ROOT, machine, save_json, stiva_env, temporary_home

OUT = HERE / "perf" / "memory.json"
QUESTIONS = ("What is the capital of France?", "What is 17*23?", "Who wrote Hamlet?", "Is 97 prime?")

CHILD = r"""
import asyncio, json, sys

questions = json.loads(sys.argv[1])

def rss_mib():
    fields = {}
    for line in open("/proc/self/status"):
        key = line.split(":")[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            fields[key] = round(int(line.split()[1]) / 1024, 1)
    return fields

async def main():
    from stiva_tui.config import load_config
    from stiva_tui.runtime import Ask, Runtime

    stages = {}
    runtime = await Runtime.create(load_config(None), discover=False)
    stages["runtime"] = rss_mib()
    await runtime.ensure_conductor(None, None)
    stages["conductor_loaded"] = rss_mib()
    for i, question in enumerate(questions, 1):
        outcome = await runtime.sessions.ask(Ask(question, source="cli"))
        assert outcome.result.status == "finished", outcome.result.status
        stages[f"after_question_{i}"] = rss_mib()
    await runtime.aclose()
    print(json.dumps(stages))

asyncio.run(main())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    questions = json.dumps(list(QUESTIONS[: args.questions]))
    figures: dict = {
        "what": "RSS of one process answering on the embedded model (the product's runtime), by stage, "
        "with /proc/self/status's RssAnon (own heap) and RssFile (mapped files: the model's weights)",
        "questions": json.loads(questions),
    }
    with temporary_home("stiva-memory-") as home:
        env = {**stiva_env(home), "STIVA_NO_WARM": "1"}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, questions], cwd=ROOT, env=env, capture_output=True, text=True
        )
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1:])
    figures["stages_mib"] = json.loads(done.stdout.strip().splitlines()[-1])
    for stage, fields in figures["stages_mib"].items():
        print(f"{stage}: {fields}")
    figures["machine"] = machine()
    if not args.no_save:
        save_json(OUT, figures)
        print(f"saved {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
