"""A served conductor (vLLM, SGLang) is held to the plan's structure through the server's
structured-output field: the request carries the plan's JSON schema, a server that refuses the
field still plans (asked again without it, and never again), and hosted providers are sent
nothing new. Against the real fake provider on 127.0.0.1."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from conftest import pool_models

from stiva_tui.conductor.base import PlanRequest, WorkerInfo
from stiva_tui.conductor.choose import select_conductor
from stiva_tui.conductor.grammar import lists_json_schema
from stiva_tui.conductor.remote import RemoteConductor
from stiva_tui.config import ConductorConfig, ConfigError, parse_config
from stiva_tui.core.workflow import parse_workflow
from stiva_tui.pool.client import PoolWorker
from tests.support.fakeprovider import Reply

STRUCTURED_FIELDS = ("response_format", "structured_outputs", "json_schema", "guided_json")
JSON_PLAN = json.dumps({"model_id": [1, 0], "subtasks": ["Solve it", "Check step 0"], "access_list": [[], [0]]})
TEXT_PLAN = 'Plan.\nmodel_id = [1]\nsubtasks = ["Answer it"]\naccess_list = [[]]'


def request(pool: int = 3) -> PlanRequest:
    return PlanRequest("What is 6*7?", [WorkerInfo(f"w{i}", "a model") for i in range(pool)], max_steps=5)


def conductor(fake, source: str = "discovered", structured: str = "auto", name: str = "cond") -> RemoteConductor:
    model = pool_models(fake, name)[0]
    model = type(model)(**{**model.__dict__, "source": source})
    return RemoteConductor(model, PoolWorker(), structured=structured)


def lists(plan) -> list:
    return plan.workflow.to_lists()["model_id"]


async def ask(chosen: RemoteConductor):
    try:
        return await chosen.plan(request())
    finally:
        await chosen.worker.aclose()


def sent_fields(body: dict) -> set[str]:
    return {key for key in STRUCTURED_FIELDS if key in body}


async def test_a_discovered_server_gets_the_plans_json_schema_and_its_json_plan_parses(fake):
    fake.script("cond", Reply(JSON_PLAN))
    plan = await ask(conductor(fake))
    assert plan.workflow.to_lists() == json.loads(JSON_PLAN)
    (sent,) = fake.requests_for("cond")
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "stiva_plan", "schema": lists_json_schema(3, 5)},
    }
    assert sent.messages[-1]["content"].endswith('"access_list": [...]}.')  # asked for the JSON object


@pytest.mark.parametrize(
    ("mode", "field", "carried"),
    [
        ("json_schema", "response_format", lambda value: value["json_schema"]["schema"]),
        ("vllm", "structured_outputs", lambda value: value["json"]),
        ("sglang", "json_schema", json.loads),  # SGLang takes the schema as a JSON string
    ],
)
async def test_each_mode_sends_the_schema_in_its_servers_field_even_to_a_configured_model(fake, mode, field, carried):
    fake.script("cond", Reply(JSON_PLAN))
    plan = await ask(conductor(fake, source="config", structured=mode))
    assert plan.workflow.to_lists()["subtasks"] == ["Solve it", "Check step 0"]
    (sent,) = fake.requests_for("cond")
    assert sent_fields(sent.body) == {field}
    assert carried(sent.body[field]) == lists_json_schema(3, 5)


@pytest.mark.parametrize(("source", "structured"), [("discovered", "none"), ("config", "auto"), ("catalog", "auto")])
async def test_none_and_hosted_planners_under_auto_are_asked_exactly_as_before(fake, source, structured):
    fake.script("cond", Reply(TEXT_PLAN))
    plan = await ask(conductor(fake, source=source, structured=structured))
    assert lists(plan) == [1]
    (sent,) = fake.requests_for("cond")
    assert sent_fields(sent.body) == set()
    assert "Begin with: " in sent.messages[-1]["content"]


async def test_a_server_that_refuses_the_field_still_plans_and_is_never_sent_it_again(fake, caplog):
    fake.script("cond", Reply(TEXT_PLAN, refuse=("response_format",)))
    caplog.set_level(logging.WARNING, logger="stiva_tui.conductor.remote")
    first = await ask(conductor(fake, structured="json_schema"))
    second = await ask(conductor(fake, structured="json_schema"))  # a new conductor, same model
    assert lists(first) == lists(second) == [1]
    sent = fake.requests_for("cond")
    assert [sent_fields(r.body) for r in sent] == [{"response_format"}, set(), set()]
    assert "Begin with: " in sent[1].messages[-1]["content"]  # the plain prompt, not the JSON one
    refusals = [r for r in caplog.records if "refused the structured-output field" in r.getMessage()]
    assert len(refusals) == 1 and "unknown field: response_format" in refusals[0].getMessage()


async def test_under_auto_any_4xx_on_the_first_structured_try_falls_back(fake):
    fake.script("cond", Reply(status=400, error_message="Invalid request"), Reply(TEXT_PLAN))
    plan = await ask(conductor(fake, structured="auto"))
    assert lists(plan) == [1]
    assert [sent_fields(r.body) for r in fake.requests_for("cond")] == [{"response_format"}, set()]


async def test_an_explicit_mode_keeps_a_4xx_that_does_not_name_the_field_an_error(fake):
    from stiva_tui.conductor.base import ConductorError

    fake.script("cond", Reply(status=400, error_message="prompt too long"))
    with pytest.raises(ConductorError, match="prompt too long"):
        await ask(conductor(fake, structured="vllm"))
    assert len(fake.requests_for("cond")) == 1  # not asked again without the field


def test_the_config_setting_is_strict_and_reaches_the_remote_conductor(fake):
    assert ConductorConfig().structured == "auto"
    with pytest.raises(ConfigError, match="structured"):
        parse_config({"conductor": {"structured": "xgrammar"}})
    config = parse_config({"conductor": {"backend": "remote", "model": "cond", "structured": "sglang"}}).conductor
    chosen, _ = select_conductor(config, pool_models(fake, "cond"), PoolWorker())
    assert isinstance(chosen, RemoteConductor) and chosen.structured == "sglang"


# --- the schema accepts the plans the grammar accepts ---------------------------------------------


def conforms(value: Any, schema: dict) -> bool:
    """A validator for the JSON-schema words `lists_json_schema` uses (no dependency)."""
    if "anyOf" in schema:
        return any(conforms(value, option) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind == "object":
        props = schema["properties"]
        return (
            isinstance(value, dict)
            and all(key in value for key in schema.get("required", ()))
            and (schema.get("additionalProperties", True) or set(value) <= set(props))
            and all(conforms(v, props[k]) for k, v in value.items() if k in props)
        )
    if kind == "array":
        return (
            isinstance(value, list)
            and schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value))
            and all(conforms(item, schema["items"]) for item in value)
        )
    if kind == "integer":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and schema.get("minimum", value) <= value <= schema.get("maximum", value)
        )
    if kind == "string":
        return (
            isinstance(value, str)
            and schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
            and value in schema.get("enum", [value])
        )
    raise AssertionError(f"unhandled schema {schema}")


GRAMMAR_PLANS = [  # the canonical three lines the local grammar decodes
    (3, 'model_id = [2]\nsubtasks = ["Answer the question"]\naccess_list = [[]]'),
    (3, 'model_id = [0, 1, 2]\nsubtasks = ["Draft", "Critique step 0", "Merge"]\naccess_list = [[], [0], "all"]'),
    (
        2,
        'model_id = [1, 0, 1, 0, 1]\nsubtasks = ["a", "b", "c", "d", "e"]\naccess_list = [[], [0], [0, 1], [2], [0, 1, 3]]',
    ),
    (1, 'model_id = [0, 0]\nsubtasks = ["Compute 6*7", "State the answer"]\naccess_list = ["all", "all"]'),
]


@pytest.mark.parametrize(("pool", "text"), GRAMMAR_PLANS)
def test_the_schema_accepts_the_plans_the_grammar_accepts_and_they_parse_back_alike(pool, text):
    workflow = parse_workflow(text, pool, 5)
    as_json = workflow.to_lists()
    assert conforms(as_json, lists_json_schema(pool, 5))
    assert parse_workflow(json.dumps(as_json), pool, 5) == workflow  # the JSON form parses to the same plan


def test_the_schema_refuses_what_the_grammar_refuses():
    schema = lists_json_schema(2, 3)
    good = {"model_id": [0], "subtasks": ["x"], "access_list": [[]]}
    assert conforms(good, schema)
    for bad in (
        {**good, "model_id": [2]},  # no such model
        {**good, "subtasks": [""]},  # an empty subtask
        {**good, "access_list": ["some"]},
        {**good, "extra": 1},
        {"model_id": [0], "subtasks": ["x"]},
        {**good, "model_id": [0, 1, 0, 1]},  # more than max_steps
        {"model_id": [], "subtasks": [], "access_list": []},  # empty only in later rounds
    ):
        assert not conforms(bad, schema), bad
    assert conforms({"model_id": [], "subtasks": [], "access_list": []}, lists_json_schema(2, 3, allow_empty=True))
