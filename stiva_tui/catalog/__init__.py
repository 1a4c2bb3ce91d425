"""The built-in catalog of hosted providers (`stiva_tui/catalog/catalog.toml`).

`load_catalog()` reads the packaged data file once and returns typed, frozen objects;
`catalog_provider_names()` is what the config validator uses to accept `provider = "openai"` in a
[[models]] entry without a matching [[providers]] entry.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class CatalogError(Exception):
    """The catalog data file is missing or invalid (a packaging bug, or a bad override file)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CatalogModel(_Frozen):
    id: str = Field(min_length=1)  # "openai/gpt-5": what the conductor and the user see
    provider: str = Field(min_length=1)  # filled in from the enclosing provider
    model: str = Field(min_length=1)  # the provider's own name
    price_in: float = Field(ge=0)  # USD per 1M input tokens
    price_out: float = Field(ge=0)  # USD per 1M output tokens
    description: str = Field(min_length=1)
    planner: bool = False  # cheap and reliable at the plan format: `auto` may let it plan


class CatalogProvider(_Frozen):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    label: str = ""
    base_url: str
    api_key_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    models: tuple[CatalogModel, ...] = ()

    @field_validator("base_url")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must start with https:// or http://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _models_belong(self) -> "CatalogProvider":
        for model in self.models:
            if model.provider != self.name:
                raise ValueError(f"model {model.id!r} names provider {model.provider!r}")
        return self


class Catalog(_Frozen):
    providers: tuple[CatalogProvider, ...]

    @model_validator(mode="after")
    def _unique(self) -> "Catalog":
        names: set[str] = set()
        ids: set[str] = set()
        for provider in self.providers:
            if provider.name in names:
                raise ValueError(f"provider {provider.name!r} appears twice")
            names.add(provider.name)
            for model in provider.models:
                if model.id in ids:
                    raise ValueError(f"model id {model.id!r} appears twice")
                ids.add(model.id)
        return self

    def provider(self, name: str) -> CatalogProvider | None:
        return next((p for p in self.providers if p.name == name), None)

    def models(self) -> list[CatalogModel]:
        """Every catalog model, in file order."""
        return [m for p in self.providers for m in p.models]

    def model(self, model_id: str) -> CatalogModel | None:
        return next((m for m in self.models() if m.id == model_id), None)

    def provider_names(self) -> set[str]:
        return {p.name for p in self.providers}


def parse_catalog(data: dict, source: str = "catalog") -> Catalog:
    """Validate catalog data (the parsed TOML); the provider's name is filled into its models."""
    try:
        raw = dict(data)
        providers = []
        for provider in raw.get("providers", []) or []:
            provider = dict(provider)
            provider["models"] = [
                {"provider": provider.get("name", ""), **model} for model in provider.get("models", [])
            ]
            providers.append(provider)
        raw["providers"] = providers
        return Catalog.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors())
        raise CatalogError(f"{source}: {problems}") from None
    except (TypeError, AttributeError) as exc:
        raise CatalogError(f"{source}: malformed catalog: {exc}") from None


def _read_catalog(path: Path | None) -> Catalog:
    if path is None:
        resource = resources.files("stiva_tui").joinpath("catalog", "catalog.toml")
        source = "stiva_tui/catalog/catalog.toml"
        try:
            text = resource.read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(f"{source}: cannot read the packaged catalog: {exc}") from None
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{source}: not valid TOML: {exc}") from None
    return parse_catalog(data, source=source)


@functools.lru_cache(maxsize=8)
def load_catalog(path: Path | None = None) -> Catalog:
    """The built-in catalog (or one read from `path`), parsed once and cached."""
    return _read_catalog(Path(path) if path is not None else None)


def catalog_provider_names() -> set[str]:
    return load_catalog().provider_names()
