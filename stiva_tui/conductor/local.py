"""Local conductor backends: a transformers model plans under the lists grammar.

`HFConductor` plans with a transformers model loaded by `inference.checkpoints.load_model` (4-bit nf4):

- `LocalConductor`: any causal LM (HF id or folder, optionally a LoRA adapter) on CUDA.
- `EmbeddedConductor` (embedded.py): Gemma-3 270M on the CPU.

Planning runs `model.generate` in a worker thread; the text streams through `on_delta` on the
event loop's thread; cancelling the awaiting task stops generation at the next token. Decoding
has two phases inside one `generate` call (`PlanLogitsProcessor`): free reasoning (at most
`max_reasoning_tokens` tokens, special tokens masked), then the three lists under the xgrammar
grammar of `grammar.py`, masked by `inference.grammar_mask`, so every plan parses.
Generation stops where the plan does: the grammar's end allows only the end token, and an
unconstrained plan (`grammar=False`) stops at the first text whose lists are complete (`plan_end`).

torch, transformers and xgrammar are imported inside functions only. xgrammar comes with the `gpu`
extra: where it is missing, a conductor planning under the grammar raises ConductorError before it
generates anything, in one line that says how to add it (`no_grammar`; `conductor.choose` already
refuses a configured local conductor so), and the executor answers in one step, as it does for any
planner that gives no plan.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..config import DEFAULT_LOCAL_MODEL
from ..core.usage import Usage
from ..core.workflow import WorkflowParseError, parse_workflow, plan_end, split_reasoning
from ..inference.adapter_manifest import adapter_plan_format
from ..inference.checkpoints import QUANT_LABELS, LoadedModel, ModelSpec, load_model
from ..inference.decode import DecodeOptions
from ..inference.errors import ModelError
from ..inference.generation import (
    IncrementalDecoder,
    eos_token_ids,
    generate_async,
    generate_batch_sync,
    generate_rows_sync,
    has_chat_template,
    prompt_ids,
    render_plain,
    shared_prefix_len,
)
from ..inference.grammar_mask import GrammarMask, GrammarMaskError, GrammarNotInstalled, grammar_missing, token_tables
from ..inference.progress import Progress
from .base import ConductorError, DeltaCallback, Plan, PlanRequest
from .fewshot import base_conductor_prefix, base_conductor_prompt
from .prompt import GENERATION_PREFIX, compact_conductor_prompt, conductor_messages

# --- the two-phase plan processor ----------------------------------------------------------------

_LABEL_END = re.compile(
    r"""\b(model[ _-]?ids?|models|sub[ _-]?tasks?|access[ _-]?lists?|access)\b["'`*]*\s*(?:=|:)\s*$""",
    re.IGNORECASE,
)
# The end of the reasoning may begin a list label: then no quote or bracket may follow directly.
_LABEL_START = re.compile(r"""(?i)\b(model|models|sub|access)[\w \-"'`*]{0,14}$""")
_WANTS_LISTS = re.compile(r"""(?i)^\s*(\*\*|`{1,3}|#+\s*)?(model[ _-]?id|subtask|access[ _-]?list|\{|\[)""")


class PlanLogitsProcessor:
    """Free reasoning (bounded, no special tokens), then the three lists under the grammar."""

    def __init__(
        self,
        tokenizer: Any,
        compiled_grammar: Any,
        vocab_size: int,
        eos_id: int,
        max_reasoning_tokens: int,
        anchor: Sequence[int],
        use_grammar: bool = True,
    ):
        self.tokenizer = tokenizer
        self.compiled = compiled_grammar
        self.vocab_size = vocab_size
        self.eos_id = eos_id
        self.max_reasoning = max_reasoning_tokens
        self.use_grammar = use_grammar
        self.special, self.opener = token_tables(tokenizer, vocab_size)
        self.special_set = set(self.special.tolist())
        self._on_device: dict = {}
        self.decoder = IncrementalDecoder(tokenizer, anchor)
        self.phase = "reasoning" if max_reasoning_tokens > 0 else "lists"
        self.start: int | None = None
        self.reasoning_tokens = 0
        self.switch_at: int | None = 0 if self.phase == "lists" else None  # generated index
        self.mask = GrammarMask(compiled_grammar, eos_id) if use_grammar else None
        self._forced_prefix_done = False
        self._seen = 0  # the length of the ids whose last token was taken in

    def _idx(self, index: Any, scores: Any) -> Any:
        if index.device == scores.device:
            return index
        key = (id(index), str(scores.device))
        if key not in self._on_device:
            self._on_device[key] = index.to(scores.device)
        return self._on_device[key]

    def _switch(self, generated: int) -> None:
        self.phase = "lists"
        self.switch_at = generated

    def _take(self, input_ids: Any) -> int:
        """Take in the last token of `input_ids` (once per length); the number generated."""
        if self.start is None:
            self.start = input_ids.shape[1]
        length = input_ids.shape[1]
        generated = length - self.start
        if generated > 0 and length > self._seen:
            last = int(input_ids[0, -1])
            if self.phase == "reasoning":
                self.reasoning_tokens += 1
                self.decoder.push(last)
            elif self.mask is not None and generated > (self.switch_at or 0):
                self.mask.accept(last)
        self._seen = max(self._seen, length)
        return generated

    def forced_token(self, input_ids: Any) -> int | None:
        """The next token when the grammar allows only one (the list syntax, the keys, the end),
        else None: greedy decoding and sampling would pick it anyway, so a decode loop may feed it
        without asking the model (jump-forward, `inference.decode`). Free reasoning forces none."""
        if self.start is None or self.phase != "lists" or self.mask is None:
            return None
        self._take(input_ids)
        return self.mask.forced()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        generated = self._take(input_ids)
        if self.phase == "reasoning":
            text = self.decoder.text
            top = int(torch.argmax(scores[0]))
            if self.reasoning_tokens >= self.max_reasoning or _LABEL_END.search(text[-40:]):
                self._switch(generated)
            elif top == self.eos_id or top >= self.vocab_size or top in self.special_set:
                self._switch(generated)
            elif (not text or text.endswith("\n")) and self.reasoning_tokens > 0:
                piece = self.tokenizer.decode([top], skip_special_tokens=True)
                if _WANTS_LISTS.match(piece):
                    self._switch(generated)
            if self.phase == "reasoning":
                width = min(scores.shape[-1], self.vocab_size)
                scores.index_fill_(1, self._idx(self.special, scores), float("-inf"))
                if scores.shape[-1] > width:
                    scores[:, width:] = float("-inf")
                if _LABEL_START.search(text[-20:]):
                    scores.index_fill_(1, self._idx(self.opener, scores), float("-inf"))
                return scores
        # lists phase
        if self.mask is None:
            return scores
        try:
            return self.mask(scores)
        except GrammarMaskError as exc:
            raise ConductorError(str(exc)) from None


# --- the conductor ------------------------------------------------------------------------------


class HFConductor:
    """A conductor run by a local transformers model. Subclasses say how the model is loaded."""

    backend = "local"
    quantization: str | None = "nf4"

    def __init__(
        self,
        spec: ModelSpec,
        *,
        model_label: str | None = None,
        max_reasoning_tokens: int = 256,
        max_subtask_chars: int = 400,
        temperature: float = 0.0,
        grammar: bool = True,
        prompt_style: str = "auto",  # auto | chat | plain | base | compact
        plan_steps: int | None = None,
        decode: str = "hf",  # inference.decode: hf | eager | static | compiled, each "+jump" or not
    ):
        self.spec = spec
        try:
            self.decode = DecodeOptions.parse(decode)
        except ValueError as exc:
            raise ConductorError(str(exc)) from None
        self.model = model_label or spec.label or spec.source
        self.adapter = spec.adapter
        self.max_reasoning_tokens = max_reasoning_tokens
        # an adapter plans under the prompt, subtask bound and step limit it was trained under
        # (`stiva train --prompt compact --subtask-chars N --plan-steps K`): the same prompt text.
        # `plan_steps`: the step limit of a conductor being trained (`--plan-steps K`), as its
        # adapter will plan.
        trained_style, trained_chars, trained_steps = adapter_plan_format(spec.adapter)
        trained_steps = plan_steps or trained_steps
        self.trained_steps = trained_steps
        self.max_subtask_chars = min(max_subtask_chars, trained_chars or max_subtask_chars)
        if trained_steps is not None:
            self.max_steps_cap = min(self.max_steps_cap or trained_steps, trained_steps)
        self.temperature = temperature
        self.grammar = grammar
        self.prompt_style = trained_style or prompt_style
        self._loaded: LoadedModel | None = None
        self._load_lock = threading.Lock()
        self.last_stats: dict = {}

    # loading
    def _load(self, progress: Progress | None) -> LoadedModel:
        return load_model(self.spec, progress)

    def load_sync(self, progress: Progress | None = None) -> LoadedModel:
        """Load once (blocking); a model that cannot load raises ConductorError saying why."""
        if self._loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    try:
                        self._loaded = self._load(progress)
                    except ModelError as exc:
                        raise ConductorError(str(exc)) from exc
        return self._loaded

    async def load(self, progress: Progress | None = None) -> LoadedModel:
        """Load in a thread (progress is called from that thread); ConductorError when it cannot."""
        if self._loaded is not None:
            return self._loaded
        return await asyncio.to_thread(self.load_sync, progress)

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    def describe(self) -> dict:
        info: dict = {
            "backend": self.backend,
            "model": self.model,
            "quantization": self.quantization,
            "device": self.spec.device,
            "grammar": self.grammar,
            "decode": self.decode.label(),
        }
        if self._loaded is not None:
            info.update(self._loaded.describe())
        return info

    # prompting
    def style(self, loaded: LoadedModel) -> str:
        """How this model is prompted: "chat" (its chat template and the paper's prompt),
        "plain" (the same prompt as plain text) or "base" (few-shot completion, for base models:
        `auto` picks it for a model without a chat template) or "compact" (the short prompt of
        `prompt.compact_conductor_prompt`, which trained adapters can use)."""
        if self.prompt_style != "auto":
            return self.prompt_style
        return "chat" if has_chat_template(loaded.tokenizer) else "base"

    def prompt_ids(self, request: PlanRequest, loaded: LoadedModel) -> list[int]:
        tok = loaded.tokenizer
        style = self.style(loaded)
        if style == "base":
            return list(tok(base_conductor_prompt(request), add_special_tokens=True)["input_ids"])
        if style == "compact":
            return list(tok(compact_conductor_prompt(request), add_special_tokens=True)["input_ids"])
        messages = conductor_messages(request)
        if style == "plain":
            text = render_plain(messages, "Conductor") + " " + GENERATION_PREFIX
            return list(tok(text, add_special_tokens=True)["input_ids"])
        return prompt_ids(tok, messages, GENERATION_PREFIX)

    # At most this many steps whatever the request allows (None: no cap of its own).
    max_steps_cap: int | None = None

    def step_limit(self, request: PlanRequest) -> int:
        """The step limit this conductor plans under for `request`."""
        if self.max_steps_cap is not None:
            return min(request.max_steps, self.max_steps_cap)
        return request.max_steps

    def _prepare(self, request: PlanRequest, loaded: LoadedModel) -> "_PlanSetup":
        """Everything one plan's generation needs (the grammar compiled; blocking)."""
        style = self.style(loaded)
        # A base model is shown worked examples without reasoning: it writes the lists at once.
        reasoning_tokens = 0 if style in ("base", "compact") else self.max_reasoning_tokens
        prefix = "" if style in ("base", "compact") else GENERATION_PREFIX
        prompt = self.prompt_ids(request, loaded)
        allow_empty = request.round > 1
        pool = len(request.workers)
        vocab = int(getattr(loaded.model.config, "vocab_size", 0) or 0) or len(loaded.tokenizer)
        vocab = _logits_width(loaded, vocab)
        eos = eos_token_ids(loaded)
        eos_id = eos[0] if eos else int(loaded.tokenizer.eos_token_id)
        from .grammar import compiled_lists_grammar, max_lists_bytes

        compiled = None  # unconstrained decoding needs no grammar, nor xgrammar
        if self.grammar:
            try:
                compiled = compiled_lists_grammar(
                    loaded.tokenizer,
                    pool,
                    request.max_steps,
                    self.max_subtask_chars,
                    allow_empty,
                    vocab_size=vocab,
                    stop_token_ids=[eos_id],
                )
            except GrammarNotInstalled as exc:  # sampling for training: the how-to, whatever the backend
                raise ConductorError(f"the {self.backend} conductor cannot plan: {exc}") from None
        processor = PlanLogitsProcessor(
            loaded.tokenizer, compiled, vocab, eos_id, reasoning_tokens, prompt, use_grammar=self.grammar
        )
        if self.grammar:  # every token is >= 1 byte of the bounded grammar: it always ends
            budget = reasoning_tokens + max_lists_bytes(pool, request.max_steps, self.max_subtask_chars) + 2
        else:  # unconstrained (benchmarks, experiments): a generous but finite length
            budget = reasoning_tokens + request.max_steps * (self.max_subtask_chars // 3 + 24) + 32
        return _PlanSetup(
            prompt,
            processor,
            budget,
            eos_id,
            prefix,
            pool,
            allow_empty,
            self._static_prefix_tokens(request, loaded, style, prompt),
        )

    @staticmethod
    def _static_prefix_tokens(request: PlanRequest, loaded: LoadedModel, style: str, prompt: list[int]) -> int:
        """How many of the base prompt's first tokens are its static part (intro, models, worked
        examples), whose KV cache the model keeps between plans; 0 for the other styles."""
        if style != "base":
            return 0
        head = base_conductor_prefix(request.workers, request.max_steps, request.preference)
        return shared_prefix_len(loaded.tokenizer(head, add_special_tokens=True)["input_ids"], prompt)

    def _parse(self, setup: "_PlanSetup", request: PlanRequest, raw: str, loaded: LoadedModel):
        """(the full text, the workflow or None, the first parse error)."""
        prefix = setup.prefix
        if not prefix:
            full = raw
        else:
            full = prefix + (raw if raw[:1].isspace() else " " + raw) if raw else prefix
        error: WorkflowParseError | None = None
        for text in (full, _lists_part(raw, setup.processor, loaded, setup.prompt)):
            if text is None:
                continue
            try:
                return full, parse_workflow(text, setup.pool, request.max_steps, allow_empty=setup.allow_empty), None
            except WorkflowParseError as exc:
                error = error or exc
        return full, None, error

    @staticmethod
    def _plan_end(setup: "_PlanSetup", request: PlanRequest) -> Callable[[str, int], int | None]:
        """Where an unconstrained plan is complete (its lists written and valid): generation stops
        there. Under the grammar none is needed: its end allows only the end token."""

        def end(text: str, since: int) -> int | None:
            return plan_end(text, setup.pool, request.max_steps, allow_empty=setup.allow_empty, since=since)

        return end

    def limited(self, request: PlanRequest) -> PlanRequest:
        """`request` under this conductor's own step limit."""
        limit = self.step_limit(request)
        return request if limit == request.max_steps else dataclasses.replace(request, max_steps=limit)

    def sample_sync(self, request: PlanRequest, loaded: LoadedModel, temperature: float = 1.0) -> "SampledPlan":
        """One plan sampled from `loaded` (e.g. a model being trained) under the same prompt and
        grammar as `plan()`, with the log-probability of each sampled token under the distribution
        it was sampled from (the grammar's mask and the temperature applied). Blocking."""
        return self.sample_many_sync(request, loaded, 1, temperature)[0]

    def sample_many_sync(
        self, request: PlanRequest, loaded: LoadedModel, n: int, temperature: float = 1.0
    ) -> list["SampledPlan"]:
        """`n` plans for one request sampled in one batched `generate` (they share the prompt, so
        no padding), each row under its own grammar state, as `sample_sync` describes. Blocking."""
        request = self.limited(request)
        setups = [self._prepare(request, loaded) for _ in range(n)]
        recorder = _LogprobRecorder()
        rows = generate_batch_sync(
            loaded,
            setups[0].prompt,
            n,
            max_new_tokens=setups[0].budget,
            temperature=temperature,
            eos_ids=[setups[0].eos_id],
            logits_processors=[_RowProcessors([s.processor for s in setups]), recorder],
        )
        plans = []
        for i, (setup, ids) in enumerate(zip(setups, rows)):
            text = loaded.tokenizer.decode([t for t in ids if t != setup.eos_id], skip_special_tokens=True)
            full, workflow, _error = self._parse(setup, request, text, loaded)
            plans.append(
                SampledPlan(list(setup.prompt), list(ids), recorder.logprobs(ids, temperature, row=i), full, workflow)
            )
        return plans

    def sample_each_sync(
        self, requests: Sequence[PlanRequest], loaded: LoadedModel, temperature: float = 1.0
    ) -> list["SampledPlan"]:
        """One plan per request (each its own prompt, e.g. its own order of the pool), all sampled
        in one batched `generate` with left padding: the same distribution per plan as
        `sample_sync` on each request, at the cost of about one generation instead of one per
        plan. Blocking."""
        if not requests:
            return []
        requests = [self.limited(r) for r in requests]
        setups = [self._prepare(r, loaded) for r in requests]
        recorder = _LogprobRecorder()
        budget = max(s.budget for s in setups)  # each row's grammar ends it within its own budget
        rows = generate_rows_sync(
            loaded,
            [s.prompt for s in setups],
            max_new_tokens=budget,
            temperature=temperature,
            eos_ids=[setups[0].eos_id],
            logits_processors=[_RowProcessors([s.processor for s in setups]), recorder],
        )
        plans = []
        for i, (request, setup, ids) in enumerate(zip(requests, setups, rows)):
            ids = ids[: setup.budget]
            text = loaded.tokenizer.decode([t for t in ids if t != setup.eos_id], skip_special_tokens=True)
            full, workflow, _error = self._parse(setup, request, text, loaded)
            plans.append(
                SampledPlan(list(setup.prompt), list(ids), recorder.logprobs(ids, temperature, row=i), full, workflow)
            )
        return plans

    def no_grammar(self, why: str) -> str:
        """The one line `plan` says where the grammar is wanted and xgrammar is missing (`why`: what
        `grammar_mask` says, with how to add the gpu extra)."""
        return f"the {self.backend} conductor cannot plan: {why}"

    async def plan(self, request: PlanRequest, on_delta: DeltaCallback | None = None) -> Plan:
        if not request.workers:
            raise ConductorError("the pool is empty: add a model before asking")
        if self.grammar and (missing := grammar_missing()) is not None:
            raise ConductorError(self.no_grammar(missing))
        request = self.limited(request)
        loaded = await self.load()
        started = time.monotonic()
        try:
            setup = await asyncio.to_thread(self._prepare, request, loaded)
        except ConductorError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ConductorError(
                f"{self.backend} conductor: cannot prepare the plan: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            result = await generate_async(
                loaded,
                setup.prompt,
                on_text=on_delta,
                max_new_tokens=setup.budget,
                temperature=self.temperature,
                logits_processors=[setup.processor],
                eos_ids=[setup.eos_id],
                prefix_tokens=setup.prefix_tokens,
                decode=self.decode,
                stop_at=None if self.grammar else self._plan_end(setup, request),
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ConductorError(f"{self.backend} conductor: generation failed: {type(exc).__name__}: {exc}") from exc
        full, workflow, error = self._parse(setup, request, result.text, loaded)
        latency = time.monotonic() - started
        self.last_stats = {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "reasoning_tokens": setup.processor.reasoning_tokens,
            "first_token_s": result.first_token_s,
            "generate_s": result.seconds,
            "finish": result.finish,
            "forward_passes": result.forward_passes,
            "forced_tokens": result.forced_tokens,
        }
        if workflow is None:
            raise ConductorError(
                f"{self.backend} conductor wrote no valid workflow ({error}); finish={result.finish}. "
                "Try a larger max_subtask_chars/max_reasoning_tokens or another conductor model."
            )
        return Plan(
            workflow=workflow,
            reasoning=split_reasoning(full),
            raw_text=full,
            usage=Usage(result.prompt_tokens, result.completion_tokens),
            latency_s=latency,
        )


@dataclasses.dataclass
class _PlanSetup:
    prompt: list[int]
    processor: PlanLogitsProcessor
    budget: int
    eos_id: int
    prefix: str
    pool: int
    allow_empty: bool
    prefix_tokens: int = 0  # the prompt's static prefix, whose KV cache is reused


@dataclasses.dataclass
class SampledPlan:
    """A plan sampled for training: token ids, their log-probabilities, the text, the workflow
    (None when it does not parse, e.g. cut at the token limit)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    workflow: Any


class _RowProcessors:
    """One plan processor per row of a batch (each row has its own grammar state)."""

    def __init__(self, processors: Sequence[PlanLogitsProcessor]):
        self.processors = list(processors)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        for i, processor in enumerate(self.processors):
            row = scores[i : i + 1]
            out = processor(input_ids[i : i + 1], row)
            if out is not row:  # a processor that answered with a new tensor (forced end)
                scores[i : i + 1] = out
        return scores


class _LogprobRecorder:
    """A logits processor that keeps the final scores of each step (after the grammar's mask), so
    that the log-probability of each sampled token under the distribution it came from is known."""

    def __init__(self) -> None:
        self.steps: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.steps.append(scores.detach().float().clone())
        return scores

    def logprobs(self, token_ids: Sequence[int], temperature: float, row: int = 0) -> list[float]:
        import torch

        out = []
        for scores, token in zip(self.steps, token_ids):
            scaled = scores[row] / temperature if temperature > 0 else scores[row]
            out.append(float(torch.log_softmax(scaled, dim=-1)[int(token)]))
        return out


def _logits_width(loaded: LoadedModel, vocab: int) -> int:
    try:
        emb = loaded.model.get_output_embeddings()
        weight = getattr(emb, "weight", None)
        if weight is not None and weight.shape[0] >= 1:
            # 4-bit params are packed; fall back to the config for those
            if weight.dim() == 2 and weight.shape[1] > 1:
                return int(weight.shape[0])
    except Exception:  # noqa: BLE001
        pass
    return vocab


def _lists_part(raw: str, processor: PlanLogitsProcessor, loaded: LoadedModel, prompt: Sequence[int]) -> str | None:
    """The text from where the grammar phase began (a fallback parse)."""
    reasoning = processor.decoder.text
    if raw.startswith(reasoning):
        return raw[len(reasoning) :]
    return None


class LocalConductor(HFConductor):
    """The `local` backend: an instruct model (HF id or folder, + LoRA) in 4-bit nf4 on CUDA."""

    backend = "local"

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        adapter: str | None = None,
        *,
        device: str = "cuda",
        max_reasoning_tokens: int = 256,
        max_subtask_chars: int = 400,
        temperature: float = 0.0,
        grammar: bool = True,
        prompt_style: str = "auto",
        plan_steps: int | None = None,
        decode: str = "hf",
        quant: str = "nf4",
    ):
        cuda = device == "cuda"
        if quant not in QUANT_LABELS:
            raise ConductorError(f"unknown 4-bit format {quant!r}; choose nf4 or int4")
        self.quantization = QUANT_LABELS[quant]
        spec = ModelSpec(
            source=model,
            device=device,
            adapter=adapter,
            quantize=True,
            double_quant=cuda,
            compute_dtype="bfloat16" if cuda else "float32",
            label=model,
            quant=quant,
        )
        super().__init__(
            spec,
            model_label=model,
            max_reasoning_tokens=max_reasoning_tokens,
            max_subtask_chars=max_subtask_chars,
            temperature=temperature,
            grammar=grammar,
            prompt_style=prompt_style,
            plan_steps=plan_steps,
            decode=decode,
        )

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> "LocalConductor":
        return cls(
            model=config.model or DEFAULT_LOCAL_MODEL,
            adapter=config.adapter,
            max_reasoning_tokens=config.max_reasoning_tokens,
            max_subtask_chars=config.max_subtask_chars,
            temperature=config.temperature,
            decode=config.decode,
            quant=config.quant,
            **kwargs,
        )
