"""settings.retention: validated with a clear message, and applied to the store when a service starts (only then,
and only when it differs from the TTLs in force)."""

from __future__ import annotations

import pytest

from services.app.compose import opened
from services.app.settings import Settings, SettingsError, load_settings
from services.store.retention import RetentionKeeper, ttl_days


def days_in_force(components) -> dict[str, int | None]:
    ttls = RetentionKeeper(components.store).ttls()
    return {t: ttl_days(ttls[t]) for t in ("events", "claims", "dlq", "rate_minute", "alerts")}


def ttl_mutations(components) -> int:
    return components.store.query("SELECT count() AS n FROM system.mutations WHERE command LIKE '%TTL%'")[0]["n"]


def test_defaults_and_every_source(tmp_path):
    assert load_settings(None, {}, {}).retention.model_dump() == {"raw_days": 30, "aggregate_days": 400}
    cfg = tmp_path / "c.toml"
    cfg.write_text("[retention]\nraw_days = 14\naggregate_days = 180\n")
    assert load_settings(cfg, {}, {}).retention.model_dump() == {"raw_days": 14, "aggregate_days": 180}
    env = {"CLAIMWATCH_RETENTION__RAW_DAYS": "7"}
    assert load_settings(cfg, env, {}).retention.model_dump() == {"raw_days": 7, "aggregate_days": 180}


@pytest.mark.parametrize(
    "retention, message",
    [
        ({"raw_days": "0"}, r"retention\.raw_days: Input should be greater than or equal to 1"),
        ({"aggregate_days": "0"}, r"retention\.aggregate_days: Input should be greater than or equal to 1"),
        ({"raw_days": "-3"}, r"retention\.raw_days"),
        ({"raw_days": "a month"}, r"retention\.raw_days: Input should be a valid integer"),
        ({"raw_days": "60", "aggregate_days": "30"}, r"aggregate_days \(30\) must be at least raw_days \(60\)"),
        ({"aggregate_days": "20"}, r"aggregate_days \(20\) must be at least raw_days \(30\)"),
        ({"raw_days": "36500"}, r"retention\.raw_days: Input should be less than or equal to 3650"),
        ({"keep_days": "5"}, r"retention\.keep_days: Extra inputs are not permitted"),
    ],
)
def test_bad_values_say_which_and_why(retention, message):
    env = {f"CLAIMWATCH_RETENTION__{k.upper()}": v for k, v in retention.items()}
    with pytest.raises(SettingsError, match=message):
        load_settings(None, env, {})


def test_a_changed_setting_is_applied_on_start_and_an_unchanged_one_is_not(tmp_path):
    url = f"chdb:{tmp_path / 'clickhouse'}"
    with opened(Settings(clickhouse=url), starting=True) as c:  # first start: the migration's defaults stand
        assert days_in_force(c) == {"events": 30, "claims": 30, "dlq": 30, "rate_minute": 400, "alerts": None}
        migrated = ttl_mutations(c)

    shorter = Settings(clickhouse=url, retention={"raw_days": 7, "aggregate_days": 90})
    with opened(shorter, starting=True) as c:
        assert days_in_force(c) == {"events": 7, "claims": 7, "dlq": 7, "rate_minute": 90, "alerts": None}
        applied = ttl_mutations(c)
        assert applied > migrated
    with opened(shorter, starting=True) as c:  # a restart with the same settings re-applies nothing
        assert ttl_mutations(c) == applied

    with opened(Settings(clickhouse=url), starting=False) as c:  # a CLI command without the config: left alone
        assert days_in_force(c)["events"] == 7 and ttl_mutations(c) == applied
