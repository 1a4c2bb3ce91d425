"""How much `stiva serve` adds on top of the upstream calls it makes, and what stalled
connections do to a real client (run by hand).

    .venv/bin/python -m benchmarks.perf.serve [--latency 0.05] [--requests-per-client 20] [--repeats 3] [--pin]

Scripted upstreams (tests/support/fakeprovider.py, a ThreadingHTTPServer) answer every call after a fixed
latency. A `conductor-mini` request makes three upstream calls in sequence (conductor plan, step 0,
step 1), so the baseline is a client making those same three streaming calls straight to the
upstream. Added latency = the server's latency minus the baseline's, at the same percentile and
concurrency. The upstream, the server and the load generator run in three processes; the server
writes every run to a real history database, as in use. Also reported: the server process's CPU
time per request, its three upstream calls included. `--repeats` runs the 1- and 16-client
levels again (the machine is shared: one run's p50 moves by a few ms). `--pin` (Linux) keeps the
server on the first CPU and the upstream and the load generator on the others, as a deployed
server has its core to itself, so what it adds is not mixed with the load measuring it.

Stalled connections: a server of its own, and one real client asking one request after another,
each on a new connection (so each has to be accepted past the stalled ones), first with none and
then with 200 stalled connections open: raw sockets that send half a request head and then
nothing, opened again by their own process whenever the server closes one. Once with the
machine's file limit, once with a limit of 160, where 200 connections do not fit (the issue's
1,100 idle connections against 1,024, scaled down).

Prints a table and saves the figures beside this file as serve.json.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import socket
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import machine, save_json

HERE = Path(__file__).resolve().parent

TOKEN = "bench-token"
PARTIAL_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
PLAN = 'Draft then finish.\nmodel_id = [1, 2]\nsubtasks = ["draft", "finish"]\naccess_list = [[], [0]]'
ANSWER = "The answer is forty-two, as the draft said, checked twice."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpus: set[int] | None) -> None:
    """Keep this process on `cpus` (Linux; `--pin`)."""
    if cpus:
        os.sched_setaffinity(0, cpus)


def run_upstream(port: int, latency: float, ready, cpus: set[int] | None = None) -> None:
    pin(cpus)
    from tests.support.fakeprovider import FakeProvider, Reply

    fake = FakeProvider(port=port)
    fake.default("cond", Reply(PLAN, latency_s=latency, usage=(200, 30)))
    fake.default("w1", Reply("a draft: forty-two", latency_s=latency, usage=(50, 6)))
    fake.default("w2", Reply(ANSWER, latency_s=latency, usage=(80, 12)))
    # The stdlib server listens with a backlog of 5: at 64 clients, connects would be dropped and
    # retried after a second, which measures TCP, not Stiva. Listening again enlarges the backlog.
    fake._server.socket.listen(512)
    fake.start()
    ready.set()
    while True:
        time.sleep(3600)


def run_server(
    port: int,
    upstream: str,
    home: str,
    max_runs: int,
    nofile: int | None = None,
    loop: str = "uvloop",
    cpus: set[int] | None = None,
) -> None:
    os.environ["STIVA_HOME"] = home
    pin(cpus)
    if nofile is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    from stiva_tui.config import parse_config
    from stiva_tui.runtime import Runtime
    from stiva_tui.server.app import create_app, event_loop_factory
    from stiva_tui.server.connections import guarded_server

    config = parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [{"name": "fake", "base_url": upstream}],
            "models": [{"id": m, "provider": "fake", "model": m} for m in ("cond", "w1", "w2")],
            "discovery": {"enabled": False},
            "catalog": False,
            "serve": {"max_concurrent_runs": max_runs, "max_queue": 256},
        }
    )

    async def main() -> None:
        runtime = await Runtime.create(config, discover=False)
        app = create_app(runtime, TOKEN)
        # As `stiva serve` runs it: the guarded connections and uvicorn's default backlog.
        server = guarded_server(app, config.serve, host="127.0.0.1", port=port, log_level="warning")
        try:
            await server.serve()
        finally:
            await runtime.aclose()

    # On the loop `stiva serve` runs on (uvloop's, where installed), or asyncio's own to compare.
    factory = event_loop_factory() if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())


async def wait_up(url: str) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        for _ in range(300):
            try:
                await client.get(url, headers={"authorization": f"Bearer {TOKEN}"})
                return
            except httpx.TransportError:
                await asyncio.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


async def load(clients: int, per_client: int, call, *, keep_alive: bool = True) -> dict:
    """`clients` tasks each making `per_client` calls in turn; latencies in ms. Without
    `keep_alive`, every call opens a new connection."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients + 8 if keep_alive else 0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:

        async def client_loop() -> None:
            for _ in range(per_client):
                started = time.perf_counter()
                try:
                    await call(http)
                except Exception as exc:  # counted, not raised: the figure is the error count
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(client_loop() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:3],
        "rps": round(len(latencies) / elapsed, 2),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "mean_ms": round(statistics.fmean(latencies), 2) if latencies else None,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def via_server(url: str):
    body = {"model": "conductor-mini", "messages": [{"role": "user", "content": "What is six times seven?"}]}

    async def call(http) -> None:
        response = await http.post(
            url + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {TOKEN}"}
        )
        response.raise_for_status()
        if response.json()["choices"][0]["message"]["content"] != ANSWER:
            raise ValueError("wrong answer")

    return call


def direct(upstream: str):
    async def one(http, model: str) -> None:
        body = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "What is six times seven?"}],
        }
        async with http.stream("POST", upstream + "/chat/completions", json=body) as response:
            response.raise_for_status()
            async for _ in response.aiter_lines():
                pass

    async def call(http) -> None:
        for model in ("cond", "w1", "w2"):  # the three calls a conductor-mini run makes, in turn
            await one(http, model)

    return call


def run_stallers(port: int, count: int, stop, opened) -> None:
    """Keep `count` stalled connections open against the server until `stop` is set."""

    async def one() -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            with opened.get_lock():
                opened.value += 1
            writer.write(PARTIAL_HEAD)
            # Until the server closes it (EOF), or the measurement is over.
            closed = asyncio.ensure_future(reader.read())
            while not closed.done() and not stop.is_set():
                await asyncio.wait({closed}, timeout=0.2)
            closed.cancel()
            writer.close()

    async def main() -> None:
        await asyncio.gather(*(one() for _ in range(count)))

    asyncio.run(main())


async def stalled_case(
    ctx,
    upstream: str,
    home: str,
    nofile: int | None,
    requests: int,
    stalled: int,
    loop: str,
    cpus: set[int] | None = None,
) -> dict:
    """One real client, a new connection per request, with none and then `stalled` stalled
    connections open against a server of its own."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    home = tempfile.mkdtemp(dir=home)  # a history of its own
    # Two runs at once suit one client, and leave the most descriptors to connections.
    server = ctx.Process(target=run_server, args=(port, upstream, home, 2, nofile, loop, cpus), daemon=True)
    server.start()
    row: dict = {"file_limit": nofile or resource.getrlimit(resource.RLIMIT_NOFILE)[0]}
    try:
        await wait_up(url + "/v1/models")
        await load(1, 3, via_server(url), keep_alive=False)  # warm-up
        for count in (0, stalled):
            stop, opened = ctx.Event(), ctx.Value("i", 0)
            stallers = ctx.Process(target=run_stallers, args=(port, count, stop, opened), daemon=True)
            if count:
                stallers.start()
                await asyncio.sleep(1.5)  # all connected, the first ones past the server's grace
            figures = await load(1, requests, via_server(url), keep_alive=False)
            stop.set()
            if count:
                stallers.join(10)
                figures["stalled_connections_opened"] = opened.value
            row[f"stalled_{count}"] = figures
            print(
                f"  file limit {row['file_limit']:>6}  {count:>3} stalled  p50 {figures['p50_ms']:>7.1f} ms  "
                f"p99 {figures['p99_ms']:>7.1f} ms  errors {figures['errors']}"
                + (f"  (stalled connections opened: {opened.value})" if count else ""),
                flush=True,
            )
        row["p50_ratio"] = round(row[f"stalled_{stalled}"]["p50_ms"] / row["stalled_0"]["p50_ms"], 3)
        row["p99_ratio"] = round(row[f"stalled_{stalled}"]["p99_ms"] / row["stalled_0"]["p99_ms"], 3)
    finally:
        server.terminate()
        server.join(5)
    return row


async def bench(args) -> dict:
    load_at_start = round(os.getloadavg()[0], 2)
    ctx = multiprocessing.get_context("spawn")
    # --pin: the server alone on the first CPU, the upstream and this load generator on the rest,
    # so the server is measured on a core of its own, not against the load it is measured with
    server_cpus, other_cpus = ({0}, set(range(1, os.cpu_count() or 2))) if args.pin else (None, None)
    pin(other_cpus)
    up_port, srv_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    server_url = f"http://127.0.0.1:{srv_port}"
    ready = ctx.Event()
    processes = [ctx.Process(target=run_upstream, args=(up_port, args.latency, ready, other_cpus), daemon=True)]
    processes[0].start()
    ready.wait(30)
    with tempfile.TemporaryDirectory() as home:
        processes.append(
            ctx.Process(
                target=run_server,
                args=(srv_port, upstream, home, max(args.clients), None, args.loop, server_cpus),
                daemon=True,
            )
        )
        processes[1].start()
        try:
            await wait_up(server_url + "/v1/models")
            await load(4, 3, via_server(server_url))  # warm-up: imports, connections, the database

            async def level(clients: int) -> dict:
                per_client = max(args.requests_per_client, args.min_requests // clients)
                base = await load(clients, per_client, direct(upstream))
                cpu_before = cpu_seconds(processes[1].pid)
                served = await load(clients, per_client, via_server(server_url))
                cpu_used = cpu_seconds(processes[1].pid) - cpu_before
                row = {
                    "clients": clients,
                    "direct": base,
                    "server": served,
                    "added_p50_ms": round(served["p50_ms"] - base["p50_ms"], 2),
                    "added_p99_ms": round(served["p99_ms"] - base["p99_ms"], 2),
                    # What the server process spent (its 3 upstream calls included), per request.
                    "server_cpu_ms_per_request": round(cpu_used / max(served["requests"], 1) * 1000, 2),
                }
                print(
                    f"{clients:>3} clients  server {served['rps']:>7.1f} req/s  p50 {served['p50_ms']:>7.1f} ms"
                    f"  p99 {served['p99_ms']:>7.1f} ms  errors {served['errors']}  |  direct p50 "
                    f"{base['p50_ms']:>7.1f} p99 {base['p99_ms']:>7.1f}  |  added p50 {row['added_p50_ms']:>6.2f}"
                    f" ms  p99 {row['added_p99_ms']:>6.2f} ms  |  server CPU "
                    f"{row['server_cpu_ms_per_request']:.1f} ms/request",
                    flush=True,
                )
                return row

            results = [await level(clients) for clients in args.clients]
            repeats: dict = {}
            for clients in [c for c in (1, 16) if c in args.clients]:
                rows = [next(r for r in results if r["clients"] == clients)]
                rows += [await level(clients) for _ in range(args.repeats - 1)]
                added = [r["added_p50_ms"] for r in rows]
                repeats[str(clients)] = {
                    "added_p50_ms": added,
                    "median_added_p50_ms": statistics.median(added),
                    "server_cpu_ms_per_request": [r["server_cpu_ms_per_request"] for r in rows],
                }
            print("stalled connections:", flush=True)
            stalled = [
                await stalled_case(
                    ctx, upstream, home, nofile, args.stalled_requests, args.stalled, args.loop, server_cpus
                )
                for nofile in (None, 160)
            ]
        finally:
            for process in processes:
                process.terminate()
                process.join(5)
    return {
        "benchmark": "stiva serve, conductor-mini (3 upstream calls in sequence) vs the same calls direct",
        "upstream_latency_s": args.latency,
        # shared with other work: the load when the run began (load_1min: when it ended)
        "machine": machine() | {"load_1min_at_start": load_at_start},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "max_concurrent_runs": max(args.clients),
        "event_loop": args.loop,
        "pinned": "server on CPU 0, upstream and load generator on the others" if args.pin else None,
        "results": results,
        "target": "added p50 < 5 ms at 16 clients; no errors at 64",
        "repeats": repeats,
        "stalled": {
            "what": f"one real client, a new connection per request ({args.stalled_requests} conductor-mini "
            f"requests), with 0 and {args.stalled} stalled connections open (half a request head, then "
            "nothing; reopened whenever the server closes one); the server's own process, 2 runs at once, "
            "default [serve] limits",
            "cases": stalled,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="upstream latency per call, seconds")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    # 20 a client: with 5, the p50 at 16 clients moved by several ms from one run to the next.
    parser.add_argument("--requests-per-client", type=int, default=20)
    parser.add_argument("--min-requests", type=int, default=40, help="at least this many requests a level")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the 1- and 16-client levels")
    parser.add_argument("--stalled", type=int, default=200, help="stalled connections in the stalled case")
    parser.add_argument("--stalled-requests", type=int, default=40, help="requests of the client there")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the server's event loop: uvloop's, as `stiva serve` runs, or asyncio's own",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the server on a CPU of its own, the upstream and the load on the others (Linux)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "serve.json")
    args = parser.parse_args()
    figures = asyncio.run(bench(args))
    print(f"saved {save_json(args.out, figures)}")


if __name__ == "__main__":
    main()
