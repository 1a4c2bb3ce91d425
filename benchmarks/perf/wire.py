"""The sockets' frames, pickles (before) against JSON validated into typed messages (now): what one
frame costs to encode and decode (issue 50, round 4, item 6).

    .venv/bin/python -m benchmarks.perf.wire            # saves wire.json beside this script
    .venv/bin/python -m benchmarks.perf.wire --no-save

Three frames, each timed the way its socket makes and reads it:
- `token_delta`: the model process streaming one token of the embedded worker's answer (an event
  holding a TextDelta), the frame sent most often;
- `plan`: the model process's end of a plan call (a three-step Plan, its reasoning, stats and the
  conductor's facts), the largest frame a question sends that way;
- `live_step_delta`: the warm worker sending one StepDelta of the run to `stiva ask`'s live view.
Before: `pickle.dumps` (highest protocol) behind the 4-byte length, read back by `pickle.Unpickler`
(the warm socket: its "Stiva types only" subclass). Now: the message model built (pydantic
validates what it is given) and `core.wire.frame`, read back by `core.wire.decode` against the
socket's union. Each figure is the median of 7 runs of many frames, in microseconds per frame.
"""

from __future__ import annotations

import argparse
import io
import pickle
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import machine, save_json

HEADER_SIZE = 4
RUNS = 7


class _OldWarmUnpickler(pickle.Unpickler):
    """The warm socket's unpickler until 2026-12 (cli/warm.py), for its cost only."""

    SAFE = frozenset({"tuple", "list", "dict", "set", "frozenset", "str", "bytes", "int", "float", "bool"})

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("stiva_tui.core.") or (module == "builtins" and name in self.SAFE):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


def per_frame_us(work: Callable[[], object], number: int) -> float:
    """The median over RUNS of `number` calls of `work`, in microseconds a call."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(number):
            work()
        times.append((time.perf_counter() - started) / number * 1e6)
    return statistics.median(times)


def frames() -> dict[str, dict[str, Any]]:
    """Each frame's old message (a dict, pickled), how the new one is built, its union and unpickler."""
    from stiva_tui.cli import warm
    from stiva_tui.conductor.base import Plan
    from stiva_tui.core.events import StepDelta
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow
    from stiva_tui.pool.types import TextDelta
    from stiva_tui.runtime import model_wire as mw

    token = TextDelta(" the")
    reasoning = "The question needs a draft, a check and a short final answer. " * 8
    workflow = Workflow(
        (
            Step(0, "Write a first answer to the question, showing the steps.", ()),
            Step(1, "Check the draft for arithmetic and logic errors; list each one.", (0,)),
            Step(0, "Write the final answer, fixing what the check found.", (0, 1)),
        )
    )
    plan = Plan(workflow, reasoning, reasoning + "\n" + workflow.to_text(), Usage(612, 143), 1.84)
    stats = {"prompt_tokens": 612, "completion_tokens": 143, "reasoning_tokens": 96, "first_token_s": 0.21}
    stats |= {"generate_s": 1.6, "finish": "stop", "forward_passes": 98, "forced_tokens": 45}
    describe = {"backend": "embedded", "model": "google/gemma-3-270m", "quantization": "bf16", "device": "cpu"}
    describe |= {"memory_mb": 784.3, "load_s": 6.31, "adapter": None, "grammar": True, "decode": "eager+jump"}
    delta = StepDelta("3f9c2b1e7d6a4c58", 1, 2, " the")
    return {
        "token_delta": {
            "old": {"t": "event", "id": 7, "event": token},
            "new": lambda: mw.Event(id=7, event=token),
            "union": mw.Replies,
            "unpickler": pickle.Unpickler,
        },
        "plan": {
            "old": {"t": "done", "id": 5, "plan": plan, "stats": stats, "describe": describe},
            "new": lambda: mw.Done(id=5, plan=plan, stats=stats, describe=describe),
            "union": mw.Replies,
            "unpickler": pickle.Unpickler,
        },
        "live_step_delta": {
            "old": {"t": "event", "event": delta},
            "new": lambda: warm.RunEvent(event=delta),
            "union": warm.FromWorker,
            "unpickler": _OldWarmUnpickler,
        },
    }


def measure(spec: dict[str, Any], number: int) -> dict[str, Any]:
    from stiva_tui.core.wire import HEADER, decode, frame

    old, build, union, unpickler = spec["old"], spec["new"], spec["union"], spec["unpickler"]

    def old_encode() -> bytes:
        data = pickle.dumps(old, protocol=pickle.HIGHEST_PROTOCOL)
        return HEADER.pack(len(data)) + data

    def new_encode() -> bytes:
        return frame(build())

    old_frame, new_frame = old_encode(), new_encode()
    old_body, new_body = old_frame[HEADER_SIZE:], new_frame[HEADER_SIZE:]
    if unpickler(io.BytesIO(old_body)).load() != old or decode(new_body, union) != build():
        raise SystemExit("a frame did not read back as itself")
    figures = {
        "pickle_bytes": len(old_frame),
        "json_bytes": len(new_frame),
        "pickle_encode_us": per_frame_us(old_encode, number),
        "pickle_decode_us": per_frame_us(lambda: unpickler(io.BytesIO(old_body)).load(), number),
        "json_encode_us": per_frame_us(new_encode, number),
        "json_decode_us": per_frame_us(lambda: decode(new_body, union), number),
    }
    figures = {k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}
    figures["pickle_total_us"] = round(figures["pickle_encode_us"] + figures["pickle_decode_us"], 2)
    figures["json_total_us"] = round(figures["json_encode_us"] + figures["json_decode_us"], 2)
    figures["json_frames_per_s"] = round(1e6 / figures["json_total_us"])
    figures["json_over_pickle"] = round(figures["json_total_us"] / figures["pickle_total_us"], 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000, help="frames a run (default 5000; the plan: a fifth)")
    parser.add_argument("--no-save", action="store_true")
    options = parser.parse_args()
    results = {}
    for name, spec in frames().items():
        number = options.number // 5 if name == "plan" else options.number
        results[name] = measure(spec, number)
        print(name, results[name], flush=True)
    figures = {"machine": machine(), "runs": RUNS, "frames": results}
    if not options.no_save:
        print("saved", save_json(Path(__file__).with_suffix(".json"), figures))


if __name__ == "__main__":
    main()
