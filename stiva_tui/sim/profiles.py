"""The models of a simulated pool: what each is good at, what it costs, how fast and long it answers.

A profile is known, so a claim can be checked against it: the default pool has one specialist per
domain of the built-in `skills` suite, each cheap and right about 95% of the time on its own domain
and far less on the others, plus one expensive generalist that is fairly good everywhere (so the
best single model is the generalist, and routing each domain to its specialist beats it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .labels import SIM_LABEL as SIM_LABEL  # the label, where it always was

SIM_PREFIX = "sim:"
# The skill on a domain a profile does not name (and on items with no domain).
DEFAULT_SKILL = 0.2


@dataclass(frozen=True)
class SimModel:
    name: str  # the provider's model name; the pool id is "sim:" + name
    skills: dict[str, float] = field(default_factory=dict)  # domain -> probability of a right answer
    price_in: float = 0.1  # USD per 1M prompt tokens
    price_out: float = 0.4  # USD per 1M completion tokens
    latency_s: float = 0.2  # seconds for a whole answer (times the server's latency scale)
    words: int = 20  # words of working before the answer
    description: str = ""
    prefix: str = SIM_PREFIX  # of the pool id ("replay:" for a replayed bench's models)

    @property
    def pool_id(self) -> str:
        return self.prefix + self.name

    other: float = DEFAULT_SKILL  # the skill on a domain `skills` does not name

    def skill(self, domain: str | None) -> float:
        return self.skills.get(domain or "", self.other)


def configured_models(entries) -> list[SimModel]:
    """The `[[sim.models]]` of the config (config.SimModelConfig) as profiles; each description says
    it is simulated, as the default profiles' do."""
    return [
        SimModel(
            e.name,
            dict(e.skills),
            e.price_in,
            e.price_out,
            e.latency_s,
            e.words,
            e.description
            if e.description.lower().startswith("simulated")
            else ("simulated: " + e.description if e.description else "simulated"),
            other=e.other,
        )
        for e in entries
    ]


def default_models() -> list[SimModel]:
    """The default simulated pool (for the `skills` suite's four domains)."""
    return [
        SimModel(
            "calc",
            {"arithmetic": 0.95, "units": 0.55, "facts": 0.25, "code": 0.2},
            0.10,
            0.40,
            0.15,
            20,
            "simulated: small and cheap, strong at arithmetic",
        ),
        SimModel(
            "quiz",
            {"facts": 0.95, "arithmetic": 0.3, "units": 0.3, "code": 0.15},
            0.10,
            0.40,
            0.15,
            20,
            "simulated: small and cheap, strong at general knowledge",
        ),
        SimModel(
            "metric",
            {"units": 0.95, "arithmetic": 0.55, "facts": 0.3, "code": 0.2},
            0.10,
            0.40,
            0.15,
            20,
            "simulated: small and cheap, strong at unit conversions",
        ),
        SimModel(
            "coder",
            {"code": 0.92, "arithmetic": 0.5, "units": 0.35, "facts": 0.3},
            0.30,
            1.20,
            0.3,
            40,
            "simulated: mid-sized, strong at Python code",
        ),
        SimModel(
            "generalist",
            {"arithmetic": 0.72, "facts": 0.72, "units": 0.72, "code": 0.72},
            3.00,
            15.00,
            0.6,
            80,
            "simulated: large and dear, good at everything",
        ),
    ]
