"""`stiva serve` keeps answering everyone while one request streams hostile text (issue 56, item 8):
a 1 MB line woven with escape sequences, 100,000 zero-width characters, and 1 MB of characters
that could each begin a form of the pool's key, each sent by the provider as one chunk. The real
`stiva serve` runs in its own process; the model list is asked for throughout."""

from __future__ import annotations

import threading
import time

import httpx
from test_server import TOKEN, USER, ServeProcess

from tests.support.fakeprovider import Reply

KEY = "lab.Token_0123456789abcdef"  # a header value of the provider: masked in all it sends
HOSTILE = {
    "w1": ("\x1b[31mx\x1b]0;t\x07" * 80_000, "x" * 80_000),  # about 1 MB on one line
    "cond": ("\u200b" * 100_000 + "done", "done"),
    "w2": ("6c61622e" * 125_000, "6c61622e" * 125_000),  # hex digits: each may begin the key's hex form
}


def test_a_hostile_stream_does_not_hold_up_other_clients(tmp_path, fake):
    for model, (text, _) in HOSTILE.items():
        fake.default(model, Reply(text, chunks=[text], usage=(5, 5)))
    served = ServeProcess(
        tmp_path, fake, 4096, provider_headers={"X-Lab-Key": KEY}, models=tuple(HOSTILE), max_concurrent_runs=4
    )
    try:
        answers: dict[str, str] = {}

        def ask(model: str) -> None:
            client = served.client().with_options(timeout=120)
            chunks = client.chat.completions.create(model=model, messages=USER, stream=True)
            answers[model] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

        asking = [threading.Thread(target=ask, args=(model,)) for model in HOSTILE]
        waits = []
        with httpx.Client(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            for thread in asking:
                thread.start()
            while any(thread.is_alive() for thread in asking) or not waits:
                started = time.monotonic()
                client.get(served.url + "/v1/models").raise_for_status()
                waits.append(time.monotonic() - started)
                time.sleep(0.05)
        for thread in asking:
            thread.join()
    finally:
        log = served.stop()
    assert {model: answers.get(model) for model in HOSTILE} == {m: shown for m, (_, shown) in HOSTILE.items()}, log
    assert max(waits) < 2.0, f"the model list waited {max(waits):.1f} s ({len(waits)} asks)"
