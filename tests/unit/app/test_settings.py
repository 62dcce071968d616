import pytest

from services.app.settings import SettingsError, load_settings


def test_precedence_file_then_env_then_flags(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'topic_prefix = "file"\nclickhouse = "chdb:/from/file"\n[drift]\nthreshold = 0.03\nmin_claims = 50\n'
    )
    s = load_settings(cfg, {}, {})
    assert (s.topic_prefix, s.clickhouse, s.drift.threshold, s.drift.min_claims) == (
        "file",
        "chdb:/from/file",
        0.03,
        50,
    )
    s = load_settings(cfg, {"CLAIMWATCH_TOPIC_PREFIX": "env", "CLAIMWATCH_DRIFT__THRESHOLD": "0.04"}, {})
    assert (s.topic_prefix, s.drift.threshold, s.drift.min_claims) == ("env", 0.04, 50)
    s = load_settings(cfg, {"CLAIMWATCH_TOPIC_PREFIX": "env"}, {"topic_prefix": "flag", "kafka": None})
    assert s.topic_prefix == "flag" and s.clickhouse == "chdb:/from/file" and s.kafka is None


def test_defaults_and_topics():
    s = load_settings(None, {}, {})
    assert s.clickhouse == "chdb:./var/clickhouse"
    assert (s.verdicts_topic, s.dlq_topic, s.alerts_topic) == (
        "claimwatch.verdicts",
        "claimwatch.verdicts.dlq",
        "claimwatch.alerts",
    )
    assert s.bootstrap == s.embedded_broker


@pytest.mark.parametrize(
    "env, message",
    [
        ({"CLAIMWATCH_DRIFT__THRESHOLD": "lots"}, "drift.threshold"),
        ({"CLAIMWATCH_CLICKHOUSE": "mysql://x"}, "clickhouse"),
        ({"CLAIMWATCH_INGEST__BATCH_SIZE": "0"}, "ingest.batch_size"),
        ({"CLAIMWATCH_NO_SUCH": "1"}, "CLAIMWATCH_NO_SUCH names no setting"),
        ({"CLAIMWATCH_DRIFT__NO_SUCH": "1"}, "drift.no_such"),
    ],
)
def test_bad_values_name_the_field(env, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(None, env, {})


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", {}, {})
    bad = tmp_path / "bad.toml"
    bad.write_text("x = [")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(bad, {}, {})


def test_lists_and_tables_from_the_environment_are_json():
    env = {
        "CLAIMWATCH_API__TOKEN_HASHES": '["ab", "cd"]',
        "CLAIMWATCH_DRIFT__ROUTE_THRESHOLDS": '{"billing-faq": 0.03}',
        "CLAIMWATCH_CONFIG": "/some/file.toml",
        "CLAIMWATCH_TOKEN": "secret",
    }
    s = load_settings(None, env, {})
    assert s.api.token_hashes == ("ab", "cd") and s.drift.route_thresholds == {"billing-faq": 0.03}


def test_links_use_the_configured_external_url_else_the_api_url():
    assert (
        load_settings(None, {"CLAIMWATCH_API__URL": "http://127.0.0.1:9123/"}, {}).external_url
        == "http://127.0.0.1:9123"
    )
    configured = {
        "CLAIMWATCH_API__URL": "http://127.0.0.1:9123",
        "CLAIMWATCH_NOTIFY__EXTERNAL_URL": "https://cw.example",
    }
    assert load_settings(None, configured, {}).external_url == "https://cw.example"


def test_one_setting_moves_the_api_its_url_follows_the_port_unless_set():
    """With only CLAIMWATCH_API__PORT=18480, `token show` still named http://127.0.0.1:8080 and every command drove
    whatever owned that port."""
    from services.app.settings import load_settings

    assert load_settings(environ={"CLAIMWATCH_API__PORT": "18480"}).api.url == "http://127.0.0.1:18480"
    assert load_settings(environ={}).api.url == "http://127.0.0.1:8080"
    both = load_settings(environ={"CLAIMWATCH_API__PORT": "18480", "CLAIMWATCH_API__URL": "https://cw.example.com"})
    assert both.api.url == "https://cw.example.com"
    assert (
        load_settings(environ={"CLAIMWATCH_API__HOST": "0.0.0.0", "CLAIMWATCH_API__PORT": "9000"}).api.url
        == "http://127.0.0.1:9000"
    )


def test_the_runbook_template_directory_the_runbooks_name_is_a_real_setting(tmp_path):
    """Every runbook said "drop a file into your runbook template directory", and no setting named one."""
    from services.alerts.lifecycle.kinds import SILENT_KIND
    from services.app.compose import build
    from services.app.settings import load_settings
    from services.store.backends import ChdbStore
    from tests.unit.api.test_input_alerts import SILENT

    assert SILENT.kind == SILENT_KIND
    templates = tmp_path / "runbooks"
    templates.mkdir()
    (templates / "route_silent.md.j2").write_text("Our own page for a silent route.\n")
    store = ChdbStore(tmp_path / "ch")
    try:
        packaged = build(load_settings(environ={}), store).alerts.runbook(SILENT)
        assert "runbooks.template_dir" in packaged and "Our own page" not in packaged
        settings = load_settings(environ={"CLAIMWATCH_RUNBOOKS__TEMPLATE_DIR": str(templates)})
        assert build(settings, store).alerts.runbook(SILENT) == "Our own page for a silent route.\n"
    finally:
        store.close()


@pytest.mark.parametrize("name", ["threshold", "min_claims", "baseline_minutes"])
def test_a_setting_given_in_two_places_is_refused_naming_both(tmp_path, name):
    """drift.detector.threshold used to be accepted and then silently replaced by drift.threshold."""
    config = tmp_path / "claimwatch.toml"
    config.write_text(f"[drift.detector]\n{name} = 500\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(config, {}, {})
    assert f"drift.detector.{name} and drift.{name} are one setting given in two places" in str(refused.value)
    with pytest.raises(SettingsError, match=f"set it once, as drift.{name}"):
        load_settings(None, {f"CLAIMWATCH_DRIFT__DETECTOR__{name.upper()}": "0.05"}, {})
    assert load_settings(None, {}, {"drift": {"detector": {"h": 9}}}).drift.detector_config().cusum.h == 9
