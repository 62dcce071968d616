"""One route's answers for one minute: numpy draws every random number at once (draws.py names
them), then a plain loop assembles the event dicts from pre-rendered wording."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from services.client.simulate.draws import (
    PICK_HIGH,
    AnswerPicks,
    AnswerUniforms,
    ClaimUniforms,
    MinuteDraws,
    per_answer,
    signal_values,
)
from services.client.simulate.families import FAMILIES, FAMILY_LIST, STAGE_ORDER, Family
from services.client.simulate.scenario import Scenario
from services.client.simulate.wording import FailingText, domain_wording

SCHEMA = "claimwatch.verdict/v1"
CLAIM_IDS = tuple(f"c{i}" for i in range(1, 9))
SUPPORTED_TYPES = ("attribute", "action", "existence", "relation")
QUERY_TYPE_CUTS = ((0.6, "lookup"), (0.75, "multi_hop"), (0.85, "aggregation"), (0.9, "ambiguous"), (1.01, "other"))
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
REGIONS = ("eu-west", "eu-central", "us-east", "ap-south")
CHANNELS = ("web", "app", "api", "chat-widget")
# What producers send instead of the canonical verdict (the contract accepts these, case-insensitively).
ALIASES_SENT = {
    "supported": ("entailed", "entailment", "SUPPORTED", "Supported"),
    "unsupported": ("unlinked", "not_supported", "NEI", "not_enough_info", "NotEnoughInfo", "neutral"),
    "contradicted": ("refuted", "REFUTED", "contradiction"),
    "overreach": ("Overreach", "OVERREACH"),
    "stale": ("STALE", "Stale"),
    "no_source": ("NO_SOURCE", "No_Source"),
    "trivial": ("TRIVIAL", "Trivial"),
}


def _query_type(u: float) -> str:
    for cut, name in QUERY_TYPE_CUTS:
        if u < cut:
            return name
    return "other"


def _cite(chunk: dict, span: str) -> None:
    """A used chunk's text holds every span cited from it, verbatim."""
    chunk["text"] = f"{chunk['text']} {span}" if chunk["used"] else span
    chunk["used"] = True


def _action(u: float, abstained: bool, stakes: str, failed: int) -> str:
    if abstained:
        return "abstained"
    if failed >= 2 and stakes == "high" and u < 0.3:
        return "blocked"
    return "review" if u > 0.98 else "revised" if u > 0.95 else "served"


def _timestamp_form(u: float) -> int:
    return 0 if u < 0.55 else 1 if u < 0.85 else 2  # Z, +01:00, +00:00


@dataclass(slots=True)
class Drawn:
    """An event before it gets ids and a timestamp (those depend on the merged minute)."""

    ms: int  # millisecond within its minute
    form: int  # 0: Z, 1: +01:00, 2: +00:00
    event: dict
    families: tuple[str | None, ...]


@dataclass(slots=True)
class Answer:
    """One answer while its claims are written: what they draw on, and what their failures make of the event."""

    topic: int
    wording: int  # AnswerPicks.claim_wording
    labeler: str
    chunk_version: str
    evidence: list[dict]
    claims: list[dict] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)  # per claim: its failure family, None when it holds
    first_failure: tuple[FailingText, Family] | None = None  # the question is the one this failure answers
    stage: str | None = None  # the earliest stage a failure points at
    cherry: list[str] = field(default_factory=list)  # unused chunks that contradict a claim
    signal_kinds: set[str] = field(default_factory=set)  # signals the failures raise

    def failed(self, text: FailingText, family: Family) -> None:
        if self.first_failure is None:
            self.first_failure = (text, family)
        if self.stage is None or STAGE_ORDER[family.stage] < STAGE_ORDER[self.stage]:
            self.stage = family.stage
        if family.signal:
            self.signal_kinds.add(family.signal)


def _link(claim: dict, link: str, verdict: str, text: FailingText, answer: Answer, k: int) -> None:
    """Point a failing claim at the evidence its verdict rests on, adding the chunk that explains it."""
    evidence = answer.evidence
    src = evidence[0]["source_id"]
    if link == "phantom":
        claim["source_id"] = text.aux
        return
    if link == "stale":
        chunk = {"chunk_id": f"{src}@{text.aux}#{k + 1}", "source_id": src, "version": text.aux, "used": True}
    elif link == "unused_contradicting":
        chunk = {"chunk_id": f"{src}#alt{k + 1}", "source_id": src, "version": answer.chunk_version, "used": False}
        answer.cherry.append(chunk["chunk_id"])
    elif link == "off_topic":
        chunk = {
            "chunk_id": f"{text.aux}#{k + 1}",
            "source_id": text.aux,
            "version": answer.chunk_version,
            "used": True,
        }
    elif verdict == "unsupported":  # extrinsic: nothing in the evidence speaks to it
        return
    else:
        chunk = evidence[0]
        assert text.span is not None, "a family whose claims cite the evidence gives each a span"
        _cite(chunk, text.span)
    if chunk is not evidence[0]:
        chunk["text"] = text.span
        evidence.append(chunk)
    claim.update(chunk_id=chunk["chunk_id"], source_id=chunk["source_id"], span=text.span)


class RouteTraffic:
    """One route's traffic. It owns its random streams, so adding a route or a regression leaves
    the other routes' traffic (and this route's base traffic) exactly as it was."""

    def __init__(self, scenario: Scenario, index: int, seed: int, streams: np.random.SeedSequence):
        traffic, changes = streams.spawn(2)
        self.rng, self.change_rng = np.random.default_rng(traffic), np.random.default_rng(changes)
        self.scenario = scenario
        self.route = scenario.routes[index]
        self.words = domain_wording(scenario.domain_of(index), seed)
        self.regressions = [g for g in scenario.regressions if g.route == self.route.name]
        weights = np.array([self.route.families.get(f, 0.0) for f in FAMILIES], dtype=float)
        self.family_p = weights / weights.sum()
        stakes = np.array(self.route.stakes, dtype=float)
        self.stakes_cum = (np.cumsum(stakes) / stakes.sum()).tolist()
        self.concentration = 1.0 / scenario.intra_answer_correlation - 1.0
        self._versions: dict[int, tuple[dict, str, str]] = {}
        # Each family's failures on this route concern a few topics, as a real issue does.
        n_topics, per_family = len(self.words.topics), min(scenario.topics_per_family, len(self.words.topics))
        order = random.Random(f"{seed}/{self.route.name}/topics").sample(range(n_topics), n_topics)
        self.family_topics = [
            [order[(f * per_family + j) % n_topics] for j in range(per_family)] for f in range(len(FAMILIES))
        ]  # distinct families get distinct topics where possible

    def _beta(self, rng: np.random.Generator, mean: np.ndarray) -> np.ndarray:
        # Beta-binomial: each answer has its own failure propensity, so its claims fail together.
        k = self.concentration
        p = rng.beta(np.maximum(mean * k, 1e-9), np.maximum((1 - mean) * k, 1e-9))
        return np.where(mean > 0, p, 0.0)

    def _versions_for(self, code: int) -> tuple[dict, str, str]:
        if code not in self._versions:
            versions = dict(self.route.versions)
            for bit, g in enumerate(self.regressions):
                if code >> bit & 1:
                    versions.update(g.versions)
            corpus = versions.get("corpus", "")
            chunk_version = corpus.split("@", 1)[1] if "@" in corpus else corpus or "current"
            labeler = f"verifier:{versions.get('verifier', 'nli-judge@2.1')}"
            self._versions[code] = (versions, chunk_version, labeler)
        return self._versions[code]

    def draw(self, minute: int, volume_factor: float, hour: float = 0.0) -> list[Drawn]:
        """This route's answers in ``minute`` (from the start); ``hour`` (UTC, fractional) sets a swinging base rate."""
        n = int(self.rng.poisson(self.route.per_minute * volume_factor))
        if n == 0:
            return []
        draws = self._draw_minute(n, minute, hour)
        return [self._answer(draws, i) for i in range(n)]

    def _draw_minute(self, n: int, minute: int, hour: float) -> MinuteDraws:
        """Every random number of ``n`` answers, in the order the stream has always given them."""
        rng, sc, route = self.rng, self.scenario, self.route
        rows = rng.random((len(AnswerUniforms._fields), n))
        u: AnswerUniforms[np.ndarray] = AnswerUniforms(*rows)
        picks = rng.integers(0, PICK_HIGH, (len(AnswerPicks._fields), n))
        answerable = u.answerable >= route.unanswerable_share
        abstained = np.where(answerable, u.abstains < sc.over_refusal, u.abstains < sc.correct_abstention)
        n_claims = np.where(abstained, 0, 1 + rng.binomial(7, (route.mean_claims - 1) / 7, n))
        propensity = self._beta(rng, np.where(answerable, route.base_rate_at(hour), sc.unanswerable_answered_rate))
        base_family = rng.choice(len(FAMILIES), n, p=self.family_p)
        version_code, extras = self._regressions(n, minute)
        total = int(n_claims.sum())
        cu: ClaimUniforms[np.ndarray] = ClaimUniforms(*rng.random((len(ClaimUniforms._fields), total)))
        alias = rng.integers(0, PICK_HIGH, total)
        score = np.round(rng.uniform(0.55, 0.99, total), 2)
        checkable = cu.trivial >= sc.trivial_share
        owner = np.repeat(np.arange(n), n_claims)
        family = _failures(owner, cu.failure, checkable, propensity, base_family, extras)
        return MinuteDraws(
            uniforms=per_answer(AnswerUniforms, rows),
            picks=per_answer(AnswerPicks, picks),
            signals=signal_values(u),
            answerable=answerable.tolist(),
            abstained=abstained.tolist(),
            version_code=version_code.tolist(),
            claim_start=np.concatenate(([0], np.cumsum(n_claims))).tolist(),
            family=family.tolist(),
            checkable=checkable.tolist(),
            verdict=cu.verdict.tolist(),
            alias=alias.tolist(),
            score=score.tolist(),
        )

    def _regressions(self, n: int, minute: int) -> tuple[np.ndarray, list[tuple[np.ndarray, int]]]:
        """Per answer, a bit per regression it runs on; and per regression under way, the failure
        propensity it adds to each answer (0 off it) with its family's index."""
        code = np.zeros(n, dtype=np.int64)
        extras = []
        for bit, g in enumerate(self.regressions):
            share = g.share_at(minute)
            if share <= 0:
                continue
            on_new = self.change_rng.random(n) < share
            code |= on_new.astype(np.int64) << bit
            extra = self._beta(self.change_rng, np.full(n, g.rate_increase)) * on_new
            extras.append((extra, FAMILIES.index(g.family)))
        return code, extras

    def _answer(self, d: MinuteDraws, i: int) -> Drawn:
        sc, u, pick = self.scenario, d.uniforms[i], d.picks[i]
        first, end = d.claim_start[i], d.claim_start[i + 1]
        versions, chunk_version, labeler = self._versions_for(d.version_code[i])
        if u.human_label < sc.human_label_fraction:
            labeler = f"human:ann-{pick.annotator % 40:02d}"
        answer = Answer(
            self._topic(pick.topic, d.family[first:end]),
            pick.claim_wording,
            labeler,
            chunk_version,
            self._evidence(pick.evidence, chunk_version),
        )
        for k, j in enumerate(range(first, end)):
            f = d.family[j]
            if f >= 0:
                claim = self._failing_claim(answer, k, f, d.verdict[j], d.score[j])
            elif d.checkable[j]:
                claim = self._supported_claim(answer, k, d.score[j])
            else:
                claim = self._trivial_claim(answer, k, d.score[j])
            claim["labeler"] = labeler
            answer.claims.append(claim)
            answer.families.append(FAMILIES[f] if f >= 0 else None)
        if u.aliases < sc.alias_fraction:  # this producer sends its verifier's own labels
            for claim, alias in zip(answer.claims, d.alias[first:end]):
                sent = ALIASES_SENT[claim["verdict"]]
                claim["verdict"] = sent[alias % len(sent)]
        return self._event(d, i, dict(versions), answer)

    def _topic(self, pick: int, families: list[int]) -> int:
        """One answer keeps to one topic; a failing one to a topic its first failure's family is about."""
        first = next((f for f in families if f >= 0), -1)
        if first < 0:
            return pick % len(self.words.topics)
        topics = self.family_topics[first]
        return topics[pick % len(topics)]

    def _evidence(self, pick: int, chunk_version: str) -> list[dict]:
        """Three consecutive chunks of the corpus; a chunk a claim cites holds the cited spans instead."""
        chunks = self.words.chunks
        evidence = []
        for k in range(3):
            chunk_id, source_id, text = chunks[(pick + k) % len(chunks)]
            evidence.append(
                {"chunk_id": chunk_id, "source_id": source_id, "version": chunk_version, "used": False, "text": text}
            )
        return evidence

    def _failing_claim(self, answer: Answer, k: int, f: int, verdict_u: float, score: float) -> dict:
        family, pool = FAMILY_LIST[f], self.words.failing(f, answer.topic)
        text = pool[(answer.wording + k) % len(pool)]
        verdict = family.verdict(verdict_u)
        claim = {
            "claim_id": CLAIM_IDS[k],
            "text": text.claim,
            "claim_type": family.claim_type,
            "verdict": verdict,
            "score": score,
        }
        _link(claim, family.link, verdict, text, answer, k)
        answer.failed(text, family)
        return claim

    def _supported_claim(self, answer: Answer, k: int, score: float) -> dict:
        pool = self.words.supported[answer.topic]
        text, span = pool[(answer.wording + k) % len(pool)]
        chunk = answer.evidence[k & 1]  # alternate between the first two chunks
        _cite(chunk, span)
        return {
            "claim_id": CLAIM_IDS[k],
            "text": text,
            "claim_type": SUPPORTED_TYPES[(answer.wording + k) & 3],
            "verdict": "supported",
            "score": score,
            "chunk_id": chunk["chunk_id"],
            "source_id": chunk["source_id"],
            "span": span,
        }

    def _trivial_claim(self, answer: Answer, k: int, score: float) -> dict:
        pool = self.words.trivial[answer.topic]
        return {
            "claim_id": CLAIM_IDS[k],
            "text": pool[(answer.wording + k) % len(pool)],
            "claim_type": "other",
            "verdict": "trivial",
            "score": score,
        }

    def _event(self, d: MinuteDraws, i: int, versions: dict, answer: Answer) -> Drawn:
        u, pick, answerable, abstained = d.uniforms[i], d.picks[i], d.answerable[i], d.abstained[i]
        question, query_type = self._question(u, pick, answer, answerable)
        stakes = self._stakes(u.stakes)
        failed = len(answer.families) - answer.families.count(None)
        action = _action(u.action, abstained, stakes, failed)
        event: dict[str, object] = {
            "schema": SCHEMA,
            "event_id": None,
            "trace_id": None,
            "observed_at": None,
            "route": self.route.name,
        }
        if u.tenant < 0.5:
            event["tenant"] = TENANTS[pick.tenant % len(TENANTS)]
        drawn = Drawn(pick.millisecond % 60000, _timestamp_form(u.timestamp_form), event, tuple(answer.families))
        if u.textless < self.scenario.textless_fraction:  # a producer that keeps no customer text
            claims = [{"claim_id": c["claim_id"], "verdict": c["verdict"], "score": c["score"]} for c in answer.claims]
            event.update(
                query={"query_type": query_type, "stakes": stakes, "answerable": answerable},
                answer={"action": action},
                versions=versions,
                claims=claims,
            )
            return drawn
        words = self.words
        answer_text = (
            words.abstentions[pick.wording % len(words.abstentions)]
            if abstained
            else " ".join([c["text"] for c in answer.claims])
        )
        event.update(
            query={"text": question, "query_type": query_type, "stakes": stakes, "answerable": answerable},
            answer={"text": answer_text, "action": action},
            versions=versions,
            evidence=answer.evidence,
            claims=answer.claims,
            first_failed_stage=answer.stage or "passed",
        )
        if answer.signal_kinds or answer.cherry or u.signals < self.scenario.signals_fraction:
            premise, values = "premise" in answer.signal_kinds, d.signals
            event["signals"] = {
                "cherry_pick": answer.cherry,
                "premise_similarity": values.premise_similarity[i][premise],
                "support_delta": values.support_delta[i][premise],
                "sample_disagreement": values.sample_disagreement[i]["disagreement" in answer.signal_kinds],
            }
        event["attributes"] = {
            "region": REGIONS[pick.tenant % len(REGIONS)],
            "channel": CHANNELS[pick.annotator % len(CHANNELS)],
        }
        return drawn

    def _question(
        self, u: AnswerUniforms[float], pick: AnswerPicks, answer: Answer, answerable: bool
    ) -> tuple[str, str]:
        """The question and its query type."""
        words = self.words
        if not answerable:
            pool = words.unanswerable[answer.topic]
            return pool[pick.question % len(pool)], "unanswerable"
        if answer.first_failure is not None:
            text, family = answer.first_failure
            return text.question, family.query_type
        if u.question_kind < 0.5:
            pool = words.questions[answer.topic]
            return pool[pick.question % len(pool)], _query_type(u.query_type)
        f = pick.question % len(FAMILY_LIST)  # risky-looking questions are often answered well
        pool = words.family_questions[f][answer.topic]
        return pool[pick.wording % len(pool)], FAMILY_LIST[f].query_type

    def _stakes(self, u: float) -> str:
        low, medium = self.stakes_cum[0], self.stakes_cum[1]
        return "low" if u < low else "medium" if u < medium else "high"


def _failures(
    owner: np.ndarray,
    failure_u: np.ndarray,
    checkable: np.ndarray,
    propensity: np.ndarray,
    base_family: np.ndarray,
    extras: list[tuple[np.ndarray, int]],
) -> np.ndarray:
    """Per claim, the index of the family it fails as, -1 when it holds: below its answer's propensity it
    fails as the answer's base family, and in each regression's band above that as the regression's."""
    family = np.full(len(owner), -1, dtype=np.int64)
    high = propensity[owner]
    failing = checkable & (failure_u < high)
    family[failing] = base_family[owner][failing]
    for extra, family_index in extras:
        low, high = high, high + extra[owner]
        failing = checkable & (failure_u >= low) & (failure_u < high)
        family[failing] = family_index
    return family
