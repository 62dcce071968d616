"""`claimwatch config show`: every setting in force, with the source that set it; a setting given twice refused."""

from __future__ import annotations

import orjson
from click.testing import CliRunner

from services.app.cli import main
from services.app.settings import Settings


def show(tmp_path, *args: str, env: dict | None = None):
    config = tmp_path / "claimwatch.toml"
    config.write_text('[drift]\nthreshold = 0.03\n[triage]\nwebhook_secret = "s3cret-s3cret-s3cret"\n')
    runner = CliRunner(env={"COLUMNS": "100", **(env or {})})
    return runner.invoke(main, ["config", "show", "--config", str(config), *args])


def test_each_setting_names_its_source_and_secrets_are_masked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no stack record here
    result = show(
        tmp_path,
        "--json",
        "--kafka",
        "k:9092",
        "--clickhouse",
        "http://u:pw@ch:8123/db",
        env={"CLAIMWATCH_API__PORT": "9999", "CLAIMWATCH_DRIFT__DETECTOR__H": "9"},
    )
    assert result.exit_code == 0, result.output
    rows = {r["setting"]: (r["value"], r["source"]) for r in orjson.loads(result.stdout)}
    assert rows["drift.threshold"] == (0.03, "file")
    assert rows["api.port"] == (9999, "env") and rows["drift.detector.h"] == (9.0, "env")
    assert rows["kafka"] == ("k:9092", "flag") and rows["clickhouse"] == ("http://u:********@ch:8123/db", "flag")
    assert rows["triage.webhook_secret"] == ("********", "file")
    assert rows["drift.min_claims"] == (Settings().drift.min_claims, "default")
    every = {"ingest.batch_size", "api.anonymous_concurrency", "review.daily_budget", "eval.min_items"}
    every |= {"drift.detector.kind", "drift.detector.windows", "drift.input_health.silent_ratio"}  # typed, not dicts
    assert every <= rows.keys() and rows["drift.detector.kind"] == ("cusum", "default")


def test_the_table_fits_the_terminal_and_says_what_a_source_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = show(tmp_path)
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    assert any(line.split()[:3] == ["drift.threshold", "file", "0.03"] for line in result.stdout.splitlines())
    assert "SOURCE: default, file" in result.stdout


def test_a_setting_given_in_two_places_is_refused_by_every_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = show(tmp_path, env={"CLAIMWATCH_DRIFT__DETECTOR__THRESHOLD": "0.05"})
    assert result.exit_code != 0
    assert "drift.detector.threshold and drift.threshold are one setting given in two places" in result.output


def test_the_api_policy_is_the_api_settings_not_a_copy():
    from services.api.policy import ApiPolicy

    api = Settings(api={"protect_reads": True}).api
    assert isinstance(api, ApiPolicy) and api.protect_reads
    assert set(type(api).model_fields) - set(ApiPolicy.model_fields) == {"host", "port", "url"}
