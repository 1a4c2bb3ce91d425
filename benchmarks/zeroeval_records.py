"""Convert ZeroEval's recorded answers (github.com/yuchenlin/ZeroEval, Apache-2.0) into Stiva's `records`
format, once, from a local bare clone: the machines that train and bench on them cannot reach GitHub.

    python -m benchmarks.zeroeval_records --mirror /path/to/ZeroEval.git [--commit SHA]

reads `result_dirs/{gsm,math-l5,crux}/<model>.json` of MODELS at the commit, scores every answer with
`stiva_tui.evals.recorded.zeroeval` (our port of ZeroEval's own scorers), keeps the items that every
model answered, and writes:
- benchmarks/data/zeroeval.records.jsonl.gz  every (item, model): the answer's last RESPONSE_CHARS
  characters, its verdict, and token counts estimated from the full texts (ceil(chars / 4));
- benchmarks/data/zeroeval.NOTICE.md, zeroeval.LICENSE  the source, its licence, what was changed;
- benchmarks/data/zeroeval_prices.toml  the models' published list prices per 1M tokens;
- tests/data/zeroeval_slice.records.jsonl.gz  all models on SLICE_PER_DATASET items of each dataset.
The output is deterministic: records sorted, gzip written with mtime 0.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from stiva_tui.evals.recorded.errors import RecordsError
from stiva_tui.evals.recorded.zeroeval import DATASETS, read_zeroeval

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
SLICE = ROOT / "tests" / "data" / "zeroeval_slice.records.jsonl.gz"
REPO_URL = "https://github.com/yuchenlin/ZeroEval"
COMMIT = "570c6269a2e4930ee06a17e713fece1ba52cf1dd"  # HEAD of main, 2024-09-24
RESPONSE_CHARS = 600
SLICE_PER_DATASET = 30
CHARS_PER_TOKEN = 4

# (file stem, input $/1M tokens, output $/1M tokens, where the price was published)
OPENAI = "OpenAI API pricing page, 2024-08"
ANTHROPIC = "Anthropic API pricing page, 2024-08"
GOOGLE = "Google AI Gemini API pricing page, 2024-09 (prompts up to 128K tokens)"
TOGETHER = "Together AI serverless pricing page, 2024-08 ({endpoint}); open weights, served there"
MODELS: list[tuple[str, float, float, str]] = [
    ("gpt-4o-2024-05-13", 5.0, 15.0, OPENAI),
    ("gpt-4o-mini-2024-07-18", 0.15, 0.6, OPENAI),
    ("claude-3-5-sonnet-20240620", 3.0, 15.0, ANTHROPIC),
    ("claude-3-haiku-20240307", 0.25, 1.25, ANTHROPIC),
    ("gemini-1.5-pro", 3.5, 10.5, GOOGLE),
    ("gemini-1.5-flash", 0.075, 0.3, GOOGLE),
    ("Meta-Llama-3.1-8B-Instruct", 0.18, 0.18, TOGETHER.format(endpoint="Meta-Llama-3.1-8B-Instruct-Turbo")),
    ("Meta-Llama-3.1-70B-Instruct", 0.88, 0.88, TOGETHER.format(endpoint="Meta-Llama-3.1-70B-Instruct-Turbo")),
    ("Llama-3.1-405B-Inst@sambanova", 5.0, 5.0, TOGETHER.format(endpoint="Meta-Llama-3.1-405B-Instruct-Turbo")),
    ("Qwen2-72B-Instruct", 0.9, 0.9, TOGETHER.format(endpoint="Qwen2-72B-Instruct")),
    ("gemma-2-9b-it", 0.3, 0.3, TOGETHER.format(endpoint="gemma-2-9b-it")),
]


def _git(mirror: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(mirror), *args], capture_output=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} failed in {mirror}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def extract(mirror: Path, commit: str, into: Path) -> str:
    """MODELS' result files and the LICENSE at `commit` of the bare clone, written under `into`
    (as `result_dirs/<dataset>/<model>.json`); returns the LICENSE text."""
    for dataset in DATASETS:
        folder = into / dataset
        folder.mkdir(parents=True)
        for model, *_ in MODELS:
            blob = _git(mirror, "show", f"{commit}:result_dirs/{dataset}/{model}.json")
            (folder / f"{model}.json").write_bytes(blob)
    return _git(mirror, "show", f"{commit}:LICENSE").decode("utf-8")


# Asked for by issue 57 (multiple choice, and a logic grid): kept out while their files are absent
WANTED = ("mmlu-redux", "zebra-grid")


def wanted_files(mirror: Path, commit: str) -> dict[str, dict[str, str]]:
    """Per WANTED dataset and model of MODELS: "present" where the commit's tree lists
    `result_dirs/<dataset>/<model>.json` and the clone holds its contents, "listed, contents absent"
    where the tree lists it but the blob is missing (a partial clone or a snapshot without large
    files), "not in the tree" where the commit has no such file."""
    out: dict[str, dict[str, str]] = {}
    for dataset in WANTED:
        out[dataset] = {}
        for model, *_ in MODELS:
            path = f"{commit}:result_dirs/{dataset}/{model}.json"
            listed = subprocess.run(
                ["git", "-C", str(mirror), "rev-parse", "--verify", "-q", path], capture_output=True
            )
            if listed.returncode:
                out[dataset][model] = "not in the tree"
                continue
            blob = listed.stdout.decode().strip()
            held = subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", blob], capture_output=True)
            out[dataset][model] = "present" if held.returncode == 0 else "listed, contents absent"
    return out


def _wanted_section(wanted: dict[str, dict[str, str]] | None) -> str:
    if not wanted:
        return ""
    lines = [
        "## Asked for and not added: `mmlu-redux` and `zebra-grid`",
        "",
        "Issue 57 asks for these two datasets of the same commit (multiple choice, and a logic grid, kinds the",
        "three above lack). In the clone this file was written from, their result files for these models are:",
        "",
    ]
    for dataset, by_model in wanted.items():
        counts: dict[str, list[str]] = {}
        for model, state in by_model.items():
            counts.setdefault(state, []).append(model)
        parts = [
            f"{state}: {len(models)}" + (f" ({', '.join(models)})" if len(models) <= 2 else "")
            for state, models in counts.items()
        ]
        lines.append(f"- `{dataset}`: " + "; ".join(parts) + ".")
    lines += [
        "",
        "So they are not imported: the same was found in the snapshots of github.com/yuchenlin/ZeroEval and of",
        "five forks (ruxiliang, jdf-prog, wenzhe-li, Sirorezka, jxiw), at every commit of their histories.",
        "No other public source of these eleven models' per-question answers was found whose licence allows it",
        "(MMLU-Pro's published per-model responses are kept apart, for an independent check).",
        "`python -m benchmarks.zeroeval_records --mirror CLONE` rechecks a fuller clone and says what it holds.",
        "",
    ]
    return "\n".join(lines) + "\n"


def _prompts(folder: Path) -> dict[str, str]:
    """The prompt each item was sent with (`chat_history[-1]`: the question inside ZeroEval's JSON-answer
    instructions), by record id; the same for every model (checked)."""
    prompts: dict[str, str] = {}
    for dataset in DATASETS:
        for file in sorted((folder / dataset).glob("*.json")):
            for index, item in enumerate(json.loads(file.read_text(encoding="utf-8"))):
                key = item.get("session_id")
                key = index if key is None else key
                history = item.get("chat_history")
                if not (isinstance(history, list) and history and isinstance(history[-1], str)):
                    raise RecordsError("has no `chat_history` prompt", source=str(file), line=index + 1)
                record_id = f"{dataset}/{key}"
                if prompts.setdefault(record_id, history[-1]) != history[-1]:
                    raise RecordsError(f"sent {record_id} another prompt than other models", source=str(file))
    return prompts


def _tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _tail(text: str) -> str:
    return text if len(text) <= RESPONSE_CHARS else "…" + text[-RESPONSE_CHARS:]


def _natural(text: str) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def convert(folder: Path) -> tuple[list[dict], dict]:
    """The kept records, sorted by dataset, item and model, and a summary of what was kept."""
    names = [model for model, *_ in MODELS]
    records = read_zeroeval(folder, models=names)
    prompts = _prompts(folder)
    by_item: dict[str, dict[str, dict]] = defaultdict(dict)
    for record in records:
        by_item[record["id"]][record["model"]] = record
    complete = {item for item, answers in by_item.items() if len(answers) == len(names)}
    kept = []
    for record in records:
        if record["id"] not in complete:
            continue
        kept.append(
            {
                "id": record["id"],
                "question": record["question"],
                "model": record["model"],
                "response": _tail(record["response"]),
                "correct": record["correct"],
                "answer": record["answer"],
                "domain": record["domain"],
                "prompt_tokens": _tokens(prompts[record["id"]]),
                "completion_tokens": _tokens(record["response"]),
            }
        )
    order = {name: i for i, name in enumerate(DATASETS)}
    kept.sort(key=lambda r: (order[r["domain"]], _natural(r["id"]), names.index(r["model"])))
    items = {d: len({r["id"] for r in kept if r["domain"] == d}) for d in DATASETS}
    read = {d: len({r["id"] for r in records if r["domain"] == d}) for d in DATASETS}
    accuracy = {
        model: {
            d: sum(r["correct"] for r in kept if r["model"] == model and r["domain"] == d) / items[d] for d in DATASETS
        }
        for model in names
    }
    truncated = sum(r["response"].startswith("…") for r in kept)
    return kept, {"items": items, "read": read, "accuracy": accuracy, "truncated": truncated}


def slice_of(records: list[dict]) -> list[dict]:
    """SLICE_PER_DATASET items of each dataset, picked by a hash of the id, with every model's answer."""
    chosen = set()
    for dataset in DATASETS:
        ids = sorted(
            {r["id"] for r in records if r["domain"] == dataset}, key=lambda i: hashlib.sha256(i.encode()).hexdigest()
        )
        chosen.update(ids[:SLICE_PER_DATASET])
    return [r for r in records if r["id"] in chosen]


def write_records(records: list[dict], path: Path) -> None:
    """JSONL, gzipped with no name and mtime 0: the same records give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
        out.write(body.encode("utf-8"))


def prices_toml() -> str:
    lines = [
        "# Published list prices (USD per 1M tokens) of the models in zeroeval.records.jsonl.gz, for",
        "# `stiva bench import --prices`. Open-weight models are priced as served by Together AI, one named",
        "# host, though ZeroEval ran them on vLLM, Together AI or SambaNova (see zeroeval.NOTICE.md).",
        "# Written from the providers' published 2024 price lists as remembered, without web access to",
        "# check them (Gemini's two were confirmed in a stored copy of Google's page): costs made with",
        "# them are estimates of list prices, as every figure that uses them says.",
        "",
    ]
    for model, price_in, price_out, source in MODELS:
        lines += [
            "[[models]]",
            f'name = "{model}"',
            f"input_per_mtok = {price_in}",
            f"output_per_mtok = {price_out}",
            f'source = "{source}"',
            "",
        ]
    return "\n".join(lines)


def notice(commit: str, summary: dict, size: int, slice_count: int, wanted: dict | None = None) -> str:
    items, read, accuracy = summary["items"], summary["read"], summary["accuracy"]
    total = sum(items.values())
    rows = "\n".join(
        f"| `{model}` | " + " | ".join(f"{100 * accuracy[model][d]:.2f}" for d in DATASETS) + " |"
        for model, *_ in MODELS
    )
    return f"""# ZeroEval recorded answers: source, licence and changes

`zeroeval.records.jsonl.gz` is derived from **ZeroEval** by Bill Yuchen Lin et al.,
{REPO_URL}, commit `{commit}`
(files `result_dirs/{{gsm,math-l5,crux}}/<model>.json`).
ZeroEval is licensed under the Apache License, Version 2.0; a copy of that licence, as found in the
repository at that commit, is `zeroeval.LICENSE` beside this file. The repository holds no NOTICE file.
Please cite ZeroEval as its README asks ("ZeroEval: A Unified Framework for Evaluating Language Models",
B. Y. Lin, 2024, {REPO_URL}).

The questions inside come from GSM8K (OpenAI, MIT licence), MATH level 5 (Hendrycks et al., MIT licence)
and CRUXEval (Meta, MIT licence), as ZeroEval distributes them; the answers were written by the models
named below, at temperature 0 (each file's `configs`), and remain subject to their providers' terms.

## What was kept and what was changed

Written by `python -m benchmarks.zeroeval_records` (benchmarks/zeroeval_records.py); these are
modified files in the sense of the licence's section 4(b):
- **Models**: the {len(MODELS)} below, each present in all three datasets. The 405B Llama is the
  `Llama-3.1-405B-Inst@sambanova` run, the only 405B file with all 721 math-l5 answers
  (`Meta-Llama-3.1-405B-Instruct@hyperbolic` has 706).
- **Items**: those every model answered: gsm {items["gsm"]} (of {read["gsm"]}), math-l5 {items["math-l5"]}
  (of {read["math-l5"]}), crux {items["crux"]} (of {read["crux"]}): {total} items, {total * len(MODELS)} records.
- **Format**: Stiva's `records` JSONL, one line per (item, model): `id` (`<dataset>/<session_id>`),
  `question` (the dataset's question: `question`, or `problem` for math-l5; for crux the code and
  the assertion to complete), `model` (the result file's name), `response`, `correct`, `answer` (the
  reference; gsm's and math-l5's without the "#" marks the scorer drops), `domain` (the dataset), `prompt_tokens`, `completion_tokens`. Everything else in the
  source files is dropped.
- **Truncation**: each `response` keeps its last {RESPONSE_CHARS} characters, prefixed with "…" when cut
  ({summary["truncated"]} of {total * len(MODELS)} were cut).
- **Token counts are estimates**: ZeroEval's files record none. `completion_tokens` is ceil(characters / 4)
  of the full, uncut answer; `prompt_tokens` is ceil(characters / 4) of the full prompt the model was
  sent (`chat_history`: the question inside ZeroEval's JSON-answer instructions, about 80 tokens more
  than the question alone). Costs computed from them with `zeroeval_prices.toml` are estimates too.
- **Verdicts** (`correct`): ZeroEval's own, recomputed by Stiva's port of its scorers at this commit
  (`stiva_tui/evals/recorded/zeroeval.py`, a port of `src/evaluation/math_eval.py`, `crux_eval.py` and
  `eval_utils.py`). On every result file of the commit the port agrees with the repository's scorer on
  every answer, and with its published `gsm.summary.json` and `math-l5.summary.json` to the last digit.
  Its `crux.summary.json` is older than two fixes to `crux_eval.py` (commits f37c3f9 and e200bab,
  2024-09-22: answers with newlines, and two empty answers, now count as right), so its crux
  accuracies are 0.75 to 2.5 points lower than these.
- **No split**: Stiva assigns train and held-out by a hash of the id on import;
  `benchmarks/experiments/real_routing.py` writes its own (train and test, by a salted hash of the id).

Size: {size:,} bytes. A slice of the same records ({SLICE_PER_DATASET} items per dataset, all models,
{slice_count} records) is `tests/data/zeroeval_slice.records.jsonl.gz`, for the tests.

## Accuracy by model (ZeroEval's scorer, on the kept items, %)

| model | {" | ".join(DATASETS)} |
|---|{"---|" * len(DATASETS)}
{rows}

## Prices

`zeroeval_prices.toml`: each model's list price per 1M input and output tokens as its source published
it at the date given (list prices of that time, not current ones). Open-weight models (Llama 3.1,
Qwen2, Gemma 2) are all priced as one named host, Together AI, served them, although ZeroEval ran
them on vLLM, Together AI or SambaNova (each file's `configs.engine`); the 405B price is Together's
Llama-3.1-405B-Instruct-Turbo (FP8) endpoint.

{_wanted_section(wanted)}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", required=True, type=Path, help="a (bare) git clone of yuchenlin/ZeroEval")
    parser.add_argument("--commit", default=COMMIT, help="the commit to read (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DATA, help="the folder for the records, notice and prices")
    parser.add_argument("--slice", type=Path, default=SLICE, help="where the tests' slice goes")
    args = parser.parse_args()
    commit = _git(args.mirror, "rev-parse", "--verify", f"{args.commit}^{{commit}}").decode().strip()
    with tempfile.TemporaryDirectory(prefix="zeroeval-") as tmp:
        licence = extract(args.mirror, commit, Path(tmp))
        try:
            records, summary = convert(Path(tmp))
        except RecordsError as error:
            sys.exit(f"zeroeval: {error}")
    out: Path = args.out
    target = out / "zeroeval.records.jsonl.gz"
    write_records(records, target)
    sliced = slice_of(records)
    write_records(sliced, args.slice)
    (out / "zeroeval.LICENSE").write_text(licence, encoding="utf-8")
    (out / "zeroeval_prices.toml").write_text(prices_toml(), encoding="utf-8")
    size = target.stat().st_size
    wanted = wanted_files(args.mirror, commit)
    text = notice(commit, summary, size, len(sliced), wanted).rstrip("\n") + "\n"
    (out / "zeroeval.NOTICE.md").write_text(text, encoding="utf-8")
    for dataset, by_model in wanted.items():
        present = sum(state == "present" for state in by_model.values())
        print(f"  {dataset}: {present} of {len(by_model)} models' result files present (not imported)")
    print(f"{target}: {len(records)} records, {size:,} bytes; {args.slice}: {len(sliced)} records")
    for model, *_ in MODELS:
        print(f"  {model:32s} " + "  ".join(f"{d} {100 * summary['accuracy'][model][d]:6.2f}" for d in DATASETS))


if __name__ == "__main__":
    main()
