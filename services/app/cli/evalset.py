"""`claimwatch` commands. The eval set: promotion, items, export, report, agreement, gate."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click
import orjson
from pydantic import ValidationError

from services.api.models import RunAnswerBody, plain_errors
from services.app.cli.base import (
    Abort,
    answer,
    by_option,
    console,
    main,
    out,
    print_json,
    reach,
    say_if_merged,
    service_options,
    text_or_json,
    who,
)
from services.app.cli.tables import Column, labelled, output_option, print_labelled, print_table, terminal_width
from services.app.settings import Settings
from services.core.command import cli_command
from services.core.files import write_atomically
from services.core.numbers import change_interval_text, pct, plural, pts
from services.evalset.compare import parse_matcher
from services.evalset.runs import MAX_ANSWERS


def _promotion_errors(fn):
    """Promotion refusals (approve twice, self-approval, near duplicate, ...) are user errors: exit 1 with the
    reason."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from services.evalset.promotion import PromotionError

        try:
            return fn(*args, **kwargs)
        except PromotionError as exc:
            raise Abort(str(exc)) from None

    return wrapper


@main.group()
def promote() -> None:
    """Promote representative traces into the eval set, with a reviewer's sign-off."""


@promote.command("propose")
@click.argument("issue_id")
@click.option("--traces", default=None, help="Comma-separated trace ids (default: the issue's representative traces).")
@by_option("Who proposes.")
@service_options
@_promotion_errors
def promote_propose(settings: Settings, issue_id: str, traces: str | None, by: str | None) -> None:
    """Propose traces of an issue as eval items (their verifier labels are copied in)."""
    by = who(settings, by)
    ids = [t.strip() for t in traces.split(",") if t.strip()] if traces else None
    data = reach(
        settings, "/api/promotions", {}, method="POST", body={"issue_id": issue_id, "trace_ids": ids, "by": by}
    )
    if data:
        say_if_merged(issue_id, data[0]["origin_issue_id"])
    for item in data:
        console.print(f"proposed {item['item_id']} from trace {item['origin_trace_id']}")
    if data:
        console.print(
            sign_off_hint(data[0]["proposed_by"], data[0]["item_id"]), markup=False, highlight=False, soft_wrap=True
        )


def sign_off_hint(proposer: str, item_id: str) -> str:
    """How a second person approves: with a token that names them (`claimwatch demo` keeps one for a reviewer)."""
    return (
        f"someone other than {proposer} signs off, with a token that names them "
        f"(`{cli_command()} token new --name NAME`):\n"
        f"  CLAIMWATCH_TOKEN=THEIR_TOKEN {cli_command()} promote approve {item_id} --reason '...'"
    )


def _review(settings: Settings, verdict: str, item_id: str, by: str | None, reason: str) -> None:
    """approve or reject: the same call, API first, the store files otherwise."""
    by = who(settings, by)
    data = reach(settings, f"/api/promotions/{item_id}/{verdict}", {}, method="POST", body={"by": by, "reason": reason})
    console.print(f"{data['item_id']} {data['state']} by {data['reviewed_by']}")


@promote.command("approve")
@click.argument("item_id")
@by_option("Reviewer.")
@click.option("--reason", default="", help="Why it belongs in the eval set.")
@service_options
@_promotion_errors
def promote_approve(settings: Settings, item_id: str, by: str | None, reason: str) -> None:
    """Approve a proposed item (the sign-off)."""
    _review(settings, "approve", item_id, by, reason)


@promote.command("reject")
@click.argument("item_id")
@by_option("Reviewer.")
@click.option("--reason", required=True, help="Why not.")
@service_options
@_promotion_errors
def promote_reject(settings: Settings, item_id: str, by: str | None, reason: str) -> None:
    """Reject a proposed item, with a reason."""
    _review(settings, "reject", item_id, by, reason)


@main.group()
def evalset() -> None:
    """The eval (golden) set: items and export."""


ITEM_COLUMNS = [
    Column("ITEM", lambda i: i["item_id"], kind="id"),
    Column("STATE", lambda i: i["state"]),
    Column("QUERY", lambda i: i["query"], 1, "name", min_width=20),
    Column("ROUTE", lambda i: i["origin_route"], 2, "key"),
    Column("ISSUE", lambda i: i["origin_issue_id"], 3, "id"),
    Column("PROPOSED BY", lambda i: i["proposed_by"], 4, "name", lines=1, min_width=11),
    Column("REVIEWED BY", lambda i: i["reviewed_by"], 4, "name", lines=1, min_width=11),
    Column("TRACE", lambda i: i["origin_trace_id"], 5, "id"),
]


@evalset.command("items")
@click.option("--state", type=click.Choice(["proposed", "approved", "rejected"]), default=None)
@output_option
@service_options
def evalset_items(settings: Settings, state: str | None, output: str) -> None:
    """Eval items (-o wide: every column; -o json: the API's JSON)."""
    params = {"state": state} if state else {}
    data = reach(settings, "/api/promotions", params)
    if output == "json":
        print_json(data)
        return
    print_table(
        ITEM_COLUMNS, data, output, empty=f"no eval items: propose some with `{cli_command()} promote propose ISSUE_ID`"
    )


@evalset.command("export")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@service_options
@_promotion_errors
def evalset_export(settings: Settings, out: Path) -> None:
    """Write approved items with their spans and labels, one item per line."""
    content = answer(settings, "/api/promotions/export").content
    try:
        write_atomically(out, content)
    except OSError as exc:
        raise Abort(f"cannot write {out}: {exc.strerror}; choose a writable path") from None
    items = content.count(b"\n")
    console.print(f"exported {plural(items, 'approved item')} to {out}")


@main.group("eval")
def eval_group() -> None:
    """Eval-set metrics with intervals, agreement with human labels, and the CI gate."""


def _figure(f: dict) -> str:
    if f.get("value") is None:
        return "—"
    if f.get("note") or f.get("lo") is None or f.get("hi") is None:  # too few items: no zero-width band
        return f"{100 * f['value']:.1f}% ({f.get('note') or 'n=' + str(f['items']) + ': no interval'})"
    return f"{100 * f['value']:.1f}% [{100 * f['lo']:.1f}–{100 * f['hi']:.1f}] (n={f['items']})"


@eval_group.command("report")
@click.option("--json", "as_json", is_flag=True)
@service_options
def eval_report_cmd(settings: Settings, as_json: bool) -> None:
    """Faithfulness by query type and stakes (worst slice first) and the abstention pair, with 95% intervals."""
    data = reach(settings, "/api/eval/report", {})
    if as_json:
        print_json(data)
        return
    agreement = data.get("agreement")
    kappa = (
        f"verifier-human kappa {agreement['kappa']['value']:.2f}"
        if agreement and agreement["kappa"]["value"] is not None
        else "no human labels yet: the automated figures below are unchecked"
    )
    out.print(f"eval set: {plural(data['items'], 'item')}; {kappa}")
    out.print(f"faithfulness (supported / checkable claims): {_figure(data['faithfulness'])}")
    for s in data["slices"]:
        out.print(f"  {s['dim']}={s['value']:<14} {_figure(s['faithfulness'])}")
    pair = data["abstention"]
    out.print(
        f"abstention pair: correct abstention {_figure(pair['correct_abstention'])} | "
        f"over-refusal {_figure(pair['over_refusal'])}"
    )


@eval_group.command("agreement")
@text_or_json
@service_options
def eval_agreement_cmd(settings: Settings, output: str, as_json: bool) -> None:
    """Verifier labels beside human labels on the same claims of approved items: kappa, confusion, worst slices."""

    data = reach(settings, "/api/eval/agreement", {})
    if output == "json" or as_json:
        print_json(data)
        return
    print_labelled(labelled(agreement_fields(data, cli_command()), terminal_width()))


def agreement_fields(a: dict, cli: str = "claimwatch") -> list[tuple[str, str | list[str]]]:
    """What `eval agreement` prints: (label, value or lines); with no pairs, where human labels come from."""
    if not a.get("pairs"):
        return [
            ("pairs", "none: no claim of an approved eval item has both a verifier and a human label yet"),
            (
                "to label",
                [
                    f"{cli} review sample --eval (queues the eval items' claims for review)",
                    f"{cli} review next --reviewer NAME (labels them blind)",
                    f"{cli} review agreement (verifier-vs-human kappa over reviewed claims, eval ones included)",
                ],
            ),
        ]
    kappa = a["kappa"]
    labels = a.get("labels") or []
    confusion = [
        f"verifier {v} -> human " + ", ".join(f"{h} {n:,}" for h, n in zip(labels, row) if n)
        for v, row in zip(labels, a.get("confusion") or [])
        if any(row)
    ]
    slices = [
        f"{s['dim']}={s['value']}: {100 * s['disagreement']:.0f}% disagree over {s['pairs']:,} pairs, kappa "
        f"{_two_places(s['kappa'])}"
        + (
            f"; most often verifier {s['top_confusion'][0]}, human {s['top_confusion'][1]} ({s['top_confusion'][2]})"
            if s.get("top_confusion")
            else ""
        )
        for s in a.get("slices") or []
    ]
    return [
        ("pairs", f"{a['pairs']:,} claims labelled by both, on {plural(kappa['items'], 'item')}"),
        ("kappa", _kappa(kappa)),
        ("agree", _figure(a["observed"])),
        ("confusion", confusion),
        ("worst slices", slices),
    ]


def _two_places(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _kappa(f: dict) -> str:
    """A kappa figure as ``_figure`` writes a share: ``0.71 [0.55–0.84] (n=40)``, or why it has no interval."""
    if f.get("value") is None:
        return "—"
    if f.get("note") or f.get("lo") is None or f.get("hi") is None:
        return f"{f['value']:.2f} ({f.get('note') or 'no interval'})"
    return f"{f['value']:.2f} [{f['lo']:.2f}–{f['hi']:.2f}] (n={f['items']})"


@eval_group.command("gate")
@click.option("--min-faithfulness", type=float, default=None)
@click.option("--max-over-refusal", type=float, default=None)
@click.option("--slice-min", default=None, help="e.g. 0.8, or stakes=high:0.9,query_type=lookup:0.85")
@click.option(
    "--min-calibrated-faithfulness",
    type=click.FloatRange(0, 1),
    default=None,
    help="faithfulness corrected for the verifier's errors measured by human review; stale calibration fails",
)
@click.option(
    "--min-kappa", type=click.FloatRange(-1, 1), default=None, help="verifier-vs-human kappa over the reviewed claims"
)
@click.option(
    "--baseline",
    default=None,
    metavar="RUN|KEY=VALUE",
    help="also fail where the candidate run is credibly worse than this run (eval.compare_tolerance)",
)
@click.option(
    "--candidate", default=None, metavar="RUN|KEY=VALUE", help="the run gated against --baseline (default: the newest)"
)
@service_options
def eval_gate_cmd(
    settings: Settings,
    min_faithfulness: float | None,
    max_over_refusal: float | None,
    slice_min: str | None,
    min_calibrated_faithfulness: float | None,
    min_kappa: float | None,
    baseline: str | None,
    candidate: str | None,
) -> None:
    """Exit non-zero, naming the failing slice, when the eval set misses a threshold, or a candidate run is credibly
    worse than its baseline (for CI)."""
    from services.evalset.instrument import InstrumentChecks

    checks = InstrumentChecks(min_calibrated_faithfulness, min_kappa)
    if candidate and not baseline:
        raise Abort("--candidate needs --baseline: the run to compare the candidate with")
    if min_faithfulness is None and max_over_refusal is None and slice_min is None and not checks and not baseline:
        raise Abort(
            "give at least one of --min-faithfulness, --max-over-refusal, --slice-min, "
            "--min-calibrated-faithfulness, --min-kappa, --baseline"
        )
    params = {
        k: v
        for k, v in {
            "min_faithfulness": min_faithfulness,
            "max_over_refusal": max_over_refusal,
            "slice_min": slice_min,
            "min_calibrated_faithfulness": min_calibrated_faithfulness,
            "min_kappa": min_kappa,
            "baseline": baseline,
            "candidate": candidate,
        }.items()
        if v is not None
    }
    data = reach(settings, "/api/eval/gate", params)
    if data["passed"]:
        console.print("eval gate passed:", markup=False, highlight=False)
        for line in data["checked"]:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
        return
    for failure in data["failures"]:
        console.print(f"[red]FAIL[/red] {failure['slice']}: {failure['message']}")
    sys.exit(1)


COMPARE_COLUMNS = [
    Column("METRIC", lambda m: m["metric"], kind="key"),
    Column("ON", lambda m: m["where"], kind="key"),
    Column("ITEMS", lambda m: f"{m['pairs']:,}", kind="num"),
    Column("BASELINE", lambda m: pct(m["baseline"]["value"]), kind="num"),
    Column("CANDIDATE", lambda m: pct(m["candidate"]["value"]), kind="num"),
    Column("CHANGE", lambda m: pts(m["difference"]), kind="num"),
    Column(
        "95% CI",
        lambda m: m["note"] or change_interval_text(m["lo"], m["hi"]),
        1,
        "name",
        min_width=18,
        note="the paired bootstrap interval of the change (items resampled, the same ones for both runs)",
    ),
    Column("READING", lambda m: m["reading"], 2, "name", min_width=12),
]


@eval_group.command("compare")
@click.option("--baseline", required=True, metavar="RUN|KEY=VALUE", help="a run id, or versions: model=gen-2026-10")
@click.option(
    "--candidate",
    default="",
    metavar="RUN|KEY=VALUE",
    help="a run id, or versions: model=gen-2026-11 (default: newest)",
)
@output_option
@service_options
def eval_compare_cmd(settings: Settings, baseline: str, candidate: str, output: str) -> None:
    """Two eval runs on the approved items both answered: each metric's change with a paired 95% interval.

    KEY=VALUE[,KEY=VALUE] picks the newest run whose versions hold them; faithfulness by slice follows, the
    candidate's largest loss first."""
    data = reach(settings, "/api/eval/compare", {"baseline": baseline, "candidate": candidate})
    if output == "json":
        print_json(data)
        return
    print_labelled(labelled(compare_fields(data), terminal_width()))
    out.print()
    print_table(COMPARE_COLUMNS, data["metrics"] + data["slices"], output)


def compare_fields(c: dict) -> list[tuple[str, str | list[str]]]:
    """What `eval compare` prints above its table: the two runs and the items both answered."""

    def run(r: dict) -> str:
        matched = f"; the newest of {r['matched']:,} runs matching {r['matcher']}" if r["matched"] > 1 else ""
        return r["label"] + matched

    return [
        ("baseline", run(c["baseline"])),
        ("candidate", run(c["candidate"])),
        (
            "items",
            f"{plural(c['items'], 'approved item')} answered by both ({c['baseline_only']:,} only by the baseline, "
            f"{c['candidate_only']:,} only by the candidate)",
        ),
    ]


@eval_group.command("record")
@click.argument("run_id")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--version",
    "versions",
    default="",
    metavar="KEY=VALUE[,KEY=VALUE]",
    help="what answered, as in events: model=gen-2026-11,prompt=p7",
)
@click.option("--labeler", required=True, metavar="verifier:NAME[@VERSION]", help="who labelled the claims")
@service_options
def eval_record_cmd(settings: Settings, run_id: str, path: Path, versions: str, labeler: str) -> None:
    """Record an eval run: a system's answers to eval items, one JSON object per line of PATH:

    {"item_id": "ev-...", "action": "served", "answer": "...", "claims": [{"verdict": "supported", "text": "..."}]}

    (action: served, abstained, revised, blocked or review; a claim may also give claim_type, span and source_id).
    Answers the run holds already are kept as they were, so running it again changes nothing."""
    try:
        pairs = parse_matcher(versions, "--version")[1] if versions.strip() else {}
    except ValueError as exc:
        raise Abort(str(exc)) from None
    parts = run_parts(read_run_answers(path), settings.api.max_body_bytes * 3 // 4)
    recorded = claims = kept = held = 0
    previous = None
    for part in parts:
        body = {"versions": pairs, "labeler": labeler, "answers": part}
        data = reach(settings, f"/api/eval/runs/{run_id}", {}, method="POST", body=body)
        recorded, claims = recorded + data["recorded"], claims + data["claims"]
        kept, held, previous = kept + len(data["kept"]), data["items"], data["previous"]
    console.print(
        f"recorded {plural(recorded, 'answer')} ({plural(claims, 'claim')}) to run {run_id}"
        + (f"; {kept:,} it held already, kept as they were" if kept else "")
        + f"; it holds {plural(held, 'answer')}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if previous is not None:
        console.print("compare it with the run before:", markup=False, highlight=False)
        console.print(
            f"  {cli_command()} eval compare --baseline {previous} --candidate {run_id}", markup=False, highlight=False
        )


def read_run_answers(path: Path) -> list[dict]:
    """The file's answers, each checked as the API will check it; the first bad line stops it, named."""
    answers = []
    with path.open("rb") as lines:
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                answers.append(RunAnswerBody.model_validate_json(line).model_dump())
            except ValidationError as exc:
                raise Abort(f"{path}:{n}: {plain_errors(exc.errors())}") from None
    if not answers:
        raise Abort(f"{path} holds no answers")
    return answers


def run_parts(answers: list[dict], max_bytes: int) -> list[list[dict]]:
    """The answers in parts the API takes: at most MAX_ANSWERS answers and ``max_bytes`` of JSON each."""
    parts: list[list[dict]] = [[]]
    size = 0
    for one in answers:
        grows = len(orjson.dumps(one)) + 1
        if parts[-1] and (len(parts[-1]) == MAX_ANSWERS or size + grows > max_bytes):
            parts.append([])
            size = 0
        parts[-1].append(one)
        size += grows
    return parts
