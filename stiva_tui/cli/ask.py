"""`stiva ask QUESTION`: plan, run and print the answer.

A live view of the plan and its steps goes to stderr when it is a terminal (view.py); with --json,
stdout gets the run's trace as one JSON object instead. ctrl+c or SIGTERM cancels the run, which
the history keeps as cancelled.
"""

from __future__ import annotations

import argparse
import sys

from ..core import display as fmt
from .common import EXIT_CANCELLED, EXIT_FAILED, EXIT_TERMINATED, EXIT_USAGE, fail, run_async, stop_on_signals

# The conductor presets of runtime.modes.PRESETS, named here so that `--help` imports no engine.
PRESET_NAMES = ("conductor", "conductor-mini")


def add_parser(sub, common) -> None:
    ask = sub.add_parser("ask", parents=[common], help="answer one question and print it")
    ask.add_argument("question", nargs="?", help="the question (use - to read it from stdin)")
    ask.add_argument("--json", action="store_true", help="print one JSON trace instead of the live view")
    ask.add_argument("--rounds", type=int, help="conductor rounds (default from config: 1)")
    ask.add_argument("--max-steps", type=int, help="at most this many steps per workflow (default 5)")
    ask.add_argument(
        "--budget-usd",
        type=float,
        help="the run's cap: a plan whose estimate is over it is cut to fit or refused before any "
        "call, and the run stops once it has cost this much",
    )
    ask.add_argument("--budget-tokens", type=int, help="stop the run once it has used this many tokens")
    ask.add_argument(
        "--baseline",
        metavar="SYSTEM",
        help="run another system instead of the conductor: direct:MODEL (one model), moa "
        "(Mixture-of-Agents), or any one system stiva bench --systems takes",
    )
    ask.add_argument(
        "--preset",
        choices=sorted(PRESET_NAMES),
        help="the conductor with a preset's limits (conductor-mini: 2 steps, 1 round)",
    )
    ask.add_argument(
        "--continue",
        dest="continue_id",
        metavar="ID",
        help="add this question to conversation ID (printed after each answer)",
    )
    ask.add_argument(
        "--fork",
        metavar="RUN_ID:STEP",
        help="run step STEP (numbered as the tree shows it) of a finished run again on --model, and every "
        "step that reads it; the others keep their outputs. Prints the new branch",
    )
    ask.add_argument("--model", help="with --fork: the pool model the step runs on")
    ask.add_argument("--subtask", help="with --fork: the step's new subtask (default: its own)")
    ask.add_argument(
        "--no-warm",
        action="store_true",
        help="load the model in this process, not in the warm worker that keeps it between asks",
    )


def run(args: argparse.Namespace, config) -> int:
    return run_async(ask(args, config))


async def ask(args: argparse.Namespace, config) -> int:
    import asyncio

    from . import warm

    if args.fork is not None or args.model is not None or args.subtask is not None:
        from .fork import fork

        return await fork(args, config)
    if args.question is None:
        return fail("give a question (or --fork RUN_ID:STEP --model M)", EXIT_USAGE)
    question = _read_question(args.question)
    if not question.strip():
        return fail("the question is empty", EXIT_USAGE)
    stopped_by = stop_on_signals()
    if warm.wanted(args, config):  # the model stays loaded in a worker between asks; nothing heavy imported yet
        code = await warm.ask(
            args, question, stopped_by, ask_options=options_of(args), console_ui=ConsoleUI, present=present
        )
        if code is not None:
            return code
    from ..conductor.base import ConductorError
    from ..runtime import AskError, Runtime, StartupError
    from ..store import HistoryFault, StoreError
    from ..store.faults import HistoryFaultsHeldBack

    try:
        runtime = await Runtime.create(config, conductor=args.conductor)
    except (StoreError, StartupError) as exc:  # a full disk, a read-only or damaged history: one line
        return fail(str(exc), EXIT_FAILED if isinstance(exc, HistoryFault) else EXIT_USAGE)
    # Each failed history write logs a line (the writer's, the engine's, the store's at close):
    # held back, and said once, in the one line `_history_trouble` makes of them.
    held_back = HistoryFaultsHeldBack(every_error=True)
    try:
        return await _ask(args, runtime, question, held_back)
    except AskError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (ConductorError, StartupError) as exc:
        return fail(str(exc), EXIT_FAILED)
    except StoreError as exc:  # the history failed where nothing else caught it
        return fail(str(exc), EXIT_FAILED)
    except asyncio.CancelledError:
        code = stopped_by[0] if stopped_by else EXIT_CANCELLED
        trouble = _history_trouble(runtime, held_back)
        if trouble is not None:
            fail(trouble)
        return fail("terminated" if code == EXIT_TERMINATED else "cancelled", code)
    finally:
        await runtime.aclose()
        held_back.close()


def _history_trouble(runtime, held_back) -> str | None:
    """Why the run just asked is not (all) in the history, as the one line to say, or None.
    Waits for the queued writes first; the first full disk, read-only or damaged file is the
    reason before any other failure."""
    from ..store import StoreError

    store = runtime.store
    if store is None:
        return None
    failures: list[StoreError] = []
    try:
        store.wait_for_writes()
    except StoreError as exc:
        failures.append(exc)
    while (error := store.take_write_error()) is not None:  # nobody else will hear of these
        failures.append(error)
    reason = store.fault or held_back.fault or held_back.error or (failures[0] if failures else None)
    if reason is None:
        return None
    # A damaged page met by a read alone (the run itself written) is said as the store says it.
    return f"the history could not record this run: {reason}" if store.lost_writes or failures else str(reason)


def _read_question(argument: str) -> str:
    """The question (from stdin for "-") as valid Unicode: bytes that are not UTF-8 become U+FFFD,
    and a line says so, so that nothing deeper ever holds text it cannot store or send."""
    if argument == "-":
        raw = sys.stdin.buffer.read()
    else:  # Python keeps undecodable argv bytes as lone surrogates; these are the bytes again
        raw = argument.encode("utf-8", "surrogateescape")
    question = raw.decode("utf-8", "replace")
    if "\ufffd" in question and "\ufffd" not in raw.decode("utf-8", "ignore"):
        print(
            "stiva: note: the question held bytes that are not UTF-8; they were replaced with \ufffd", file=sys.stderr
        )
    return question


def _mode(args: argparse.Namespace, runtime):
    """(mode, run options) of what `stiva ask` runs: the conductor (maybe a preset), or the system
    `--baseline` names (runtime/systems.py, the grammar compare and `stiva bench` read too)."""
    from ..runtime import AskError, ConductorMode, SystemNameError, one_system

    if args.baseline is None:
        return ConductorMode(preset=args.preset), {}
    try:
        system = one_system(args.baseline, runtime.models, runtime.config.moa.aggregator)
    except SystemNameError as exc:
        raise AskError(str(exc)) from None
    return system.mode, dict(system.options)


async def _ask(args, runtime, question: str, held_back) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    ui = ConsoleUI(console, question, live=not args.json and console.is_terminal)
    done = await answer(options_of(args), runtime, question, held_back, ui)
    return present(done, console, json_trace=args.json)


def options_of(args: argparse.Namespace) -> dict:
    """What an ask asks for besides its question, as plain data (the warm worker gets it too)."""
    names = ("json", "rounds", "max_steps", "budget_usd", "budget_tokens", "baseline", "preset", "continue_id")
    names += ("prefer",)  # per question: the warm worker takes it with the question
    return {name: getattr(args, name, None) for name in names}


class ConsoleUI:
    """Where an ask's progress goes: stderr's status line, its live view and its notes. The warm
    worker (warm.py) sends the same calls over its socket to the `stiva ask` that asked."""

    def __init__(self, console, question: str, *, live: bool):
        self.console = console
        self.question = question
        self.live = live
        self._status = None
        self._view = None

    def say(self, markup: str, **kwargs) -> None:
        self.console.print(markup, **kwargs)

    def status(self, text: str | None) -> None:
        """Show (or update) the transient status line; None takes it away."""
        if text is None:
            if self._status is not None:
                self._status.stop()
                self._status = None
        elif self._status is None:
            self._status = self.console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def view(self, on: bool) -> None:
        """Start or end the live view of the run (only where it is drawn: a terminal, no --json)."""
        from .view import LiveView

        if on and self.live and self._view is None:
            self._view = LiveView(self.console, self.question)
            self._view.__enter__()
        elif not on and self._view is not None:
            self._view.__exit__(None, None, None)
            self._view = None

    @property
    def emit(self):
        """The run's events go to the live view where there is one (None: nobody listens)."""
        return self._view.handle if self._view is not None else None

    def close(self) -> None:
        self.status(None)
        self.view(False)


async def answer(options: dict, runtime, question: str, held_back, ui) -> dict:
    """Run the ask on `runtime`, its progress to `ui`; what `present` prints, as plain data. Raises
    as `ask` catches (AskError, ConductorError, StartupError, StoreError, CancelledError)."""
    from rich.markup import escape

    from ..runtime import Ask, ConductorMode
    from .view import printable

    args = argparse.Namespace(**options)
    mode, run_options = _mode(args, runtime)
    request = Ask(
        question,
        mode=mode,
        source="cli",
        conversation_id=_whole_conversation(runtime, args.continue_id),
        options=dict(
            run_options,
            rounds=args.rounds,
            max_steps=args.max_steps,
            budget_usd=args.budget_usd,
            budget_tokens=args.budget_tokens,
            # `--prefer`, per question: the warm worker takes it with the question, not at its start;
            # where it is not given, a baseline's own (conductor@cheap) stands
            **({"preference": args.prefer} if getattr(args, "prefer", None) is not None else {}),
        ),
    )
    for warning in runtime.warnings:
        ui.say(f"[yellow]warning:[/] config: {escape(printable(warning))}", highlight=False)
    runtime.sessions.check(request)  # an unknown model or conversation fails before a model loads
    planner = None
    if isinstance(mode, ConductorMode):
        planner = await _load_conductor(runtime, ui, mode, quiet=args.json)
    ui.view(True)
    estimates: list = []  # each round's plan priced before its calls, for the JSON trace

    def emit(event) -> None:
        from ..core.events import PlanEstimated

        if isinstance(event, PlanEstimated):
            estimates.append(event)
        shown = ui.emit
        if shown is not None:
            shown(event)

    try:
        outcome = await runtime.sessions.ask(request, emit=emit)
    finally:
        ui.view(False)
    result = outcome.result
    trouble = _history_trouble(runtime, held_back)
    t = result.totals
    finished = result.status == "finished"
    # read once, for the notes printed under the answer (the JSON trace carries them itself)
    stored = _stored_trace(runtime, result.run_id) if finished and not args.json else None
    return {
        "status": result.status,
        "answer": result.answer if finished else "",
        "error": result.error or result.status,
        "trouble": trouble,
        "warnings": list(outcome.warnings) if trouble is None else [],  # the history's: said once
        "notes": list(outcome.notes),
        "trace": (
            _trace_json(
                runtime, result, question, mode, args.baseline, planner, recorded=trouble is None, estimates=estimates
            )
            if args.json
            else None
        ),
        "fallback_notes": _fallback_notes(stored) if stored is not None else [],
        # what the live view's plan line says (a plan the guard replaced or flagged, no plan at all),
        # for a reader without the live view: a pipe, a file
        "plan_notes": _plan_notes(stored) if stored is not None and not ui.live else [],
        "totals": [t.prompt_tokens, t.completion_tokens, t.estimated, t.cost_usd, t.latency_s],
        # Only an id that is on disk, with this run, is offered: `--continue` on any other would fail.
        "conversation_id": (
            outcome.conversation_id
            if outcome.conversation_id
            and not args.json
            and trouble is None
            and _conversation_kept(runtime, outcome.conversation_id, result.run_id)
            else None
        ),
        "live": ui.live,  # the live view's last frame already ends on the totals
    }


def present(done: dict, console, *, json_trace: bool) -> int:
    """Print what `answer` found: the answer (or trace) on stdout, the rest on stderr; the exit code."""
    from rich.markup import escape

    from .view import printable

    for warning in done["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False)
    for note in done.get("notes", ()):
        console.print(f"[yellow]note:[/] {escape(printable(note))}", highlight=False)
    if json_trace:
        print(done["trace"])
    elif done["status"] == "finished":
        print(printable(done["answer"]))
        for note in done.get("plan_notes", ()):
            console.print(f"[yellow]note:[/] {escape(printable(note))}", highlight=False, soft_wrap=True)
        for note in done["fallback_notes"]:
            console.print(f"[yellow]fallback:[/] {escape(note)}", highlight=False, soft_wrap=True)
        if not done["live"]:
            prompt_tokens, completion_tokens, estimated, cost_usd, latency_s = done["totals"]
            console.print(
                f"[dim]{prompt_tokens:,} in · {completion_tokens:,} out"
                f"{' (estimated)' if estimated else ''} · {fmt.money(cost_usd)} · "
                f"{fmt.seconds(latency_s)}[/]"
            )
    if done["conversation_id"]:
        conversation_id = done["conversation_id"]
        # two lines, each within 80 columns: the command stays whole, to copy as it is
        console.print(f"[dim]conversation {conversation_id}[/]", highlight=False, soft_wrap=True)
        console.print(
            f'[dim]continue it: stiva ask --continue {conversation_id} "..."[/]', highlight=False, soft_wrap=True
        )
    trouble = done["trouble"]
    if done["status"] != "finished":
        code = fail(done["error"], EXIT_FAILED)
        return fail(trouble, code) if trouble is not None else code
    if trouble is not None:  # the answer is shown; that it is not kept is a failure all the same
        return fail(trouble, EXIT_FAILED)
    return 0


def _conversation_kept(runtime, conversation_id: str, run_id: str) -> bool:
    """Whether the history holds the conversation with this run (False where it cannot be read)."""
    from ..store import StoreError

    if runtime.store is None:
        return False  # kept in this process's memory only: gone once `stiva ask` ends
    try:
        return runtime.store.holds_run(conversation_id, run_id)
    except StoreError:
        return False


def _stored_trace(runtime, run_id: str):
    """The run's trace as the history keeps it, or None (no history, or it cannot be read)."""
    if runtime.store is None:
        return None
    try:
        return runtime.store.get_trace(run_id)
    except Exception:  # noqa: BLE001 - the history may be unwritable: the answer stands
        return None


def _plan_notes(trace) -> list[str]:
    """Stiva's note on each round's plan where it did not run as planned (replaced or flagged by
    the guard, no plan written); "one model in the pool" is no news."""
    from ..engine.executor import ONE_MODEL_NOTE

    return [round_.note for round_ in trace.rounds if round_.note and round_.note != ONE_MODEL_NOTE]


def _fallback_notes(trace) -> list[str]:
    """One line for each step that ran on another model than its own (its model kept failing)."""
    # steps numbered from 1, as the live view and the tree number them
    return [
        f"step {fmt.step(step.index)} of round {round_.round} was answered by {step.model}: {step.first_model} failed"
        for round_ in trace.rounds
        for step in round_.steps
        if step.status == "finished" and step.on_fallback
    ]


async def _load_conductor(runtime, ui, mode, quiet: bool):
    """Choose and load the mode's conductor with a progress line; say what it runs on."""
    from ..conductor.choose import loaded_facts
    from ..runtime.modes import conductor_variant

    ui.status("choosing the conductor…")
    try:

        def progress(fraction: float | None, message: str) -> None:
            pct = f" {fraction:.0%}" if fraction is not None else ""
            ui.status(f"{message}{pct}")

        conductor = await runtime.ensure_conductor(progress, conductor_variant(mode, runtime.config.conductor.router))
    finally:
        ui.status(None)
    if not quiet:
        from rich.markup import escape

        from .common import fold_parts, text_width

        width = text_width()
        facts = loaded_facts(conductor)
        lines = fold_parts(
            [f"conductor: {conductor.backend} · {conductor.model}", *(facts.split(" · ") if facts else [])], width
        )
        reason = runtime.reason_for(conductor)
        if len(lines[-1]) + 3 + len(reason) <= width:
            lines[-1] += f" — {reason}"
        else:  # the reason on a line of its own, where the whole line would pass the terminal's width
            lines.extend(fold_parts([f"— {reason}"], width, lead="  "))
        ui.say(escape("\n".join(lines)).replace("conductor:", "[dim]conductor:[/]", 1), highlight=False, soft_wrap=True)
    return conductor


def _trace_json(
    runtime, result, question: str, mode, system: str | None, planner=None, *, recorded: bool = True, estimates=()
) -> str:
    """The run's trace as `stiva ask --json` prints it, with what the conductor runs on. Where the
    history could not record the run (`recorded` False, or it cannot be read back), what it
    holds of it is completed from the run's result: the answer is printed all the same."""
    from ..runtime import ConductorMode
    from ..store import StoreError

    with_conductor = isinstance(mode, ConductorMode)
    try:
        trace = runtime.store.get_trace(result.run_id)
    except StoreError:
        if recorded:
            raise
        trace = _result_trace(result, question, mode, system)
    if not recorded:
        t = result.totals
        trace = trace.model_copy(
            update=dict(
                conversation_id=None,
                status=result.status,
                failure=result.failure,
                answer=result.answer if result.status == "finished" else trace.answer,
                error=result.error or None,
                totals=type(trace.totals)(
                    prompt_tokens=t.prompt_tokens,
                    completion_tokens=t.completion_tokens,
                    cost_usd=t.cost_usd,
                    latency_s=t.latency_s,
                    estimated=t.estimated,
                ),
            )
        )
    if with_conductor and planner is not None:
        # What the run recorded (backend, model, usage) stands; the rest is what it runs on.
        facts = {
            k: v
            for k, v in planner.describe().items()
            if k in type(trace.conductor).model_fields and k not in ("backend", "model", "usage") and v is not None
        }
        conductor = trace.conductor.model_copy(update={**facts, "reason": runtime.reason_for(planner)})
        trace = trace.model_copy(update={"conductor": conductor})
    if not estimates:
        return trace.model_dump_json(indent=2)
    import dataclasses
    import json

    # What each round's plan was expected to cost before its calls (engine/estimate.py): not in
    # the history, so added here from the run's events.
    body = json.loads(trace.model_dump_json())
    body["estimates"] = [{k: v for k, v in dataclasses.asdict(e).items() if k != "run_id"} for e in estimates]
    return json.dumps(body, indent=2, ensure_ascii=False)


def _result_trace(result, question: str, mode, system: str | None):
    """A run's trace made from its result alone (the history holds none of it)."""
    from ..core.trace import Trace
    from ..core.words import RUN_MODES

    kind = type(mode).__name__.removesuffix("Mode").lower()  # DirectMode: "direct"
    return Trace(
        run_id=result.run_id,
        question=question,
        status=result.status,
        source="cli",
        mode=kind if kind in RUN_MODES else "conductor",
        system=system or "conductor",
    )


def _whole_conversation(runtime, text: str | None) -> str | None:
    """`--continue`'s conversation, whole: its id or a unique start of one, as `history show`
    takes them (AskError, one line, where none or several match)."""
    from ..runtime import AskError
    from ..store import NotFoundError

    if text is None or runtime.store is None:
        return text
    try:
        return runtime.store.resolve_conversation(text)
    except NotFoundError as exc:
        raise AskError(str(exc)) from None
