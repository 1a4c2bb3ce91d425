"""The conductor prompt (the paper's shape, our words) and the worker prompt.

`conductor_messages(request)` gives the chat messages: a system message that says what the
conductor is and the exact output format, a user message with the question (and the
conversation so far), the numbered models with their descriptions and the step limit, and, for a
later round, the previous workflow and its answer. `GENERATION_PREFIX` begins the assistant's
turn: remote backends send it as a partial assistant message; local backends append it after the
chat template's generation prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.preference import latency_text, price_text
from ..core.workflow import Workflow
from .base import PlanRequest, PreviousRound, WorkerInfo

SYSTEM_PROMPT = """You are the Conductor: you do not answer questions yourself. You plan how a \
team of language models answers one, and a system runs your plan.

Split the question into subtasks, give each subtask to the model best suited to it, and decide \
which earlier answers each step may read. Steps that read nothing run at the same time; a step \
that reads others waits for them. The output of the last step is the final answer, so the last \
step must produce a complete answer to the question.

First think briefly about the plan in plain text. Then write exactly three lines and nothing \
after them:
model_id = [<model number for step 0>, <model number for step 1>, ...]
subtasks = ["<instruction for step 0>", "<instruction for step 1>", ...]
access_list = [<steps step 0 may read>, <steps step 1 may read>, ...]

Rules:
- model numbers come from the list of available models;
- every entry of access_list is [] (reads only the question), a list of earlier step numbers \
such as [0, 1], or "all" (every earlier step); a step never reads itself or a later step;
- the three lists have the same length, at most the step limit.
Examples: one call: model_id = [1], subtasks = ["Answer the question."], access_list = [[]]. \
A chain: access_list = [[], [0], [1]]. Two drafts and a judge: access_list = [[], [], [0, 1]]."""

# Told where the step limit leaves room for them (three calls or more): a vote of two is its first
# step, and a cascade asks two models, then a third.
VOTE_AND_GATE_RULES = """
Two kinds of step call no model and do not count against the limit: the subtask "vote" gives \
the majority final answer of the steps it reads, and "stop if they agree" ends the plan with \
their answer where the steps it reads agree, so the steps after it run only where they disagree. \
Ask 0 and 1, and 2 only if they disagree: model_id = [0, 1, 0, 2], subtasks = ["Answer the \
question.", "Answer the question.", "stop if they agree", "Answer the question."], \
access_list = [[], [], [0, 1], []]."""
VOTE_AND_GATE_MIN_STEPS = 3

RECURSION_INSTRUCTION = """This is round {round}. Your previous plan and the answer it produced \
are below. If the answer is correct and complete, keep it by writing three empty lists:
model_id = []
subtasks = []
access_list = []
Otherwise write a new plan; its steps may not read the previous round's steps, so put whatever \
they need from the previous answer into their subtasks."""

GENERATION_PREFIX = (
    "Let me think about how to split this question into subtasks, which models to use for each, "
    "and which step should see which answers."
)


def system_prompt(max_steps: int) -> str:
    """The conductor's system prompt: the votes' and gates' rules where the step limit has room."""
    return SYSTEM_PROMPT + (VOTE_AND_GATE_RULES if max_steps >= VOTE_AND_GATE_MIN_STEPS else "")


def conductor_messages(request: PlanRequest) -> list[dict]:
    """System and user messages for one planning round (without the generation prefix)."""
    return [
        {"role": "system", "content": system_prompt(request.max_steps)},
        {"role": "user", "content": conductor_user_message(request)},
    ]


def conductor_user_message(request: PlanRequest) -> str:
    parts: list[str] = []
    if request.conversation:
        parts.append("Conversation so far:\n" + format_conversation(request.conversation))
    parts.append(f"Question:\n{request.question.strip()}")
    parts.append("Available models:\n" + format_workers(request.workers))
    if request.preference is not None:
        parts.append(request.preference.sentence(request.workers))
    parts.append(f"Step limit: at most {request.max_steps} step{'s' if request.max_steps != 1 else ''}.")
    if request.previous is not None and request.round > 1:
        parts.append(RECURSION_INSTRUCTION.format(round=request.round))
        parts.append(format_previous(request.previous))
    return "\n\n".join(parts)


def compact_conductor_prompt(request: PlanRequest) -> str:
    """The short prompt of `stiva train --prompt compact` (and of the adapters it trains): the
    question, the models (with their prices and latencies, and "for prefer LEVEL" on the last
    line, next to where the plan begins, when a preference is given) and the step limit, in ~60 tokens instead of the paper's ~1,300. The
    grammar holds the format, so the model needs no instructions to write a valid plan, and a
    trained adapter learns what works; on a CPU this makes each training step many times cheaper."""
    lines = []
    if request.conversation:
        lines.append("Conversation so far: " + " ".join(format_conversation(request.conversation, 600).split()))
    if request.previous is not None and request.round > 1:
        lines.append("Previous answer: " + " ".join(request.previous.answer.split())[:400])
    lines.append(f"Question: {' '.join(request.question.split())}")
    preference = request.preference
    if preference is None:
        lines.append(
            "Models: "
            + "; ".join(
                f"{i} {w.id}" + (f" ({w.description.strip()})" if w.description.strip() else "")
                for i, w in enumerate(request.workers)
            )
        )
    else:  # the prices and latencies the preference weighs, inline; the preference last, next to the plan
        lines.append(
            "Models: "
            + "; ".join(
                f"{i} {w.id} ({', '.join(filter(None, [w.description.strip(), price_text(w), latency_text(w)]))})"
                for i, w in enumerate(request.workers)
            )
        )
    steps = f"at most {request.max_steps} step{'s' if request.max_steps != 1 else ''}"
    lines.append(f"Plan, {steps}:" if preference is None else f"Plan for prefer {preference.name}, {steps}:")
    return "\n".join(lines)


def format_workers(workers: Sequence[WorkerInfo]) -> str:
    return "\n".join(
        f"{i}: {w.id}" + (f" - {w.description.strip()}" if w.description.strip() else "") for i, w in enumerate(workers)
    )


def format_conversation(conversation: Sequence[dict], limit_chars: int = 4000) -> str:
    """Earlier turns, newest kept when the text is long."""
    lines = [f"{turn.get('role', 'user')}: {str(turn.get('content', '')).strip()}" for turn in conversation]
    text = "\n".join(lines)
    return text if len(text) <= limit_chars else "..." + text[-limit_chars:]


def format_previous(previous: PreviousRound) -> str:
    lines = ["Previous plan:", previous.workflow.to_text()]
    if previous.step_models:
        lines.append("(models: " + ", ".join(f"{i}={m}" for i, m in enumerate(previous.step_models)) + ")")
    lines.append("Previous final answer:\n" + previous.answer.strip())
    return "\n".join(lines)


_PLAIN_SUBTASKS = {"answer the question", "answer the user's question", "answer the question directly"}


def worker_messages(
    question: str,
    workflow: Workflow,
    index: int,
    outputs: dict[int, str],
    conversation: Sequence[dict] = (),
) -> list[dict]:
    """The prompt of step `index`: the overall task, the steps it may read, its subtask.

    Only the steps in its access list are shown (tagged by step number); nothing else leaks. The
    one step of a one-step plan is sent the question itself, as the user asked it (the
    conversation as turns before it), with the subtask only as a note of guidance — none when it
    says no more than "answer the question": a one-step plan is a direct call.
    """
    step = workflow.steps[index]
    if len(workflow.steps) == 1 and not step.access:
        guidance = step.subtask.strip()
        content = question.strip()
        if guidance and guidance.rstrip(".").lower() not in _PLAIN_SUBTASKS:
            content += f"\n\n(A note from the planner, as guidance only: {guidance})"
        return [*(dict(turn) for turn in conversation), {"role": "user", "content": content}]
    parts = []
    task = question.strip()
    if conversation:
        task = "Conversation so far:\n" + format_conversation(conversation) + "\n\nCurrent question:\n" + task
    parts.append(f"<overall_task>\n{task}\n</overall_task>")
    for j in step.access:
        earlier = workflow.steps[j]
        parts.append(
            f"<step_{j}_subtask>\n{earlier.subtask}\n</step_{j}_subtask>\n"
            f"<step_{j}_response>\n{outputs.get(j, '')}\n</step_{j}_response>"
        )
    parts.append(f"Your assigned subtask: {step.subtask}")
    return [{"role": "user", "content": "\n\n".join(parts)}]
