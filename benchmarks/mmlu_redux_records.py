"""Convert MMLU-Redux's recorded model answers (github.com/aryopg/mmlu-redux, CC BY 4.0) into Stiva's
`records` format, once, from a local bare clone: the machines that train and bench cannot reach GitHub.

    python -m benchmarks.mmlu_redux_records --mirror /path/to/mmlu-redux.git [--commit SHA]

MMLU-Redux (Gema et al., 2024) re-annotated 100 questions of each of MMLU's 57 subjects and, in
`outputs/multi_expert_helm/<subject>.csv`, lists beside each question the letter that each of 14 models
answered in Stanford CRFM's HELM MMLU run (five examples, "Answer with only a single letter.", at most
one token, temperature 0). This reads those files at the commit, keeps the questions the annotators
marked `ok` (the others have a doubtful reference) and the models of Stiva's ZeroEval pool that HELM
ran (SHARED below), and writes:
- benchmarks/data/mmlu_redux.records.jsonl.gz  every (item, model): the model's letter as HELM recorded
  it, its verdict (that letter is the reference), and estimated token counts;
- benchmarks/data/mmlu_redux.NOTICE.md, mmlu_redux.LICENSE  the source, its licence, what was changed;
- benchmarks/data/mmlu_redux_prices.toml  the kept models' list prices (the ZeroEval pool's);
- tests/data/mmlu_redux_slice.records.jsonl.gz  all kept models on SLICE_ITEMS items.
The output is deterministic: records sorted, gzip written with mtime 0.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import io
import re
import sys
from pathlib import Path

from benchmarks.zeroeval_records import MODELS as ZEROEVAL_MODELS
from benchmarks.zeroeval_records import ROOT, _git, _natural, _tokens, write_records

DATA = ROOT / "benchmarks" / "data"
SLICE = ROOT / "tests" / "data" / "mmlu_redux_slice.records.jsonl.gz"
REPO_URL = "https://github.com/aryopg/mmlu-redux"
COMMIT = "4563cfa79b659d76716e5b6019f46bba85fa02db"  # HEAD of main, 2024-11-09
FOLDER = "outputs/multi_expert_helm"
DOMAIN = "mmlu-redux"
LETTERS = "ABCD"
SLICE_ITEMS = 40
INSTRUCTION = "Answer with only a single letter.\n\n"  # HELM's, without its five examples
# HELM's column -> the ZeroEval pool's name of the same model (same weights; the open ones served by
# another host: HELM ran Llama 3.1 on Together's FP8 "Turbo" endpoints, ZeroEval's 405B ran on SambaNova)
SHARED: dict[str, str] = {
    "openai_gpt-4o-2024-05-13": "gpt-4o-2024-05-13",
    "anthropic_claude-3-5-sonnet-20240620": "claude-3-5-sonnet-20240620",
    "google_gemini-1.5-pro-001": "gemini-1.5-pro",
    "meta_llama-3.1-405b-instruct-turbo": "Llama-3.1-405B-Inst@sambanova",
    "meta_llama-3.1-70b-instruct-turbo": "Meta-Llama-3.1-70B-Instruct",
    "qwen_qwen2-72b-instruct": "Qwen2-72B-Instruct",
}


class MmluReduxError(ValueError):
    """The clone lacks what this converter reads, or a file is not what it expects."""


def question_text(question: str, choices: list[str]) -> str:
    """The question as a replay shows it: the stem, then its lettered options."""
    return question.strip() + "\n\n" + "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def subject_files(mirror: Path, commit: str) -> list[str]:
    names = _git(mirror, "ls-tree", "--name-only", f"{commit}:{FOLDER}").decode().split()
    subjects = sorted(n.removesuffix(".csv") for n in names if re.fullmatch(r"[a-z_]+\.csv", n) and n != "all.csv")
    if not subjects:
        raise MmluReduxError(f"{FOLDER}/ at {commit[:12]} holds no subject files")
    return subjects


def convert(mirror: Path, commit: str) -> tuple[list[dict], dict]:
    """The kept records, sorted by subject, item and model, and a summary of what was kept."""
    records: list[dict] = []
    read = kept_items = 0
    dropped: dict[str, int] = {}
    others: set[str] = set()
    for subject in subject_files(mirror, commit):
        body = _git(mirror, "show", f"{commit}:{FOLDER}/{subject}.csv").decode("utf-8")
        rows = list(csv.DictReader(io.StringIO(body)))
        missing = [c for c in ("question", "choices", "groundtruth_answer", "error_type", *SHARED) if c not in rows[0]]
        if missing:
            raise MmluReduxError(f"{subject}.csv lacks the columns {', '.join(missing)}")
        others.update(
            c
            for c in rows[0]
            if "_" in c and c.split("_")[0] in {"openai", "anthropic", "google", "meta", "qwen", "writer", "mistralai"}
        )
        for index, row in enumerate(rows):
            read += 1
            if row["error_type"] != "ok":
                dropped[row["error_type"]] = dropped.get(row["error_type"], 0) + 1
                continue
            choices = ast.literal_eval(row["choices"])
            truth = int(row["groundtruth_answer"])
            if len(choices) != len(LETTERS) or not 0 <= truth < len(LETTERS):
                raise MmluReduxError(f"{subject}.csv row {index + 2}: {len(choices)} options, reference {truth}")
            kept_items += 1
            question = question_text(row["question"], choices)
            for column, model in SHARED.items():
                said = row[column]
                records.append(
                    {
                        "id": f"{DOMAIN}/{subject}/{index}",
                        "question": question,
                        "model": model,
                        "response": said,
                        "correct": said.strip() == LETTERS[truth],
                        "answer": LETTERS[truth],
                        "domain": DOMAIN,
                        "prompt_tokens": _tokens(INSTRUCTION + question),
                        "completion_tokens": 1,
                    }
                )
    names = list(SHARED.values())
    records.sort(key=lambda r: (_natural(r["id"]), names.index(r["model"])))
    accuracy = {m: sum(r["correct"] for r in records if r["model"] == m) / kept_items for m in names}
    unreadable = {m: sum(not _letter(r["response"]) for r in records if r["model"] == m) for m in names}
    return records, {
        "read": read,
        "items": kept_items,
        "dropped": dict(sorted(dropped.items(), key=lambda kv: -kv[1])),
        "accuracy": accuracy,
        "unreadable": unreadable,
        "left_out": sorted(others - set(SHARED)),
    }


def _letter(said: str) -> bool:
    return len(said.strip()) == 1 and said.strip() in LETTERS


def slice_of(records: list[dict]) -> list[dict]:
    """SLICE_ITEMS items picked by a hash of the id, with every kept model's answer."""
    ids = sorted({r["id"] for r in records}, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    chosen = set(ids[:SLICE_ITEMS])
    return [r for r in records if r["id"] in chosen]


def prices_toml() -> str:
    prices = {name: (price_in, price_out, source) for name, price_in, price_out, source in ZEROEVAL_MODELS}
    lines = [
        "# List prices (USD per 1M tokens) of the models in mmlu_redux.records.jsonl.gz, for",
        "# `stiva bench import --prices`: the ZeroEval pool's prices of the same models",
        "# (zeroeval_prices.toml says where they come from; they are estimates of list prices).",
        "",
    ]
    for model in SHARED.values():
        price_in, price_out, source = prices[model]
        lines += ["[[models]]", f'name = "{model}"', f"input_per_mtok = {price_in}",
                  f"output_per_mtok = {price_out}", f'source = "{source}"', ""]  # fmt: skip
    return "\n".join(lines)


def notice(commit: str, summary: dict, size: int, slice_count: int) -> str:
    rows = "\n".join(
        f"| `{model}` | `{column}` | {100 * summary['accuracy'][model]:.2f} | {summary['unreadable'][model]} |"
        for column, model in SHARED.items()
    )
    dropped = ", ".join(f"{name} {count}" for name, count in summary["dropped"].items())
    items = summary["items"]
    return f"""# MMLU-Redux recorded answers: source, licence and changes

`mmlu_redux.records.jsonl.gz` is derived from **MMLU-Redux** by Aryo Pradipta Gema et al.,
{REPO_URL}, commit `{commit}` (files `{FOLDER}/<subject>.csv`, the 57 subjects).
The repository is licensed under the Creative Commons Attribution 4.0 International licence; a copy,
as found in the repository at that commit, is `mmlu_redux.LICENSE` beside this file. Please cite
"Are We Done with MMLU?" (A. P. Gema et al., 2024, arXiv:2406.04127).

The questions come from MMLU (Hendrycks et al., MIT licence). The answers in those files are the
letters that Stanford CRFM's HELM recorded for each model in its MMLU run (five examples, the
instruction "Answer with only a single letter.", at most one token, temperature 0); HELM's code and
published results are under the Apache License 2.0. The answers remain subject to their providers' terms.

## What was kept and what was changed

Written by `python -m benchmarks.mmlu_redux_records` (benchmarks/mmlu_redux_records.py); the
changes, as section 3(a)(1)(B) of the licence asks to indicate:
- **Items**: the {items} of {summary["read"]} questions the annotators marked `ok`; left out are those
  they marked otherwise ({dropped}), whose reference is doubtful.
- **Models**: the {len(SHARED)} of the files' 14 that Stiva's ZeroEval pool also holds, under the pool's
  names (table below), so that one pool spans both sources. The same weights, not always the same
  server: HELM ran both Llama 3.1 models on Together AI's FP8 "Turbo" endpoints, while ZeroEval's 405B
  answers came from SambaNova; HELM's Gemini is `gemini-1.5-pro-001`, ZeroEval's the `gemini-1.5-pro`
  alias of its time. Left out (not in the pool, no price kept): {", ".join(f"`{m}`" for m in summary["left_out"])}.
- **Format**: Stiva's `records` JSONL, one line per (item, model): `id`
  (`mmlu-redux/<subject>/<row>`, the row of the subject's file from 0), `question` (the question, a
  blank line, then its four options as "A. ..." lines), `model`, `response` (the model's answer as HELM
  recorded it, unchanged: a letter, or a word or nothing where the model wrote no letter), `correct`
  (that answer, stripped, is the reference letter; HELM scored the same way), `answer` (the reference
  letter), `domain` (`mmlu-redux`), `prompt_tokens`, `completion_tokens`.
- **Token counts are estimates**: the files record none. `prompt_tokens` is ceil(characters / 4) of
  the instruction and the question with its options, asked with no examples; HELM's own prompts
  carried five examples and cost about six times that. `completion_tokens` is 1 (HELM's limit). Costs
  made from them are estimates for a zero-shot, letter-only prompt, far below a reasoning answer's.
- **No split**: Stiva assigns one on import; `benchmarks/experiments/real_routing.py` writes its own.

Size: {size:,} bytes. A slice ({SLICE_ITEMS} items, every kept model, {slice_count} records) is
`tests/data/mmlu_redux_slice.records.jsonl.gz`, for the tests.

## Accuracy by model (the letter is the reference, on the kept items, %)

| model (pool name) | HELM's column | accuracy | answers that are no letter |
|---|---|---|---|
{rows}

## Prices

`mmlu_redux_prices.toml`: the ZeroEval pool's list prices of the same models (see zeroeval.NOTICE.md).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", required=True, type=Path, help="a (bare) git clone of aryopg/mmlu-redux")
    parser.add_argument("--commit", default=COMMIT, help="the commit to read (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DATA, help="the folder for the records, notice and prices")
    parser.add_argument("--slice", type=Path, default=SLICE, help="where the tests' slice goes")
    args = parser.parse_args()
    commit = _git(args.mirror, "rev-parse", "--verify", f"{args.commit}^{{commit}}").decode().strip()
    try:
        records, summary = convert(args.mirror, commit)
    except MmluReduxError as error:
        sys.exit(f"mmlu-redux: {error}")
    target = args.out / "mmlu_redux.records.jsonl.gz"
    write_records(records, target)
    sliced = slice_of(records)
    write_records(sliced, args.slice)
    (args.out / "mmlu_redux.LICENSE").write_text(_git(args.mirror, "show", f"{commit}:LICENSE").decode(), "utf-8")
    (args.out / "mmlu_redux_prices.toml").write_text(prices_toml(), encoding="utf-8")
    size = target.stat().st_size
    (args.out / "mmlu_redux.NOTICE.md").write_text(notice(commit, summary, size, len(sliced)), encoding="utf-8")
    print(f"{target}: {summary['items']} items, {len(records)} records, {size:,} bytes; {args.slice}: {len(sliced)}")
    for model, accuracy in summary["accuracy"].items():
        print(f"  {model:32s} {100 * accuracy:6.2f}  no letter: {summary['unreadable'][model]}")


if __name__ == "__main__":
    main()
