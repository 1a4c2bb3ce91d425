"""The app's launch to its first answer, offline on the embedded model, as a user starts it a second time.

    python -m benchmarks.perf.first_answer [--runs 3] [--no-save]

The real `stiva` in a detached tmux pane (120x40), in a STIVA_HOME started once before (its
history made, the converted model shared from STIVA_MODEL_CACHE), no key, no discovery: the pool
is the embedded Gemma-3 270M alone. Each run launches the app and polls the pane every 20 ms; as
soon as the prompt shows, it types the question and sends it (ctrl+j), as a user who does not
wait. Figures of each run, in seconds from the launch:
- `first_frame_s`: the first capture with any visible character;
- `child_s`: the model process (model_process_main) seen under the app's pid (/proc);
- `loaded_s`: the status bar says the conductor is loaded;
- `first_answer_s`: the status bar shows the first run's totals (the run finished);
- `app_tree_rss_mib`, `worker_rss_mib`: the resident memory of the app's process tree (its model
  process included) and of the warm worker, read after the answers (/proc, VmRSS);
and `answer_s`: the same question asked again in that app, from ctrl+j to its totals (the model
loaded and warm), beside `ask_warm_s`: the wall time of `stiva ask` with the same question,
answered by the warm worker (started before, not timed).

Conditions, interleaved run by run so the machine's load falls on all alike:
- `no_worker`: no warm `stiva ask` worker is up;
- `warm_worker`: one is up, its model loaded (an ask answered just before);
- `two_threads`: as no_worker, with OMP_NUM_THREADS=2 (the model process's threads before
  model_process_main.cpu_threads: as many as the cores);
- `warm_worker_two_threads`: as warm_worker, the worker started with OMP_NUM_THREADS=2 (its
  threads before: as many as the cores);
each on the machine as found (`as_found`) and with a busy loop on each core (`busy`, plain Python
`while True: pass` processes, one per core). The 1-minute load average (os.getloadavg) is read
before and after every run: the machine is shared.

Saves first_answer.json beside itself: every run, each condition's medians, and the goals.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import STIVA, machine, save_json, stiva, stiva_env, temporary_home
from benchmarks.perf.first_paint import _tree_rss_kib

OUT = Path(__file__).with_suffix(".json")
SOCKET = "stiva-first-answer"
SESSION = "app"
CONFIG = "catalog = false\n[discovery]\nenabled = false\n"
QUESTION = "What is the capital of France?"
POLL_S = 0.02
TIMEOUT_S = 240.0
# The status bar's totals once a run finished: "149→9 tok · $0.00 · 1.5s" (a running one starts
# with "running ·").
DONE = re.compile(r"^\s*\d[\d.,k]*→[\d.,k]+ tok")
GOALS = {"warm_worker_first_answer_s": 2.0, "no_worker_first_answer_s": 8.0, "busy_over_as_found": 2.0}
GOAL_ANSWER_RATIO = 0.2  # the app's answer within 20% of the warm ask's


def tmux(*args: str, check: bool = False) -> str:
    done = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, timeout=20)
    if check and done.returncode != 0:
        raise SystemExit(f"tmux {' '.join(args)}: {done.stderr}")
    return done.stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", SESSION)


def status_line(text: str) -> str:
    lines = text.rstrip("\n").splitlines()
    return lines[-2] if len(lines) >= 2 else ""


def model_child(app_pid: int) -> int | None:
    """The model process under the app (its child), or None."""
    try:
        kids = Path(f"/proc/{app_pid}/task/{app_pid}/children").read_text().split()
    except OSError:
        return None
    for kid in kids:
        try:
            if b"model_process_main" in Path(f"/proc/{kid}/cmdline").read_bytes():
                return int(kid)
        except OSError:
            continue
    return None


def launch(env: dict[str, str]) -> float:
    keep = ("STIVA_HOME", "STIVA_MODEL_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "PATH", "HOME")
    keep += ("PYTHONPATH", "OMP_NUM_THREADS", "PYTHON_KEYRING_BACKEND")
    exports = " ".join(f"{k}={shlex.quote(env[k])}" for k in keep if k in env)
    command = f"exec env -i TERM=xterm-256color {exports} {shlex.quote(str(STIVA))}"
    tmux("kill-session", "-t", SESSION)
    started = time.monotonic()
    tmux("new-session", "-d", "-s", SESSION, "-x", "120", "-y", "40", command, check=True)
    return started


def send_question() -> float:
    tmux("send-keys", "-t", SESSION, "-l", QUESTION)
    time.sleep(0.2)  # ctrl+j in the same read as the text would arrive as part of it
    tmux("send-keys", "-t", SESSION, "C-j")
    return time.monotonic()


def wait_done(since: float, seen_running: bool) -> float:
    """Seconds from `since` until the status bar shows a finished run's totals (after it showed a
    running one, unless `seen_running`)."""
    while time.monotonic() - since < TIMEOUT_S:
        line = status_line(screen())
        if line.lstrip().startswith("running"):
            seen_running = True
        elif seen_running and DONE.match(line):
            return time.monotonic() - since
        time.sleep(POLL_S)
    raise SystemExit(f"no answer within {TIMEOUT_S} s:\n{screen()}")


def one_start(env: dict[str, str], worker: int | None = None) -> dict:
    """Launch the app, ask at once, wait for the answer; ask again; quit. `worker`: the warm
    worker's pid, whose memory is read beside the app's."""
    load_before = os.getloadavg()[0]
    started = launch(env)
    figures: dict = {}
    pane_pid = 0
    sent_at = None
    while time.monotonic() - started < TIMEOUT_S:
        text = screen()
        now = time.monotonic() - started
        if "first_frame_s" not in figures and text.strip():
            figures["first_frame_s"] = round(now, 3)
        if not pane_pid:
            pid = tmux("display", "-p", "-t", SESSION, "#{pane_pid}").strip()
            pane_pid = int(pid) if pid.isdigit() else 0
        if pane_pid and "child_s" not in figures and model_child(pane_pid) is not None:
            figures["child_s"] = round(now, 3)
        if "loaded_s" not in figures and "loaded in" in status_line(text):
            figures["loaded_s"] = round(now, 3)
        if sent_at is None and "Ask anything" in text:
            figures["prompt_s"] = round(now, 3)
            sent_at = send_question()
            figures["asked_s"] = round(sent_at - started, 3)
            break
        time.sleep(POLL_S)
    if sent_at is None:
        raise SystemExit(f"the prompt never showed:\n{screen()}")
    while "child_s" not in figures or "loaded_s" not in figures:  # watched while the answer comes
        line = status_line(screen())
        now = time.monotonic() - started
        if "child_s" not in figures and model_child(pane_pid) is not None:
            figures["child_s"] = round(now, 3)
        if "loaded_s" not in figures and "loaded in" in line:
            figures["loaded_s"] = round(now, 3)
        if DONE.match(line) or now > TIMEOUT_S:
            break
        time.sleep(POLL_S)
    figures["first_answer_s"] = round(wait_done(started, seen_running=True) + 0.0, 3)
    first_screen = screen()
    figures["answered_paris"] = "Paris" in first_screen
    figures["child_under_app"] = model_child(pane_pid) is not None
    time.sleep(0.5)
    again = send_question()
    figures["answer_s"] = round(wait_done(again, seen_running=False), 3)
    # The memory of every copy of the model: the app's process tree (its model process), the worker.
    figures["app_tree_rss_mib"] = round(_tree_rss_kib(pane_pid) / 1024, 1)
    if worker is not None:
        figures["worker_rss_mib"] = round(_tree_rss_kib(worker, alone=True) / 1024, 1)
    figures["load_1min_before"] = round(load_before, 2)
    figures["load_1min_after"] = round(os.getloadavg()[0], 2)
    tmux("send-keys", "-t", SESSION, "C-q")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and tmux("has-session", "-t", SESSION) == "" and _alive():
        time.sleep(0.2)
    tmux("kill-session", "-t", SESSION)
    time.sleep(0.5)
    return figures


def _alive() -> bool:
    return subprocess.run(["tmux", "-L", SOCKET, "has-session", "-t", SESSION], capture_output=True).returncode == 0


def timed_ask(env: dict[str, str]) -> float:
    started = time.monotonic()
    done = stiva("ask", QUESTION, env=env, timeout=600)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"stiva ask failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return took


def worker_pid(env: dict[str, str]) -> int | None:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from stiva_tui.cli import warm

        status = asyncio.run(warm.worker_status())
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return int(status["pid"]) if status else None


def stop_worker(env: dict[str, str]) -> None:
    pid = worker_pid(env)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)


def busy_loops() -> list[subprocess.Popen]:
    cores = len(os.sched_getaffinity(0))
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]


def stop(loops: list[subprocess.Popen]) -> None:
    for loop in loops:
        loop.kill()
        loop.wait()


def median(rows: list[dict], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--conditions", default="no_worker,two_threads,warm_worker,warm_worker_two_threads")
    parser.add_argument("--places", default="as_found,busy")
    options = parser.parse_args()
    wanted = options.conditions.split(",")
    worker_threads: dict[str, str] = {}  # which worker is up: "warm_worker" or "warm_worker_two_threads"
    runs: dict[str, list[dict]] = {}
    loads: list[float] = [round(os.getloadavg()[0], 2)]
    with temporary_home("stiva-first-answer-") as home:
        env = stiva_env(home, CONFIG)
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        print("first start (not timed): the history made", flush=True)
        one_start(env)
        try:
            for i in range(options.runs):
                for place in options.places.split(","):
                    for condition in wanted:
                        run_env = dict(env)
                        if condition == "two_threads":
                            run_env["OMP_NUM_THREADS"] = "2"
                        worker_env = dict(env, OMP_NUM_THREADS="2") if condition == "warm_worker_two_threads" else env
                        if condition.startswith("warm_worker"):
                            if worker_threads.get("now") != condition:  # a worker of the other thread count
                                stop_worker(env)
                            ask_s = timed_ask(worker_env)  # starts the worker (or finds it), its model loaded
                            worker_threads["now"] = condition
                        else:
                            stop_worker(env)
                            worker_threads.pop("now", None)
                        loops = busy_loops() if place == "busy" else []
                        try:
                            figures = one_start(
                                run_env, worker_pid(env) if condition.startswith("warm_worker") else None
                            )
                            if condition.startswith("warm_worker"):
                                figures["ask_warm_s"] = round(timed_ask(worker_env), 3)
                                figures["ask_before_s"] = round(ask_s, 3)
                        finally:
                            stop(loops)
                        name = f"{condition}_{place}"
                        runs.setdefault(name, []).append(figures)
                        loads.append(figures["load_1min_after"])
                        print(f"run {i + 1} {name}: {figures}", flush=True)
        finally:
            stop_worker(env)
            tmux("kill-server")
    medians = {
        name: {
            key: median(rows, key)
            for key in (
                "first_frame_s",
                "child_s",
                "loaded_s",
                "first_answer_s",
                "answer_s",
                "ask_warm_s",
                "app_tree_rss_mib",
                "worker_rss_mib",
            )
            if median(rows, key) is not None
        }
        for name, rows in runs.items()
    }
    figures: dict = {
        "what": "the real stiva in tmux (120x40), offline (the embedded model alone), a second start: launch to "
        "the first answer with the question typed as soon as the prompt shows; then the same question again "
        "(answer_s) beside the warm stiva ask (ask_warm_s); medians of the runs, conditions interleaved",
        "question": QUESTION,
        "runs_per_condition": options.runs,
        "load_1min": {"min": min(loads), "median": round(statistics.median(loads), 2), "max": max(loads)},
        "runs": runs,
        "median": medians,
        "goals": goals(medians),
        "machine": machine(),
    }
    print(figures["median"], figures["goals"], flush=True)
    if not options.no_save:
        save_json(OUT, figures)
        print(f"saved {OUT}")
    return 0


def goals(medians: dict) -> dict:
    """Each goal: its target, the figure, and whether it was met (None: not measured)."""
    out: dict = {}

    def first(name: str) -> float | None:
        return medians.get(name, {}).get("first_answer_s")

    for condition, key in (("warm_worker", "warm_worker_first_answer_s"), ("no_worker", "no_worker_first_answer_s")):
        for place in ("as_found", "busy"):
            value = first(f"{condition}_{place}")
            target = GOALS[key] * (GOALS["busy_over_as_found"] if place == "busy" else 1)
            out[f"{condition}_{place}_first_answer"] = {
                "goal_s": target,
                "median_s": value,
                "met": None if value is None else value <= target,
            }
    for condition in ("warm_worker", "no_worker"):
        calm, busy = first(f"{condition}_as_found"), first(f"{condition}_busy")
        if calm and busy:
            out[f"{condition}_busy_over_as_found"] = {
                "ratio": round(busy / calm, 2),
                "met": busy / calm <= GOALS["busy_over_as_found"],
            }
    for place in ("as_found", "busy"):
        app = medians.get(f"warm_worker_{place}", {}).get("answer_s")
        ask = medians.get(f"warm_worker_{place}", {}).get("ask_warm_s")
        if app is not None and ask is not None:
            out[f"answer_vs_ask_warm_{place}"] = {
                "app_answer_s": app,
                "ask_warm_s": ask,
                "ratio": round(app / ask, 2),
                "met": abs(app / ask - 1) <= GOAL_ANSWER_RATIO,
            }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
