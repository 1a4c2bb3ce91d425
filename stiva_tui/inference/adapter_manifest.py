"""The adapter manifest: `stiva_adapter.json`, written by `stiva train` beside the LoRA adapter.

    AdapterManifest.trained(base, label, folder, model.config, suite="skills", steps=40).write(out)
    manifest = AdapterManifest.read(folder)        # None: no manifest (not made by `stiva train`)

It says which base the adapter was trained on (loading it onto another base is refused:
`checkpoints._check_adapter_base`), and the prompt, subtask bound and step limit it learnt to
plan under (the conductor plans under them too: `conductor.local.HFConductor`).

One JSON object, `json.dumps(indent=2)` and a newline; the fields in the order below, the
optional ones left out when unset. GRPO (`train/trainer.py`) and DPO (`train/dpo.py`) write it
here, the loader and the conductor read it here. Reading is lenient: an adapter made before a
field existed, or a manifest written by hand, still loads; a value of the wrong kind is ignored.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADAPTER_MARKER = "stiva_adapter.json"
MANIFEST_LIMIT = 1024 * 1024  # bytes of it read; a larger one is no manifest, as a damaged one is
CONFIG_HASHED = 16 * 1024 * 1024  # bytes of a base's config.json hashed into its identity
PROMPT_STYLES = ("chat", "plain", "base", "compact")
_FINGERPRINT = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)
# Written whatever their value (a training always knows them); the others only when set.
_ALWAYS = ("base", "label", "identity", "fingerprint", "suite", "steps")


@dataclass(frozen=True)
class AdapterManifest:
    base: str | None = None  # "embedded", an HF id or a folder: as `--base` named it
    label: str | None = None  # the base's name in messages
    identity: str | None = None  # base_identity(): which base exactly (a folder's hash, or the hub id)
    fingerprint: dict[str, Any] = field(default_factory=dict)  # base_fingerprint(): its shapes
    suite: str | None = None  # the suite trained on ("votes" for DPO)
    steps: int | None = None
    trained_on: str | None = None  # DPO: "votes"
    pairs: int | None = None  # DPO: the pairs trained on
    prompt_style: str | None = None
    benches: tuple[str, ...] = ()  # DPO: the graded benches whose pairs joined the votes
    bench_pairs: str | None = None  # DPO: "all" or "best"
    max_subtask_chars: int | None = None
    max_steps_per_plan: int | None = None
    sft_weight: float | None = None  # DPO: RPO's weight on the chosen plan's NLL
    preferences: tuple[str, ...] = ()  # the preference levels trained under

    @classmethod
    def trained(cls, base: str, label: str, folder: str, model_config: Any, **fields: Any) -> "AdapterManifest":
        """The manifest of an adapter just trained on `base` (loaded from `folder`)."""
        return cls(
            base=base, label=label, identity=base_identity(folder), fingerprint=base_fingerprint(model_config), **fields
        )

    # writing
    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _ALWAYS or value not in (None, ()):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def write(self, folder: Path) -> Path:
        path = Path(folder) / ADAPTER_MARKER
        path.write_text(json.dumps(self.as_json(), indent=2) + "\n")
        return path

    # reading
    @classmethod
    def read(cls, folder: Path) -> "AdapterManifest | None":
        """What `stiva train` wrote beside an adapter (None when it wrote nothing readable)."""
        try:
            with (Path(folder) / ADAPTER_MARKER).open("rb") as f:
                text = f.read(MANIFEST_LIMIT + 1)
            if len(text) > MANIFEST_LIMIT:
                return None
            data = json.loads(text)
        except (OSError, ValueError, RecursionError):
            return None
        return cls.from_json(data) if isinstance(data, dict) else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "AdapterManifest":
        fingerprint = data.get("fingerprint")
        style = data.get("prompt_style")
        return cls(
            base=_text(data.get("base")),
            label=_text(data.get("label")),
            identity=_text(data.get("identity")),
            fingerprint=dict(fingerprint) if isinstance(fingerprint, dict) else {},
            suite=_text(data.get("suite")),
            steps=_count(data.get("steps"), 0),
            trained_on=_text(data.get("trained_on")),
            pairs=_count(data.get("pairs"), 0),
            prompt_style=style if style in PROMPT_STYLES else None,
            benches=_texts(data.get("benches")),
            bench_pairs=_text(data.get("bench_pairs")),
            max_subtask_chars=_count(data.get("max_subtask_chars"), 1),
            max_steps_per_plan=_count(data.get("max_steps_per_plan"), 1),
            sft_weight=_number(data.get("sft_weight")),
            preferences=_texts(data.get("preferences")),
        )

    @property
    def name(self) -> str | None:
        """The base's name for a message."""
        return self.label or self.base

    def plan_format(self) -> tuple[str | None, int | None, int | None]:
        """(prompt style, subtask bound, plan step limit) the adapter was trained under; None for
        what was not recorded."""
        return self.prompt_style, self.max_subtask_chars, self.max_steps_per_plan


def adapter_base(adapter: str | None) -> str | None:
    """The base `stiva train` trained `adapter` on ("embedded", an HF id or a folder), from its
    manifest; None when there is no adapter or it was not made by `stiva train`."""
    manifest = AdapterManifest.read(Path(adapter).expanduser()) if adapter else None
    return manifest.base if manifest else None


def adapter_plan_format(adapter: str | None) -> tuple[str | None, int | None, int | None]:
    """(prompt style, subtask bound, plan step limit) `stiva train` trained `adapter` under,
    recorded beside it: a trained adapter plans as it learnt to. None for what was not recorded."""
    manifest = AdapterManifest.read(Path(adapter).expanduser()) if adapter else None
    return manifest.plan_format() if manifest else (None, None, None)


def base_fingerprint(config: Any) -> dict[str, Any]:
    """What identifies the base an adapter fits (its shapes), from a transformers config."""
    text = getattr(config, "text_config", None) or config
    return {key: getattr(text, key, None) for key in _FINGERPRINT}


def base_identity(source: str) -> str:
    """Which base model `source` is: for a folder, a hash of its config and of the start of its
    weights (two models of one shape differ there); for a hub id, the id."""
    import hashlib

    folder = Path(source).expanduser()
    if not folder.is_dir():
        return source
    digest = hashlib.sha256()
    config = folder / "config.json"
    if config.exists():
        with config.open("rb") as f:
            digest.update(f.read(CONFIG_HASHED))
    weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if weights:
        with weights[0].open("rb") as f:
            digest.update(f.read(4 << 20))
    return "sha256:" + digest.hexdigest()[:32]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _count(value: Any, least: int) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= least else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
