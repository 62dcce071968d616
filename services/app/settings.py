"""One settings object, read at the composition root and passed down.

Precedence, lowest to highest: built-in defaults, a TOML file, the environment
(``CLAIMWATCH_<FIELD>``, nested with ``__``), then command-line flags. pydantic-settings reads the file and the
environment; each source is kept apart (``settings_layers``), so `claimwatch config show` can say where each
setting came from.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from services.app.sections import (
    ApiSettings,
    ClusteringSettings,
    DriftSettings,
    EvalSettings,
    IdentitySettings,
    IngestSettings,
    MetricsSettings,
    NotifySettings,
    OwnerRuleSettings,
    RetentionSettings,
    ReviewSettings,
    RoutesSettings,
    RunbooksSettings,
    SloAlertSettings,
    SloSettings,
    TriageSettings,
)
from services.ingest.privacy import RedactionSettings
from services.rates.slo import Slo

ENV_PREFIX = "CLAIMWATCH_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", env_prefix=ENV_PREFIX, env_nested_delimiter="__")

    kafka: str | None = Field(None, description="bootstrap list host:port[,...]; unset means the embedded broker")
    embedded_broker: str = Field(
        "127.0.0.1:19092", description="where `claimwatch up` starts Tansu when --kafka is unset"
    )
    clickhouse: str = "chdb:./var/clickhouse"
    topic_prefix: str = "claimwatch"
    partitions: int = Field(4, ge=1)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    routes: RoutesSettings = Field(default_factory=RoutesSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    clustering: ClusteringSettings = Field(default_factory=ClusteringSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    privacy: RedactionSettings = Field(default_factory=RedactionSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    triage: TriageSettings = Field(default_factory=TriageSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    runbooks: RunbooksSettings = Field(default_factory=RunbooksSettings)
    owners: list[OwnerRuleSettings] = Field(default_factory=list, description="[[owners]] rules, first match wins")
    slo: list[SloSettings] = Field(default_factory=list, description="[[slo]] objectives (services/rates/slo.py)")
    slo_alerts: SloAlertSettings = Field(default_factory=SloAlertSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """``Settings(...)`` is what it is given and nothing else: the file and the environment are read once, at
        the composition root, by ``settings_layers``."""
        return (init_settings,)

    @field_validator("slo")
    @classmethod
    def _named_once(cls, slos: list[SloSettings]) -> list[SloSettings]:
        names = [s.name for s in slos]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each [[slo]] needs a name of its own: {', '.join(twice)} is given twice")
        return slos

    @field_validator("clickhouse")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not url.startswith(("chdb:", "http://", "https://")):
            raise ValueError(f"--clickhouse must be chdb:PATH or http(s)://user:pass@host:port/db, got {url!r}")
        return url

    def slos(self) -> list[Slo]:
        return [s.slo() for s in self.slo]

    @property
    def bootstrap(self) -> str:
        return self.kafka or self.embedded_broker

    @property
    def external_url(self) -> str:
        """The base of every absolute link (never a request's Host header, which the client chooses)."""
        return (self.notify.external_url or self.api.url).rstrip("/")

    @property
    def consumer_group(self) -> str:
        """The worker's consumer group (Faust's app id)."""
        return f"{self.topic_prefix}-worker"

    @property
    def verdicts_topic(self) -> str:
        return f"{self.topic_prefix}.verdicts"

    @property
    def dlq_topic(self) -> str:
        return f"{self.topic_prefix}.verdicts.dlq"

    @property
    def alerts_topic(self) -> str:
        return f"{self.topic_prefix}.alerts"


class SettingsError(ValueError):
    """A settings source holds a bad value; the message names the field."""


NOT_FIELDS = {"CLAIMWATCH_CONFIG", "CLAIMWATCH_TOKEN"}  # the config file's path; the CLI's API token


class _Environment(EnvSettingsSource):
    """The settings a mapping of environment variables gives (os.environ, or a test's), JSON for lists and tables
    (CLAIMWATCH_API__TOKEN_HASHES='["ab12…"]'). A variable that names no setting is refused, not ignored: a typo
    must not leave the default silently in force."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        super().__init__(Settings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self.environ.items()}

    def __call__(self) -> dict[str, Any]:
        for key in sorted(self.environ):
            if key.startswith(ENV_PREFIX) and key not in NOT_FIELDS:
                name = key[len(ENV_PREFIX) :].split("__")[0].lower()
                if name not in Settings.model_fields:
                    raise SettingsError(
                        f"{key} names no setting; `claimwatch config show` lists them "
                        f"(nested ones as CLAIMWATCH_<SECTION>__<NAME>)"
                    )
        return super().__call__()


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        elif value is not None:
            merged[key] = value
    return merged


def settings_layers(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """What each source sets, lowest precedence first: ("file", ...), ("env", ...), ("flag", ...)."""
    data: dict[str, Any] = {}
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise SettingsError(f"config file {path} does not exist; pass an existing TOML file to --config")
        try:
            data = TomlConfigSettingsSource(Settings, toml_file=path)()
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: not valid TOML: {exc}") from exc
    env = _Environment(os.environ if environ is None else environ)()
    return [("file", data), ("env", env), ("flag", _merge({}, flags or {}))]


def load_settings(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge file < environment < flags and validate once."""
    return settings_from(settings_layers(config_file, environ, flags))


def settings_from(layers: list[tuple[str, dict[str, Any]]]) -> Settings:
    data: dict[str, Any] = {}
    for _, layer in layers:
        data = _merge(data, layer)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise SettingsError(f"setting {where}: {first['msg']}") from exc


def flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted names (``drift.detector.h``); lists are values."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def in_force(settings: Settings, layers: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, str]]:
    """Every setting in force as (dotted name, value, source): the last layer that set it, else "default"."""
    given = {}
    for source, layer in layers:
        given.update(dict.fromkeys((n for n, v in flat(layer).items() if v is not None), source))
    rows = []
    for name, value in flat(settings.model_dump(mode="json")).items():
        # a table given whole (owners, route_thresholds) counts where it was given
        source = given.get(name) or next((given[g] for g in given if name.startswith(g + ".")), "default")
        rows.append((name, value, source))
    return rows
