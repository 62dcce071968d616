-- Blind review that is blind: a read that shows a claim's verdict (issue members, exemplars, traces) while a
-- reviewer holds the claim unlabelled marks that reservation exposed (services/store/exposure.py). A label made
-- on an exposed reservation is kept with blind = 0: it fills no slot and counts in no agreement.
CREATE TABLE IF NOT EXISTS review_exposures
(
    token String,
    claim_key String,
    via LowCardinality(String),
    shown_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = MergeTree
ORDER BY (token, shown_at);

ALTER TABLE review_labels ADD COLUMN IF NOT EXISTS blind UInt8 DEFAULT 1 AFTER guide_version;
