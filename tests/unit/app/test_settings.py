import pytest

from services.app.settings import SettingsError, load_settings


def test_precedence_file_then_env_then_flags(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('topic_prefix = "file"\nclickhouse = "chdb:/from/file"\n[drift]\nthreshold = 0.03\nmin_claims = 50\n')
    s = load_settings(cfg, {}, {})
    assert (s.topic_prefix, s.clickhouse, s.drift.threshold, s.drift.min_claims) == ("file", "chdb:/from/file", 0.03, 50)
    s = load_settings(cfg, {"CLAIMWATCH_TOPIC_PREFIX": "env", "CLAIMWATCH_DRIFT__THRESHOLD": "0.04"}, {})
    assert (s.topic_prefix, s.drift.threshold, s.drift.min_claims) == ("env", 0.04, 50)
    s = load_settings(cfg, {"CLAIMWATCH_TOPIC_PREFIX": "env"}, {"topic_prefix": "flag", "kafka": None})
    assert s.topic_prefix == "flag" and s.clickhouse == "chdb:/from/file" and s.kafka is None


def test_defaults_and_topics():
    s = load_settings(None, {}, {})
    assert s.clickhouse == "chdb:./var/clickhouse"
    assert (s.verdicts_topic, s.dlq_topic, s.alerts_topic) == ("claimwatch.verdicts", "claimwatch.verdicts.dlq", "claimwatch.alerts")
    assert s.bootstrap == s.embedded_broker


@pytest.mark.parametrize("env, message", [
    ({"CLAIMWATCH_DRIFT__THRESHOLD": "lots"}, "drift.threshold"),
    ({"CLAIMWATCH_CLICKHOUSE": "mysql://x"}, "clickhouse"),
    ({"CLAIMWATCH_INGEST__BATCH_SIZE": "0"}, "ingest.batch_size"),
    ({"CLAIMWATCH_NO_SUCH": "1"}, "no_such"),
])
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
    env = {"CLAIMWATCH_API__TOKEN_HASHES": '["ab", "cd"]', "CLAIMWATCH_DRIFT__ROUTE_THRESHOLDS": '{"billing-faq": 0.03}',
           "CLAIMWATCH_CONFIG": "/some/file.toml", "CLAIMWATCH_TOKEN": "secret"}
    s = load_settings(None, env, {})
    assert s.api.token_hashes == ["ab", "cd"] and s.drift.route_thresholds == {"billing-faq": 0.03}


def test_links_use_the_configured_external_url_else_the_api_url():
    assert load_settings(None, {"CLAIMWATCH_API__URL": "http://127.0.0.1:9123/"}, {}).external_url == "http://127.0.0.1:9123"
    configured = {"CLAIMWATCH_API__URL": "http://127.0.0.1:9123", "CLAIMWATCH_NOTIFY__EXTERNAL_URL": "https://cw.example"}
    assert load_settings(None, configured, {}).external_url == "https://cw.example"
