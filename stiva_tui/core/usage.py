"""Token usage, shared by the pool, the conductor and the engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


# An estimate that stands in for a provider's count must not undercount: the provider bills what
# it counted. English runs about four characters a token, code and other scripts fewer, so the
# estimates below count three, round up, and add what the chat template wraps each message in.
CHARS_PER_TOKEN_AT_MOST = 3
MESSAGE_OVERHEAD_TOKENS = 4  # a turn's role and delimiters (<|im_start|>user\n ... <|im_end|>\n)
REPLY_PRIMING_TOKENS = 3  # the assistant turn the template opens for the reply


def estimate_text_tokens(text: str) -> int:
    """A count of `text`'s tokens that is at least what a tokenizer gives for most text: three
    characters a token, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN_AT_MOST) if text else 0


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """The prompt tokens of chat `messages`, estimated so as not to undercount: each message's
    text (`estimate_text_tokens`) and its template overhead, and the reply's priming."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else str(content or "")
        total += MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(text)
    return total


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
