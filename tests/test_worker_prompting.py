"""A worker may build its own prompt and clean its own answer (the embedded base model does): the
engine asks it through the `Worker` protocol's optional `prepare` hook, never by the model's kind."""

from __future__ import annotations

import ast
from pathlib import Path

from stiva_tui.core.usage import Usage
from stiva_tui.core.workflow import Step, Workflow, parse_workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker, PoolWorker
from stiva_tui.pool.embedded import BASE_WORKER_PREFIX, EmbeddedWorker, embedded_pool_model
from stiva_tui.pool.types import PoolModel, StepInput, TextDelta, UsageReport, WorkerPrompt

ROOT = Path(__file__).resolve().parents[1]
ONE_STEP = Workflow((Step(0, "Answer the question.", ()),))


class Scripted:
    """An in-process worker with prompting of its own, for a model of an ordinary kind."""

    def __init__(self, reply: str):
        self.reply = reply
        self.calls: list[tuple[list[dict], int | None, list[str] | None]] = []

    def prepare(self, model: PoolModel, step: StepInput) -> WorkerPrompt | None:
        case = f"Q: {step.question} (step {step.index + 1} of {len(step.workflow.steps)})"
        return WorkerPrompt([{"role": "user", "content": case}], ("\n",), 7, finish=lambda text: text.strip().upper())

    async def stream_chat(self, model, messages, *, max_tokens=None, temperature=None, stop=None):
        self.calls.append((list(messages), max_tokens, stop))
        yield TextDelta(self.reply)
        yield UsageReport(Usage(3, 2))


async def test_the_engine_sends_a_workers_own_prompt_and_its_cleaned_answer():
    worker = Scripted("  ok then  ")
    model = PoolModel(id="m", provider="p", model="m")  # kind "openai": the hook alone decides
    engine = Engine([model], worker)
    passthrough = ({"role": "user", "content": "raw"},)
    result = await engine.run_workflow("Why?", ONE_STEP, [model], options=RunOptions(messages=passthrough))
    assert result.status == "finished" and result.answer == "OK THEN"
    assert worker.calls == [([{"role": "user", "content": "Q: Why? (step 1 of 1)"}], 7, ["\n"])]


async def test_a_worker_without_the_hook_gets_the_chat_prompt_and_its_answer_as_is():
    class Plain(Scripted):
        def prepare(self, model, step):
            return None

    worker = Plain("  as is ")
    model = PoolModel(id="m", provider="p", model="m")
    result = await Engine([model], worker).run_workflow("Why?", ONE_STEP, [model])
    assert result.answer == "  as is " and worker.calls == [([{"role": "user", "content": "Why?"}], None, None)]


def test_the_pool_worker_routes_the_prompt_to_the_embedded_worker_only():
    step = StepInput("What is 2 + 2?", ONE_STEP, 0, {})
    hosted = PoolModel(id="gpt-5", provider="openai", model="gpt-5")
    pool = PoolWorker(HttpWorker())
    assert pool.prepare(hosted, step) is None and HttpWorker().prepare(hosted, step) is None
    prompt = pool.prepare(embedded_pool_model(), step)
    assert prompt == EmbeddedWorker().prepare(embedded_pool_model(), step)
    assert prompt.messages == [
        {"role": "system", "content": BASE_WORKER_PREFIX},
        {"role": "user", "content": "Question: What is 2 + 2?\nNote: calculator: 2 + 2 = 4\nAnswer:"},
    ]
    assert prompt.stop == ("\n",) and prompt.max_tokens == 48
    assert prompt.finish("Answer: Four.\nQuestion: next?") == "Four."


def test_a_wrapper_passes_the_hook_on():
    from stiva_tui.pool.answer_cache import CachingWorker

    step = StepInput("Q", parse_workflow('model_id = [0]\nsubtasks = ["a"]\naccess_list = [[]]', 1), 0, {})
    wrapped = CachingWorker(PoolWorker(HttpWorker()), None)
    assert wrapped.prepare(embedded_pool_model(), step).max_tokens == 48


def test_the_executor_knows_no_model_kind_nor_the_few_shot_prompts():
    source = (ROOT / "stiva_tui/engine/executor.py").read_text()
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.module}
    assert "conductor.fewshot" not in imported and "pool.embedded" not in imported
    assert "kind ==" not in source and "model.kind" not in source
