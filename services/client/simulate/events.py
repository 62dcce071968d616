"""One route's answers for one minute: numpy draws every random number at once, then a
plain loop assembles the event dicts from pre-rendered wording."""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from services.client.simulate.families import FAMILIES, FAMILY_LIST, STAGE_ORDER
from services.client.simulate.scenario import Scenario
from services.client.simulate.wording import domain_wording

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
EVENT_ROWS = 16   # uniform draws per event, one row per purpose (see the loop)
PICK_ROWS = 8     # integer draws per event


def _query_type(u: float) -> str:
    for cut, name in QUERY_TYPE_CUTS:
        if u < cut:
            return name
    return "other"


def _cite(chunk: dict, span: str) -> None:
    """A used chunk's text holds every span cited from it, verbatim."""
    chunk["text"] = f"{chunk['text']} {span}" if chunk["used"] else span
    chunk["used"] = True


@dataclass(slots=True)
class Drawn:
    """An event before it gets ids and a timestamp (those depend on the merged minute)."""

    ms: int                    # millisecond within its minute
    form: int                  # 0: Z, 1: +01:00, 2: +00:00
    event: dict
    families: tuple[str | None, ...]


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
        self.family_topics = [[order[(f * per_family + j) % n_topics] for j in range(per_family)]
                              for f in range(len(FAMILIES))]  # distinct families get distinct topics where possible

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
        rng, sc, route, words = self.rng, self.scenario, self.route, self.words
        n = int(rng.poisson(route.per_minute * volume_factor))
        if n == 0:
            return []
        u = rng.random((EVENT_ROWS, n))
        picks = rng.integers(0, 1 << 30, (PICK_ROWS, n))
        answerable = u[0] >= route.unanswerable_share
        abstained = np.where(answerable, u[1] < sc.over_refusal, u[1] < sc.correct_abstention)
        n_claims = np.where(abstained, 0, 1 + rng.binomial(7, (route.mean_claims - 1) / 7, n))
        p_base = self._beta(rng, np.where(answerable, route.base_rate_at(hour), sc.unanswerable_answered_rate))
        base_family = rng.choice(len(FAMILIES), n, p=self.family_p)
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

        total = int(n_claims.sum())
        owner = np.repeat(np.arange(n), n_claims)
        cu = rng.random((3, total))
        alias_picks = rng.integers(0, 1 << 30, total)
        scores = np.round(rng.uniform(0.55, 0.99, total), 2)
        checkable = cu[1] >= sc.trivial_share
        family = np.full(total, -1, dtype=np.int64)
        high = p_base[owner]
        failing = checkable & (cu[0] < high)
        family[failing] = base_family[owner][failing]
        for extra, family_index in extras:  # a regression adds its own failures above the base rate
            low, high = high, high + extra[owner]
            failing = checkable & (cu[0] >= low) & (cu[0] < high)
            family[failing] = family_index

        # Signal values for both cases (raised by a family or not), rounded here rather than per event.
        signal_values = np.round(np.stack((
            0.1 + 0.5 * u[12], 0.85 + 0.13 * u[12], 0.12 * u[13], 0.3 + 0.4 * u[13], 0.25 * u[14], 0.55 + 0.4 * u[14],
        )), 3).T.tolist()
        ul, pl = u[:12].T.tolist(), picks.T.tolist()  # rows 12-14 went into signal_values
        out = []
        offsets = np.concatenate(([0], np.cumsum(n_claims))).tolist()
        fam_l, checkable_l, vu_l = family.tolist(), checkable.tolist(), cu[2].tolist()
        alias_l, score_l = alias_picks.tolist(), scores.tolist()
        abstained_l, answerable_l, code_l = abstained.tolist(), answerable.tolist(), code.tolist()
        chunks, n_topics, topics_per_family = words.chunks, len(words.topics), len(self.family_topics[0])
        human_share, alias_share, textless_share = sc.human_label_fraction, sc.alias_fraction, sc.textless_fraction
        for i in range(n):
            r, p = ul[i], pl[i]
            c0, c1 = offsets[i], offsets[i + 1]
            # One answer keeps to one topic; a failing one to a topic its family's issue is about.
            first_family = next((f for f in fam_l[c0:c1] if f >= 0), -1)
            topic = p[6] % n_topics if first_family < 0 else self.family_topics[first_family][p[6] % topics_per_family]
            pool_base = p[7]  # consecutive pool entries: the claims of one answer differ
            supported_pool, trivial_pool = words.supported[topic], words.trivial[topic]
            versions, chunk_version, labeler = self._versions_for(code_l[i])
            versions = dict(versions)  # each event owns its dicts
            if r[8] < human_share:
                labeler = f"human:ann-{p[3] % 40:02d}"
            base = p[2]
            evidence = []
            for k in range(3):
                c = chunks[(base + k) % len(chunks)]
                evidence.append({"chunk_id": c[0], "source_id": c[1], "version": chunk_version, "used": False,
                                 "text": c[2]})
            e0, e1 = evidence[0], evidence[1]
            claims, families = [], []
            first_item, stage, cherry, signal_kinds = None, None, [], set()
            for j in range(c0, c1):
                k = j - c0
                f = fam_l[j]
                if f >= 0:
                    fam = FAMILY_LIST[f]
                    pool = words.failing(f, topic)
                    item = pool[(pool_base + k) % len(pool)]
                    verdict = fam.verdict(vu_l[j])
                    claim = {"claim_id": CLAIM_IDS[k], "text": item.claim, "claim_type": fam.claim_type,
                             "verdict": verdict, "score": score_l[j]}
                    self._link(fam.link, verdict, item, claim, evidence, chunk_version, cherry, k)
                    claim["labeler"] = labeler
                    if first_item is None:
                        first_item = (item, fam)
                    if stage is None or STAGE_ORDER[fam.stage] < STAGE_ORDER[stage]:
                        stage = fam.stage
                    if fam.signal:
                        signal_kinds.add(fam.signal)
                    families.append(fam.name)
                elif checkable_l[j]:
                    text, span = supported_pool[(pool_base + k) % len(supported_pool)]
                    chunk = e1 if k & 1 else e0
                    if chunk["used"]:  # a used chunk's text holds every span cited from it, verbatim
                        chunk["text"] = f"{chunk['text']} {span}"
                    else:
                        chunk["text"], chunk["used"] = span, True
                    claim = {"claim_id": CLAIM_IDS[k], "text": text, "claim_type": SUPPORTED_TYPES[(pool_base + k) & 3],
                             "verdict": "supported", "score": score_l[j], "chunk_id": chunk["chunk_id"],
                             "source_id": chunk["source_id"], "span": span, "labeler": labeler}
                    families.append(None)
                else:
                    claim = {"claim_id": CLAIM_IDS[k], "text": trivial_pool[(pool_base + k) % len(trivial_pool)],
                             "claim_type": "other", "verdict": "trivial", "score": score_l[j], "labeler": labeler}
                    families.append(None)
                claims.append(claim)
            if r[6] < alias_share:  # this producer sends its verifier's own labels
                for j, claim in enumerate(claims, c0):
                    sent = ALIASES_SENT[claim["verdict"]]
                    claim["verdict"] = sent[alias_l[j] % len(sent)]
            textless = r[7] < textless_share
            if textless:
                claims = [{"claim_id": c["claim_id"], "verdict": c["verdict"], "score": c["score"]} for c in claims]
            out.append(self._event(r, p, topic, answerable_l[i], abstained_l[i], textless, versions, evidence,
                                   claims, first_item, stage, cherry, signal_kinds, tuple(families), signal_values[i]))
        return out

    @staticmethod
    def _link(link: str, verdict: str, item, claim: dict, evidence: list, chunk_version: str, cherry: list, k: int):
        """Point a failing claim at the evidence its verdict rests on, adding the chunk that explains it."""
        src = evidence[0]["source_id"]
        if link == "phantom":
            claim["source_id"] = item.aux
            return
        if link == "stale":
            chunk = {"chunk_id": f"{src}@{item.aux}#{k + 1}", "source_id": src, "version": item.aux, "used": True}
        elif link == "unused_contradicting":
            chunk = {"chunk_id": f"{src}#alt{k + 1}", "source_id": src, "version": chunk_version, "used": False}
            cherry.append(chunk["chunk_id"])
        elif link == "off_topic":
            chunk = {"chunk_id": f"{item.aux}#{k + 1}", "source_id": item.aux, "version": chunk_version, "used": True}
        elif verdict == "unsupported":  # extrinsic: nothing in the evidence speaks to it
            return
        else:
            chunk = evidence[0]
            _cite(chunk, item.span)
        if chunk is not evidence[0]:
            chunk["text"] = item.span
            evidence.append(chunk)
        claim.update(chunk_id=chunk["chunk_id"], source_id=chunk["source_id"], span=item.span)

    def _event(self, r, p, topic, answerable, abstained, textless, versions, evidence, claims, first_item, stage, cherry,
               signal_kinds, families, signal_values) -> Drawn:
        sc, words = self.scenario, self.words
        if not answerable:
            question, query_type = words.unanswerable[topic][p[0] % len(words.unanswerable[topic])], "unanswerable"
        elif first_item is not None:
            question, query_type = first_item[0].question, first_item[1].query_type
        elif r[2] < 0.5:
            question = words.questions[topic][p[0] % len(words.questions[topic])]
            query_type = _query_type(r[3])
        else:  # risky-looking questions are often answered well
            f = p[0] % len(FAMILY_LIST)
            pool = words.family_questions[f][topic]
            question, query_type = pool[p[1] % len(pool)], FAMILY_LIST[f].query_type
        low, medium = self.stakes_cum[0], self.stakes_cum[1]
        stakes = "low" if r[4] < low else "medium" if r[4] < medium else "high"
        failed = len(families) - families.count(None)
        if abstained:
            action = "abstained"
        elif failed >= 2 and stakes == "high" and r[5] < 0.3:
            action = "blocked"
        else:
            action = "review" if r[5] > 0.98 else "revised" if r[5] > 0.95 else "served"
        event = {"schema": SCHEMA, "event_id": None, "trace_id": None, "observed_at": None, "route": self.route.name}
        if r[10] < 0.5:
            event["tenant"] = TENANTS[p[4] % len(TENANTS)]
        if textless:  # a producer that keeps no customer text
            event.update(query={"query_type": query_type, "stakes": stakes, "answerable": answerable},
                         answer={"action": action}, versions=versions, claims=claims)
            return Drawn(p[5] % 60000, self._form(r[11]), event, families)
        answer_text = (words.abstentions[p[1] % len(words.abstentions)] if abstained
                       else " ".join([c["text"] for c in claims]))
        event.update(query={"text": question, "query_type": query_type, "stakes": stakes, "answerable": answerable},
                     answer={"text": answer_text, "action": action}, versions=versions, evidence=evidence,
                     claims=claims, first_failed_stage=stage or "passed")
        if signal_kinds or cherry or r[9] < sc.signals_fraction:
            premise = "premise" in signal_kinds
            unstable = "disagreement" in signal_kinds
            event["signals"] = {
                "cherry_pick": cherry,
                "premise_similarity": signal_values[premise],
                "support_delta": signal_values[2 + premise],
                "sample_disagreement": signal_values[4 + unstable],
            }
        event["attributes"] = {"region": REGIONS[p[4] % len(REGIONS)], "channel": CHANNELS[p[3] % len(CHANNELS)]}
        return Drawn(p[5] % 60000, self._form(r[11]), event, families)

    @staticmethod
    def _form(u: float) -> int:
        return 0 if u < 0.55 else 1 if u < 0.85 else 2  # Z, +01:00, +00:00
