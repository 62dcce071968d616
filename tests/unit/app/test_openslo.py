"""`claimwatch slo import`: OpenSLO v1 documents become [[slo]] tables that the settings load back as the same SLOs;
what claimwatch cannot honour is refused, naming the document and what to change."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.app.openslo import OpenSloError, read_documents, slo_settings
from services.app.settings import load_settings
from services.rates.slo import Slo

SOURCE = "{metricSource: {type: claimwatch, spec: {sli: claims, routes: 'billing-*'}}}"
INLINE = f"""
apiVersion: openslo/v1
kind: SLO
metadata: {{name: billing-faithfulness, displayName: Billing faithfulness}}
spec:
  description: "19 in 20 billing claims grounded, \\"quoted\\""
  service: billing
  indicator:
    metadata: {{name: billing-claims}}
    spec:
      ratioMetric: {{counter: true, good: {SOURCE}, total: {SOURCE}}}
  timeWindow: [{{duration: 28d, isRolling: true}}]
  budgetingMethod: Occurrences
  objectives: [{{displayName: grounded, target: 0.95}}]
"""
BY_REFERENCE = """
---
apiVersion: openslo/v1
kind: SLI
metadata: {name: safe-serving}
spec:
  ratioMetric:
    counter: true
    good: {metricSource: {type: claimwatch, spec: {sli: served_answers, routes: "parcel-*", model: "gen-2026-1*"}}}
    total: {metricSource: {type: claimwatch, spec: {sli: served_answers, routes: "parcel-*", model: "gen-2026-1*"}}}
---
apiVersion: openslo/v1
kind: SLO
metadata: {name: parcel-safe}
spec:
  indicatorRef: safe-serving
  timeWindow: [{duration: 7d, isRolling: true}]
  objectives: [{targetPercent: 99}]
"""


def test_openslo_documents_become_slos_the_settings_load_back(tmp_path):
    source = tmp_path / "slos.yaml"
    source.write_text(INLINE + BY_REFERENCE)
    config = tmp_path / "claimwatch.toml"
    config.write_text("[api]\nport = 18123\n")
    result = CliRunner().invoke(main, ["slo", "import", str(source), "--append", str(config)])
    assert result.exit_code == 0, result.output
    assert "added 2 SLOs to" in result.output and "billing-faithfulness, parcel-safe" in result.output
    loaded = load_settings(config_file=str(config), environ={})
    assert loaded.api.port == 18123  # what the file held stays
    assert loaded.slos() == [
        Slo("billing-faithfulness", "billing-*", 0.95, 28 * 24 * 60, "claims", None, None,
            '19 in 20 billing claims grounded, "quoted"'),
        Slo("parcel-safe", "parcel-*", 0.99, 7 * 24 * 60, "served_answers", "model", "gen-2026-1*"),
    ]  # fmt: skip
    printed = CliRunner().invoke(main, ["slo", "import", str(source)])
    assert printed.exit_code == 0 and printed.output.count("[[slo]]") == 2


@pytest.mark.parametrize(
    "change, said",
    [
        (("isRolling: true", "isRolling: false"), "calendar windows are not supported"),
        (("budgetingMethod: Occurrences", "budgetingMethod: Timeslices"), "budgetingMethod 'Timeslices'"),
        (("type: claimwatch, spec: {sli: claims, routes: 'billing-*'}}}, total", "type: prometheus}}, total"),
         "metricSource.type 'prometheus'"),
        (("ratioMetric:", "thresholdMetric:"), "thresholdMetric is not supported"),
        (("target: 0.95}]", "target: 0.95}, {target: 0.9}]"), "give exactly one objective"),
        (("apiVersion: openslo/v1", "apiVersion: openslo/v2alpha"), "claimwatch reads openslo/v1"),
        (("duration: 28d", "duration: 2d"), "must be from 3d"),
        (("routes: 'billing-*'}}}, total", "routes: 'billing-*', team: x}}}, total"), "not team"),
    ],
)  # fmt: skip
def test_what_claimwatch_cannot_honour_is_refused_with_what_to_change(change, said):
    old, new = change
    assert old in INLINE
    with pytest.raises(OpenSloError) as caught:
        slo_settings(read_documents(INLINE.replace(old, new, 1)))
    assert said in str(caught.value), str(caught.value)
    assert "billing-faithfulness" in str(caught.value) or "apiVersion" in str(caught.value)


def test_a_file_that_is_not_openslo_stops_the_command_with_its_reason(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: openslo/v1\nkind: Service\nmetadata: {name: x}\n")
    result = CliRunner().invoke(main, ["slo", "import", str(bad)])
    assert result.exit_code == 1 and "holds no kind: SLO document" in result.output
