"""What one streamed upstream call costs the server's CPU, by HTTP client (run by hand).

    .venv/bin/python -m benchmarks.perf.upstream_client [--calls 400] [--rounds 3]

`stiva serve` spent about 12-20 ms of CPU on a conductor-mini request, which makes three
streaming upstream calls (serve.json), and at 16 clients on 2 cores its added p50 was queueing for
that CPU. This measures what one call costs by client: the CPU time of the calling process per
streamed completion, against the same scripted upstream (tests/support/fakeprovider.py, in its own process,
answering at once), one call after another on a kept-alive connection, on uvloop as `stiva serve`
runs. It led to the switch of the pool's client from httpx to aiohttp (2026-12-04).

- `stiva HttpWorker`: the real path (aiohttp since the switch, httpx-sse's decoder, our parsing of
  every chunk into events and usage);
- `httpx + httpx-sse`: the path before the switch, rebuilt here (httpx + httpcore + anyio,
  httpx-sse's aconnect_sse, each data line's JSON parsed);
- `httpx lines`: httpx reading raw lines, no SSE decoding or parsing (what httpx itself costs);
- `aiohttp`: aiohttp's ClientSession reading the same SSE lines and parsing each data line's JSON
  (what aiohttp itself costs with the least parsing).

Prints a table and saves the figures beside this file as upstream_client.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from pathlib import Path

from benchmarks.harness import machine, save_json
from benchmarks.perf.serve import free_port

HERE = Path(__file__).resolve().parent

TEXT = "The answer is forty-two, as the draft said, checked twice."
MESSAGES = [{"role": "user", "content": "What is six times seven?"}]


def run_upstream(port: int, ready) -> None:
    from tests.support.fakeprovider import FakeProvider, Reply

    fake = FakeProvider(port=port)
    fake.default("m", Reply(TEXT, usage=(80, 12)))
    fake.start()
    ready.set()
    while True:
        time.sleep(3600)


def body() -> dict:
    return {"model": "m", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}


async def stiva_worker(base: str, calls: int) -> None:
    from stiva_tui.pool.client import HttpWorker
    from stiva_tui.pool.types import PoolModel, TextDelta

    worker = HttpWorker()
    model = PoolModel(id="m", provider="fake", model="m", base_url=base)
    try:
        for _ in range(calls):
            text = "".join([e.text async for e in worker.stream_chat(model, MESSAGES) if isinstance(e, TextDelta)])
            assert text == TEXT, text
    finally:
        await worker.aclose()


async def httpx_lines(base: str, calls: int) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        for _ in range(calls):
            async with client.stream("POST", base + "/chat/completions", json=body()) as response:
                async for _line in response.aiter_lines():
                    pass


async def httpx_sse(base: str, calls: int) -> None:
    import httpx
    from httpx_sse import aconnect_sse

    async with httpx.AsyncClient() as client:
        for _ in range(calls):
            parts = []
            async with aconnect_sse(client, "POST", base + "/chat/completions", json=body()) as source:
                async for sse in source.aiter_sse():
                    if sse.data and sse.data != "[DONE]":
                        for choice in json.loads(sse.data).get("choices") or []:
                            parts.append((choice.get("delta") or {}).get("content") or "")
            assert "".join(parts) == TEXT


async def aiohttp_sse(base: str, calls: int) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for _ in range(calls):
            parts = []
            async with session.post(
                base + "/chat/completions", json=body(), headers={"Accept": "text/event-stream"}
            ) as response:
                async for raw in response.content:
                    line = raw.strip()
                    if line.startswith(b"data:") and line != b"data: [DONE]":
                        chunk = json.loads(line[5:])
                        for choice in chunk.get("choices") or []:
                            parts.append((choice.get("delta") or {}).get("content") or "")
            assert "".join(parts) == TEXT


CLIENTS = {
    "stiva HttpWorker": stiva_worker,
    "httpx + httpx-sse": httpx_sse,
    "httpx lines": httpx_lines,
    "aiohttp": aiohttp_sse,
}


def measure(name: str, base: str, calls: int) -> dict:
    from stiva_tui.server.app import event_loop_factory

    async def one() -> tuple[float, float]:
        await CLIENTS[name](base, 20)  # warm: imports, the connection, caches
        cpu, wall = time.process_time(), time.perf_counter()
        await CLIENTS[name](base, calls)
        return time.process_time() - cpu, time.perf_counter() - wall

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        cpu, wall = runner.run(one())
    return {"cpu_ms_per_call": round(cpu * 1000 / calls, 3), "wall_ms_per_call": round(wall * 1000 / calls, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    upstream = ctx.Process(target=run_upstream, args=(port, ready), daemon=True)
    upstream.start()
    ready.wait(30)
    base = f"http://127.0.0.1:{port}"
    names = list(CLIENTS)
    rounds: dict[str, list[dict]] = {n: [] for n in names}
    try:
        for _ in range(args.rounds):  # interleaved, so a busy moment of the machine hits all alike
            for name in names:
                rounds[name].append(measure(name, base, args.calls))
    finally:
        upstream.kill()
    results = {}
    for name in names:
        cpu = [r["cpu_ms_per_call"] for r in rounds[name]]
        results[name] = {
            "cpu_ms_per_call": cpu,
            "median_cpu_ms_per_call": statistics.median(cpu),
            "median_wall_ms_per_call": statistics.median(r["wall_ms_per_call"] for r in rounds[name]),
        }
    ours = results["stiva HttpWorker"]["median_cpu_ms_per_call"]
    for name in names:
        results[name]["cpu_ratio_to_stiva"] = round(results[name]["median_cpu_ms_per_call"] / ours, 3)
        print(
            f"{name:20} {results[name]['median_cpu_ms_per_call']:7.3f} ms CPU/call  "
            f"{results[name]['median_wall_ms_per_call']:7.3f} ms wall/call  x{results[name]['cpu_ratio_to_stiva']}"
        )
    out = {
        "benchmark": "CPU of the calling process per streamed upstream completion, by HTTP client",
        "calls_per_round": args.calls,
        "rounds": args.rounds,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "results": results,
    }
    print(f"saved {save_json(HERE / 'upstream_client.json', out)}")


if __name__ == "__main__":
    main()
