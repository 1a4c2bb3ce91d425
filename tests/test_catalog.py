"""The built-in catalog data file and its loader."""

from __future__ import annotations

from importlib import resources

import pytest

from stiva_tui.catalog import (
    Catalog,
    CatalogError,
    CatalogModel,
    CatalogProvider,
    catalog_provider_names,
    load_catalog,
    parse_catalog,
)

EXPECTED_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "together": "TOGETHER_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
}


def test_packaged_file_exists():
    resource = resources.files("stiva_tui").joinpath("catalog", "catalog.toml")
    assert resource.is_file()
    assert "[[providers]]" in resource.read_text(encoding="utf-8")


def test_providers_and_key_variables():
    catalog = load_catalog()
    assert isinstance(catalog, Catalog)
    assert [p.name for p in catalog.providers] == list(EXPECTED_ENV)
    for provider in catalog.providers:
        assert isinstance(provider, CatalogProvider)
        assert provider.api_key_env == EXPECTED_ENV[provider.name]
        assert provider.base_url.startswith("https://")
        assert not provider.base_url.endswith("/")
        assert 2 <= len(provider.models) <= 4, provider.name
    assert catalog_provider_names() == set(EXPECTED_ENV)


def test_known_endpoints():
    catalog = load_catalog()
    assert catalog.provider("openai").base_url == "https://api.openai.com/v1"
    assert catalog.provider("google").base_url == ("https://generativelanguage.googleapis.com/v1beta/openai")
    assert catalog.provider("openrouter").base_url == "https://openrouter.ai/api/v1"
    assert catalog.provider("groq").base_url == "https://api.groq.com/openai/v1"
    assert catalog.provider("nope") is None


def test_models_are_complete_and_unique():
    catalog = load_catalog()
    models = catalog.models()
    ids = [m.id for m in models]
    assert len(ids) == len(set(ids))
    for model in models:
        assert isinstance(model, CatalogModel)
        assert model.id.startswith(model.provider + "/")
        assert model.model
        assert 0 < model.price_in <= model.price_out <= 100
        assert len(model.description) > 10 and "\n" not in model.description
    for expected in ("openai/gpt-5", "anthropic/claude-sonnet-4", "google/gemini-2.5-pro", "deepseek/deepseek-chat"):
        assert expected in ids
    gpt5 = catalog.model("openai/gpt-5")
    assert (gpt5.model, gpt5.price_in, gpt5.price_out) == ("gpt-5", 1.25, 10.0)
    assert catalog.model("anthropic/claude-sonnet-4").price_out == 15.0


def test_cached_and_frozen():
    assert load_catalog() is load_catalog()
    with pytest.raises(Exception):
        load_catalog().providers[0].name = "changed"  # type: ignore[misc]


def _one(**provider_overrides):
    provider = {
        "name": "acme",
        "base_url": "https://acme.test/v1",
        "api_key_env": "ACME_KEY",
        "models": [{"id": "acme/a", "model": "a", "price_in": 1, "price_out": 2, "description": "a model"}],
    }
    provider.update(provider_overrides)
    return {"providers": [provider]}


def test_parse_valid_fills_provider():
    catalog = parse_catalog(_one())
    assert catalog.models()[0].provider == "acme"
    assert catalog.provider_names() == {"acme"}


@pytest.mark.parametrize(
    "data, fragment",
    [
        (_one(base_url="ftp://acme"), "base_url"),
        (_one(api_key_env="lower case"), "api_key_env"),
        (_one(extra=1), "extra"),
        (_one(models=[{"id": "acme/a", "model": "a", "price_in": 1, "description": "x"}]), "price_out"),
        (_one(models=[{"id": "acme/a", "model": "a", "price_in": -1, "price_out": 1, "description": "x"}]), "price_in"),
        ({"providers": _one()["providers"] * 2}, "appears twice"),
    ],
)
def test_parse_errors(data, fragment):
    with pytest.raises(CatalogError) as info:
        parse_catalog(data, source="test.toml")
    assert fragment in str(info.value)
    assert str(info.value).startswith("test.toml:")


def test_load_from_path(tmp_path):
    path = tmp_path / "cat.toml"
    path.write_text(
        '[[providers]]\nname = "x"\nbase_url = "https://x.test/v1"\napi_key_env = "X_KEY"\n', encoding="utf-8"
    )
    assert load_catalog(path).provider_names() == {"x"}
    bad = tmp_path / "bad.toml"
    bad.write_text("[[providers]\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_catalog(bad)
