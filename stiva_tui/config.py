"""The configuration file: one TOML file, validated by pydantic.

`load_config(path)` reads the file (default: `paths.config_file()`), and a missing default file
means "all defaults" so that a first run needs no config at all. Any problem in the file raises
`ConfigError` whose message names the file and the field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import paths
from .core import toml_bounds
from .core.reading import ReadError, read_text

ConductorBackend = Literal["auto", "local", "embedded", "remote", "router"]
DEFAULT_LOCAL_MODEL = "Qwen/Qwen2.5-7B-Instruct"
CONFIG_LIMIT = 4 * 1024 * 1024  # bytes of a config file; past it, refused unread


class ConfigError(Exception):
    """The config file is missing, unreadable or invalid; the message says where and why."""


class _Strict(BaseModel):
    # Unknown keys, "yes" for a boolean, 2.0 for a count, and inf or nan for a price are errors.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ConductorConfig(_Strict):
    backend: ConductorBackend = "auto"
    # local: HF id or folder; remote: a pool model id. Empty means the backend's default.
    model: str = DEFAULT_LOCAL_MODEL
    adapter: str | None = None  # LoRA adapter folder on top of a local model
    # A one-pass router's folder (`stiva train router`): conductor-mini routes with it, one step on
    # the model it picks. (backend = "router" with model = the folder makes every conductor route.)
    router: str | None = None
    # conductor-mini with a router: where its best predicted chance is under this, the full
    # conductor plans the question instead (0: never)
    router_escalate_below: float = Field(0.0, ge=0.0, le=1.0)
    max_steps: int = Field(5, ge=1, le=20)
    rounds: int = Field(1, ge=1, le=5)
    max_reasoning_tokens: int = Field(256, ge=0, le=4096)
    max_subtask_chars: int = Field(400, ge=20, le=4000)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    # The cost and latency preference of every question unless one is given (--prefer, the app's
    # toggle, the API's stiva_preference): best | balanced | cheap | fast | a number 0 (best) .. 1
    # (cheap); "" states none (the conductor prompt says nothing about cost).
    prefer: str | float = ""
    # remote: how the plan's structure is sent to the server (docs/scale.md). auto: the JSON schema
    # in response_format, to discovered local servers only; json_schema: that, to any server;
    # vllm: vLLM's structured_outputs field; sglang: SGLang's json_schema field; none: never.
    structured: Literal["auto", "json_schema", "vllm", "sglang", "none"] = "auto"
    # The pool model that answers in one step when a plan cannot run (the guard rejected it, or the
    # planner wrote none), unless a router's prediction or the benches' recorded accuracy chose
    # one; "": the priciest model (docs/conductor.md, "Never worse than one call").
    fallback_model: str = ""
    # local: how plans are decoded (docs/measurements.md). hf: transformers' generate(); eager:
    # Stiva's own loop; static: that on a static KV cache; compiled: that with the decode step under
    # torch.compile (CUDA graphs on a GPU); "+jump": the tokens the grammar forces fed in one pass.
    # Every choice makes the same greedy plan; they differ in speed only.
    decode: Literal["hf", "eager", "eager+jump", "static", "static+jump", "compiled", "compiled+jump"] = "hf"
    # local: the 4-bit format. nf4: bitsandbytes (what QLoRA trains); int4: torchao's int4
    # weight-only (tinygemm on CUDA; needs the `fast` extra: pip install 'stiva-tui[fast]').
    quant: Literal["nf4", "int4"] = "nf4"

    @field_validator("prefer")
    @classmethod
    def _preference(cls, value):
        from .core.preference import parse_preference

        parse_preference(value)  # PreferenceError is a ValueError: a config error naming the key
        return value


class ProviderConfig(_Strict):
    name: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key_env: str | None = None
    # Extra HTTP headers some gateways want (never put keys here: use api_key_env or the keyring).
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")


class ModelConfig(_Strict):
    id: str = Field(min_length=1)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    price_in: float = Field(0.0, ge=0)
    price_out: float = Field(0.0, ge=0)
    description: str = ""
    enabled: bool = True
    context_window: int | None = None
    # A model that plans when no CUDA GPU runs the local conductor (`auto`); the cheapest marked one.
    planner: bool = False
    # Typical seconds a call takes, told to the conductor with a preference (else the history's median).
    latency_s: float | None = Field(None, ge=0)


class BudgetConfig(_Strict):
    usd: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, gt=0)


class WorkersConfig(_Strict):
    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0, le=2)
    timeout_s: float = Field(120.0, gt=0)  # the longest wait for the next bytes of a reply
    connect_timeout_s: float = Field(10.0, gt=0)
    # The longest a whole call may take, however steadily it streams (slow reasoning models
    # take minutes; a provider sending keep-alive comments forever does not time out otherwise).
    deadline_s: float = Field(600.0, gt=0)
    retries: int = Field(2, ge=0, le=10)
    # The most answer text one call may bring, in KiB of UTF-8 (1024: 1 MiB, some 250,000 tokens):
    # past it the call stops reading and fails, and no more of it is kept. One streamed chunk of
    # it is at most 4 MiB whatever this says.
    max_answer_kb: int = Field(1024, ge=1, le=16384)
    # Model ids tried, in order, when a step's own model still fails after its retries. Not set:
    # the other pool models (not the embedded one). `fallbacks = []`: no fallback at all.
    fallbacks: list[str] | None = None


class MoAConfig(_Strict):
    proposers: list[str] = Field(default_factory=list)  # empty: every available model
    aggregator: str | None = None  # None: the first proposer
    layers: int = Field(2, ge=1, le=5)


class BenchConfig(_Strict):
    # The pool model that grades `judge` items of a bench suite against their reference.
    judge: str | None = None
    # Tokens the judge may write (its verdict ends on CORRECT or INCORRECT).
    judge_max_tokens: int = Field(256, gt=0)


class SandboxConfig(_Strict):
    """[sandbox]: where model-written code runs (`stiva bench` code items, `stiva train` rewards).
    Every limit holds for a whole run, all its processes together."""

    timeout_s: float = Field(10.0, gt=0, le=600)  # wall time of one run, when an item sets none
    memory_mb: int = Field(512, ge=32, le=65536)
    processes: int = Field(64, ge=1, le=4096)
    disk_mb: int = Field(64, ge=1, le=65536)  # the run's /tmp, the only place it can write
    files: int = Field(4096, ge=16, le=1_000_000)  # files and folders in /tmp and /dev/shm together
    output_kb: int = Field(1024, ge=1, le=1024 * 1024)  # kept of stdout and of stderr each
    read_only: list[str] = Field(default_factory=list)  # more host paths the code may read
    site_packages: bool = False  # let the code import this environment's packages (numpy...)
    bwrap: str | None = None  # a bwrap to use instead of the system's or the bundled one

    def settings(self, *, unsafe: bool = False):
        from .sandbox import SandboxSettings

        return SandboxSettings(
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            processes=self.processes,
            disk_mb=self.disk_mb,
            files=self.files,
            output_kb=self.output_kb,
            read_only=tuple(self.read_only),
            site_packages=self.site_packages,
            bwrap=self.bwrap,
            unsafe=unsafe,
        )


LocalServerName = Literal["ollama", "vllm", "llamacpp", "lmstudio"]  # pool/discovery.py's KNOWN_SERVERS


class DiscoveryConfig(_Strict):
    # Look for local servers on their default ports, and check that the local endpoints the
    # config names answer (a dead one is shown as unreachable); each probe waits `timeout_s`.
    enabled: bool = True
    timeout_s: float = Field(0.3, gt=0, le=10)
    # Where a kind of server is looked for instead of its default port (ollama = 11435); 0: not at all.
    ports: dict[LocalServerName, Annotated[int, Field(ge=0, le=65535)]] = Field(default_factory=dict)


class ServeConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=1, le=65535)
    max_concurrent_runs: int = Field(16, ge=1)
    max_queue: int = Field(64, ge=0)
    max_body_bytes: int = Field(1_000_000, gt=0)
    # Host names besides loopback ones that --no-auth serves (a name in /etc/hosts, say).
    allowed_hosts: list[str] = Field(default_factory=list)
    # Connections (server/connections.py). A client gets this long to send a request's line and
    # headers (from its connection, or from the first byte of its next request), then a 408.
    header_timeout_s: float = Field(10.0, gt=0, le=3600)
    # ... and this long, once the head is in, for the whole body.
    body_timeout_s: float = Field(30.0, gt=0, le=3600)
    # An idle kept-alive connection is closed after this long: longer than the 5 s after which
    # httpx and the openai client stop reusing one, so that they let go first (a server that
    # closes first races a request already on its way: the client sees a dropped connection).
    keepalive_timeout_s: float = Field(15.0, gt=0, le=3600)
    # Open connections at most (fewer when `ulimit -n` has no room for them): beyond it, the oldest
    # idle or stalled connection is closed to make room.
    max_connections: int = Field(1000, ge=1)
    # Idle kept-alive connections at most: beyond it, the oldest is closed.
    max_idle_connections: int = Field(100, ge=0)
    # A connection whose replies make no progress for this long (its client reads none of them)
    # is closed (reset); at the cap, one stuck for half a second may be closed to make room.
    write_timeout_s: float = Field(30.0, gt=0, le=3600)
    # Requests answered on one connection ahead of the replies its client has read (pipelining):
    # beyond it the server reads no more from that connection until the client catches up.
    max_pipelined_requests: int = Field(8, ge=1, le=1000)


class WorkflowsConfig(_Strict):
    """[workflows]: how votes and agreement cascades compare open answers, where no final answer
    can be read (core/open_text.py). text: near-identical text agrees, with no call; judge: beyond
    that, a short judge call on the cheapest capable pool model, costed and shown on the tree."""

    open_agreement: Literal["text", "judge"] = "text"


SIM_PROVIDER = "stiva-sim"  # the provider the simulated pool's server is added to the config as
REPLAY_PROVIDER = "stiva-replay"  # the same for a replayed bench (`--pool replay:BENCH_ID`)


class AskConfig(_Strict):
    """[ask]: `stiva ask` answers from a warm worker process that keeps the model loaded between
    commands (stiva_tui/cli/warm.py); it exits after `warm_idle_s` seconds unused (0: no worker)."""

    warm_idle_s: float = Field(600.0, ge=0, le=7 * 24 * 3600)
    # A remote conductor loads no model; true sends its asks to the worker too (it saves the imports
    # and the pool's set-up, about 1-2 s an ask).
    warm_remote: bool = False


class SimModelConfig(_Strict):
    """[[sim.models]]: one simulated model of your own (stiva_tui/sim/profiles.py's SimModel): its
    chance of a right answer per domain of the suite, its prices, latency and length of answer."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # pool id sim:NAME
    skills: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    # The chance on a domain `skills` does not name (and on items with no domain).
    other: float = Field(0.2, ge=0, le=1)
    price_in: float = Field(0.1, ge=0, le=10_000)  # USD per 1M prompt tokens
    price_out: float = Field(0.4, ge=0, le=10_000)  # USD per 1M completion tokens
    latency_s: float = Field(0.2, ge=0, le=600)
    words: int = Field(20, ge=0, le=2000)  # words of working before the answer
    description: str = Field("", max_length=200)


class SimConfig(_Strict):
    """[sim]: Stiva serves the simulated pool's `sim:` models on 127.0.0.1 and adds them to the pool
    (`--pool sim` sets this, leaving out every other model). See stiva_tui/sim."""

    seed: int = 0  # which calls are right: the same seed gives the same answers
    latency_scale: float = Field(1.0, ge=0, le=100)  # times each model's latency (0: answer at once)
    # The suites whose questions the simulated models know (built-in names or files).
    suites: list[str] = Field(default_factory=lambda: ["skills"], min_length=1)
    # A bench id (or a unique prefix): serve that bench's recorded direct answers instead of the
    # profiles' models (`--pool replay:BENCH_ID`, stiva_tui/sim/replay.py)
    replay: str | None = None
    # Set by Stiva, not by hand: where a replayed bench's recorded answers came from (`stiva bench
    # import`), for the "recorded pool" label of every report
    replay_source: str = ""
    # Models of your own instead of the default profiles (a pool with another trade-off: a cheap,
    # a mid-priced and a dear model, say); names must differ.
    models: list[SimModelConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct_names(self) -> "SimConfig":
        names = [m.name for m in self.models]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"[[sim.models]] names must differ: {', '.join(twice)} given twice")
        return self


class Config(_Strict):
    conductor: ConductorConfig = Field(default_factory=ConductorConfig)
    providers: list[ProviderConfig] = Field(default_factory=list)
    models: list[ModelConfig] = Field(default_factory=list)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    moa: MoAConfig = Field(default_factory=MoAConfig)
    bench: BenchConfig = Field(default_factory=BenchConfig)
    discovery: DiscoveryConfig = Field(default_factory=DiscoveryConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    ask: AskConfig = Field(default_factory=AskConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    workflows: WorkflowsConfig = Field(default_factory=WorkflowsConfig)
    sim: SimConfig | None = None
    # Use the built-in catalog of hosted providers (joined when their key is present).
    catalog: bool = True
    # The embedded Gemma-3 270M as a worker of the pool. False keeps it out of every workflow
    # (it stays available as the conductor): for pools of real models.
    embedded_worker: bool = True
    # The app and `stiva serve` run the models Stiva loads itself (the embedded 270M, a local
    # conductor) in a process of their own, so that typing (or another request) never waits on their
    # load or their answers, and their own process stays small. false: in their own process.
    model_process: bool = True
    theme: str | None = None
    # The app's prompt: true sends on enter (alt+enter or shift+enter, where the terminal tells it
    # apart, adds a line); false (the default) adds a line on enter and sends on ctrl+j / alt+enter.
    enter_sends: bool = False
    # Binding id -> keys, e.g. {"send" = "ctrl+j"}; applied with Textual's keymap.
    keymap: dict[str, str] = Field(default_factory=dict)

    @field_validator("models")
    @classmethod
    def _unique_ids(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        seen: set[str] = set()
        for model in models:
            if model.id in seen:
                raise ValueError(f"model id {model.id!r} appears twice")
            seen.add(model.id)
        return models

    @model_validator(mode="after")
    def _unique_providers(self) -> "Config":
        names = {p.name for p in self.providers}
        if len(names) != len(self.providers):
            raise ValueError("two [[providers]] share a name")
        return self


def with_conductor_override(conductor: ConductorConfig, override: str | None) -> ConductorConfig:
    """Apply a command-line `BACKEND[:MODEL]` to the [conductor] table."""
    if not override:
        return conductor
    backend, _, model = override.partition(":")
    if backend not in ("auto", "local", "embedded", "remote"):
        raise ConfigError(f"unknown conductor backend {backend!r}: use auto, local[:MODEL], embedded or remote:MODEL")
    return conductor.model_copy(update={"backend": backend, **({"model": model} if model else {})})


def load_config(path: Path | str | None = None) -> Config:
    """Read and validate the config file. A missing *default* file gives the defaults."""
    explicit = path is not None
    file = Path(path).expanduser() if explicit else paths.config_file()
    if not file.exists():
        if explicit:
            raise ConfigError(f"config file {file} does not exist")
        return Config()
    try:
        text = read_text(file, CONFIG_LIMIT)
        data = toml_bounds.loads(text)  # a dotted key or nesting past the bounds: refused unparsed
    except ReadError as exc:
        raise ConfigError(str(exc)) from None
    except toml_bounds.TomlShapeError as exc:
        raise ConfigError(f"{file}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{file}: nested too deeply to be a Stiva config") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # tomllib lets int() refuse a number of over 4300 digits, with no line
        raise ConfigError(f"{file}: not valid TOML: {_huge_number_line(text)}") from None
    return parse_config(data, source=str(file))


def _huge_number_line(text: str) -> str:
    """Where `tomllib` met an integer longer than Python converts: the first line whose prefix
    of the file fails that way (a shorter prefix parses, or fails only at its cut end)."""
    import sys

    lines = text.splitlines(keepends=True)
    low, high = 1, len(lines)
    while low < high:
        middle = (low + high) // 2
        try:
            tomllib.loads("".join(lines[:middle]))
            fails = False
        except tomllib.TOMLDecodeError:
            fails = False
        except ValueError:
            fails = True
        if fails:
            high = middle
        else:
            low = middle + 1
    return f"a whole number longer than {sys.get_int_max_str_digits()} digits (at line {low})"


def parse_config(data: dict, source: str = "config") -> Config:
    try:
        config = Config.model_validate(data)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to be a Stiva config") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None
    providers = {p.name for p in config.providers}
    from .catalog import catalog_provider_names

    known = providers | catalog_provider_names()
    for model in config.models:
        if model.provider not in known:
            raise ConfigError(
                f"{source}: models.{model.id}: provider {model.provider!r} is not defined "
                f"in [[providers]] (known: {', '.join(sorted(known))})"
            )
    return config
