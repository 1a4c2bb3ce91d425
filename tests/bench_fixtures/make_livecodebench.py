"""Writes livecodebench.jsonl: three records in LiveCodeBench code_generation_lite's shape.

Private cases use the real dataset's encoding, base64(zlib(pickle(a JSON string))); the third
record's pickle holds a list rather than a string, which the loader must skip, never unpickle.
Run from this folder: python make_livecodebench.py
"""

import base64
import json
import pickle
import zlib


def packed(value: object) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


stdin_public = [{"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin"}]
stdin_private = [
    {"input": "2\n10 -4\n", "output": "6\n", "testtype": "stdin"},
    {"input": "1\n1000000000\n", "output": "1000000000\n", "testtype": "stdin"},
]
fn_public = [{"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": "functional"}]
fn_private = [{"input": "[3,2,4]\n6", "output": "[1, 2]", "testtype": "functional"}]
records = [
    {
        "question_title": "Sum of array",
        "question_content": "Read n, then n integers, and print their sum.",
        "platform": "atcoder",
        "question_id": "abc000_a",
        "contest_id": "abc000",
        "contest_date": "2024-08-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(stdin_public),
        "private_test_cases": packed(json.dumps(stdin_private)),
        "metadata": "{}",
    },
    {
        "question_title": "Two Sum",
        "question_content": "Given nums and target, return the indices of the two numbers that add up to target.",
        "platform": "leetcode",
        "question_id": "1",
        "contest_id": "weekly-0",
        "contest_date": "2024-08-02T00:00:00",
        "starter_code": "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ",
        "difficulty": "easy",
        "public_test_cases": json.dumps(fn_public),
        "private_test_cases": json.dumps(fn_private),
        "metadata": json.dumps({"func_name": "twoSum"}),
    },
    {
        "question_title": "Double it",
        "question_content": "Read an integer and print twice its value.",
        "platform": "codeforces",
        "question_id": "cf0001",
        "contest_id": "1",
        "contest_date": "2024-08-03T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "21\n", "output": "42\n", "testtype": "stdin"}]),
        "private_test_cases": packed([{"input": "1\n", "output": "2\n", "testtype": "stdin"}]),
        "metadata": "{}",
    },
]

if __name__ == "__main__":
    with open("livecodebench.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
