import pytest

from clustering.normalize import RULES, Normalizer, normalize

# (rule name, raw text, expected after that rule alone)
TABLE = [
    ("url", "see https://docs.example.com/refunds?plan=annual for details", "see <url> for details"),
    ("url", "www.example.org/a/b is down", "<url> is down"),
    ("email", "write to billing.team+eu@example.co.uk today", "write to <email> today"),
    ("uuid", "event 5f0c2d1e-8a61-4f7b-9a57-0c1d2e3f4a5b failed", "event <uuid> failed"),
    ("hash", "built from commit 9fceb02d0ae598e95dc970b74767f19372d61af8", "built from commit <hash>"),
    ("hash", "the word deadbeef is too short and has no digit", "the word deadbeef is too short and has no digit"),
    ("iso_datetime", "observed 2026-11-21T09:14:03.512+00:00 on route", "observed <date> on route"),
    ("iso_date", "effective from 2026-11-01 onwards", "effective from <date> onwards"),
    ("slash_date", "signed on 21/11/2026 and 11.03.26", "signed on <date> and <date>"),
    ("day_month_year", "arrives on 21st of November 2026", "arrives on <date>"),
    ("day_month_year", "valid until 3 Jan", "valid until <date>"),
    ("month_day_year", "launched on March 5, 2026 worldwide", "launched on <date> worldwide"),
    ("month_day_year", "closes Dec 24th", "closes <date>"),
    ("month_year", "since September 2025", "since <date>"),
    ("time", "opens at 9:30 am and closes at 17:45:00", "opens at <time> and closes at <time>"),
    ("time", "call before 5pm", "call before <time>"),
    ("amount_symbol", "costs $1,299.99 or €5 per month", "costs <amount> or <amount> per month"),
    ("amount_code", "a fee of 12.50 EUR or USD 30", "a fee of <amount> or <amount>"),
    ("amount_code", "refund of 40 dollars", "refund of <amount>"),
    ("percent", "a 5% fee, or 12.5 percent", "a <percent> fee, or <percent>"),
    ("ticket", "see ticket #48213", "see ticket <id>"),
    ("identifier", "order ORD-12345 on plan gen-2026-10 and sku ab12cd", "order <id> on plan <id> and sku <id>"),
    ("identifier", "a well-known fact", "a well-known fact"),
    ("digit_group", "parcel 88-1203 is late", "parcel <id> is late"),
    (
        "number",
        "within 30 days, 1,000 users or 2.5 hours, the 3rd time",
        "within <num> days, <num> users or <num> hours, the <num> time",
    ),
]


@pytest.mark.parametrize(("name", "raw", "expected"), TABLE, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(TABLE)])
def test_rule_table(name, raw, expected):
    assert Normalizer().apply(name, raw) == expected


def test_every_rule_has_a_table_row():
    assert {rule.name for rule in RULES} <= {name for name, _, _ in TABLE}


def test_claims_differing_only_in_an_invented_date_normalise_equal():
    a = "Annual plans can be refunded until 2026-11-03, the support page says."
    b = "Annual plans can be refunded until March 5, 2026, the support page says."
    c = "Annual plans can be refunded until 14/02/2027, the support page says."
    assert normalize(a) == normalize(b) == normalize(c)
    assert "<date>" in normalize(a)


def test_claims_differing_in_words_stay_different():
    assert normalize("Refunds take 3 days.") != normalize("Deliveries take 3 days.")


@pytest.mark.parametrize(
    "raw",
    [
        "Parcel 88-1203 arrives at 9:30 am on 2026-11-21 for $12.50 (5% off), see https://x.io/p/88",
        "Contact a.b@example.com about order ORD-77 and event 5f0c2d1e-8a61-4f7b-9a57-0c1d2e3f4a5b",
    ],
)
def test_normalisation_is_idempotent(raw):
    once = normalize(raw)
    assert normalize(once) == once
    assert not any(ch.isdigit() for ch in once)


def test_full_pipeline_orders_wide_patterns_first():
    # the date must not be eaten as three numbers, the url not as an identifier
    assert normalize("Due 2026-11-21 per https://a.io/x-1") == "due <date> per <url>"
    assert normalize("  Mixed   CASE\ttext ") == "mixed case text"


def test_unknown_rule_name_is_a_clear_error():
    with pytest.raises(KeyError, match="no normalisation rule named 'nope'"):
        Normalizer().apply("nope", "text")
