"""Token usage, shared by the pool, the conductor and the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # True when the provider sent no usage, or none that could be true (`token_count`), and the
    # numbers were estimated from the text.
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters a token) for providers that send no usage."""
    return max(1, (len(text) + 3) // 4) if text else 0


# The most tokens one call may claim for its prompt or its answer: above every context window
# sold today. A provider's count beyond it (or negative, or not a whole number) is no count.
MAX_CALL_TOKENS = 10_000_000


def token_count(value: object) -> int | None:
    """`value` as a provider's token count when it is plausible: a whole number from 0 to
    MAX_CALL_TOKENS (JSON's 12.0 too); None for anything else (negative, fractional, huge, text,
    a boolean), which the caller treats as no usage sent: estimated, and marked so."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_CALL_TOKENS:
        return value
    return None
