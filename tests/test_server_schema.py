"""Property-based tests of the served OpenAPI document (schemathesis): whatever a client sends
that the document allows or almost allows, the server never answers with a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from test_server import PLAN2, TOKEN, Served, make_config

from tests.support.fakeprovider import Reply


@pytest.fixture
def api_schema(fake):
    fake.default("cond", Reply(PLAN2, usage=(5, 2)))
    fake.default("*", Reply("ok", usage=(1, 1)))
    served = Served(make_config(fake)).start()
    try:
        yield schemathesis.openapi.from_url(served.url + "/openapi.json")
    finally:
        served.stop()


schema = schemathesis.pytest.from_fixture("api_schema")


def test_the_document_declares_the_chat_request_body(fake):
    import httpx

    served = Served(make_config(fake)).start()
    try:
        document = httpx.get(served.url + "/openapi.json").json()
    finally:
        served.stop()
    operation = document["paths"]["/v1/chat/completions"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert {"model", "messages"} <= set(body["required"])
    assert {"stream", "max_tokens", "temperature", "stop", "stiva_trace"} <= set(body["properties"])
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    # The document allows only what the server takes: these roles, and a real boolean for the trace.
    roles = document["components"]["schemas"]["ChatMessage"]["properties"]["role"]["enum"]
    assert roles == ["system", "developer", "user", "assistant"]
    assert body["properties"]["stiva_trace"]["type"] == "boolean"


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case):
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=[not_a_server_error], timeout=10)
