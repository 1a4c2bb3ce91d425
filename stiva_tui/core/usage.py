"""Token usage, shared by the pool, the conductor and the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # True when the provider sent no usage and the numbers were estimated from the text.
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
