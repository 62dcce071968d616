"""Failure families: what goes wrong, how the verifier labels it, and how it is worded.

Each family has its own vocabulary (questions and claim templates) so that clustering
can recover it from the text alone; the tests check that with a TF-IDF classifier.
Templates use slots filled per route domain (see domains.py): {item}, {action}, {doc},
{system}, {fake_doc}, {region}, {premise}, {truth}, {standard}, {n}, {n2}, {pct}, {pct2},
{amount}, {amount2}, {date}, {date2}, {year_old}, {memo}, {kb}.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    stage: str  # first_failed_stage the family causes
    claim_type: str
    query_type: str
    verdicts: tuple[tuple[str, float], ...]  # (canonical verdict, cumulative probability)
    link: str  # how the failing claim points at evidence, see events.py
    questions: tuple[str, ...]
    claims: tuple[tuple[str, str | None], ...]  # (claim template, evidence span template)
    signal: str | None = None  # the signal the family raises: "premise" or "disagreement"

    def verdict(self, u: float) -> str:
        for verdict, upto in self.verdicts:
            if u < upto:
                return verdict
        return self.verdicts[-1][0]


def paraphrases(
    openers: tuple[str, ...], cores: tuple[tuple[str, str | None], ...], tails: tuple[str, ...]
) -> tuple[tuple[str, str | None], ...]:
    """Every opener x core x tail: many near-paraphrases of one failure, so a family's claims form
    one connected cloud in embedding space rather than a few discrete points."""
    return tuple((opener + core + tail, span) for opener in openers for core, span in cores for tail in tails)


# Each family paraphrases one failure with its own vocabulary (openers are not shared between
# families); the topic, numbers, dates and names vary, as the traces of one real issue do.
FAMILY_LIST = (
    Family(
        "invented_numbers",
        "claim_generation",
        "numeric",
        "lookup",
        (("contradicted", 0.55), ("unsupported", 1.0)),
        "used",
        (
            "How long does the {item} take?",
            "How many days does the {item} take?",
            "When will the {item} be done?",
            "How quickly is the {item} handled?",
            "What is the processing time for the {item}?",
        ),
        paraphrases(
            ("", "Typically, ", "Usually, ", "On average, ", "Normally, "),
            (
                (
                    "the {item} is processed within {n} business days",
                    "The {item} is processed within {n2} business days.",
                ),
                ("processing the {item} takes {n} business days", "Processing the {item} takes {n2} business days."),
                ("the {item} is completed in {n} business days", "The {item} is completed in {n2} business days."),
                ("the {item} takes {n} working days to process", "The {item} takes {n2} working days to process."),
            ),
            (".", ", counting from {date}.", " after the request arrives.", ", so expect it by {date}."),
        ),
    ),
    Family(
        "dropped_qualifiers",
        "claim_generation",
        "qualifier",
        "lookup",
        (("overreach", 1.0),),
        "used",
        (
            "Does the {item} apply to me?",
            "Is the {item} available to everyone?",
            "Who qualifies for the {item}?",
            "Are there conditions for the {item}?",
            "Can every customer get the {item}?",
        ),
        paraphrases(
            ("", "Good news: ", "Don't worry, ", "Absolutely, ", "Of course, "),
            (
                (
                    "every customer qualifies for the {item}, without exception",
                    "The {item} is available on eligible plans only.",
                ),
                ("the {item} is available to everyone, with no exceptions", "The {item} may be granted after review."),
                (
                    "anyone can get the {item}, with no conditions at all",
                    "Conditions apply to the {item}; see the {doc}.",
                ),
                ("the {item} applies to all customers in every case", "The {item} applies to account owners only."),
            ),
            (".", ", whatever your plan.", ", in every country.", ", regardless of your situation."),
        ),
    ),
    Family(
        "stale_sources",
        "evidence_admission",
        "attribute",
        "lookup",
        (("stale", 1.0),),
        "stale",
        (
            "Where do I go for the {item} now?",
            "What is the current process for the {item}?",
            "Which system handles the {item} today?",
            "Is the {item} still done the same way?",
        ),
        paraphrases(
            ("", "Currently, ", "As before, ", "Right now, ", "As always, "),
            (
                (
                    "the {item} is still handled through the legacy {system}",
                    "The {item} is handled through the {system}.",
                ),
                ("the {item} still goes through the old {system}", "The {item} goes through the {system}."),
                ("you still need the legacy {system} for the {item}", "Use the {system} for the {item}."),
                ("the retired {system} still processes the {item}", "The {system} processes the {item}."),
            ),
            (
                ".",
                ", as described in the {year_old} guide.",
                ", as it did in {year_old}.",
                ", following the {year_old} process.",
            ),
        ),
    ),
    Family(
        "cherry_picked",
        "claim_generation",
        "relation",
        "multi_hop",
        (("contradicted", 1.0),),
        "unused_contradicting",
        (
            "Is the {item} reliable?",
            "Are there known problems with the {item}?",
            "What do reviews say about the {item}?",
            "Do customers like the {item}?",
        ),
        paraphrases(
            ("", "Overall, ", "Based on the reviews, ", "By all accounts, ", "Happily, "),
            (
                (
                    "reviews consistently praise the {item}, with no problems reported",
                    "Reviews report frequent problems with the {item}.",
                ),
                (
                    "the {item} gets excellent reviews and has no known problems",
                    "{n2} reviewers reported problems with the {item}.",
                ),
                (
                    "customers report no problems with the {item}",
                    "Customers report recurring problems with the {item}.",
                ),
                (
                    "reviews of the {item} are all positive, without complaints",
                    "Reviews of the {item} are mixed, with {n2} complaints.",
                ),
            ),
            (".", ", so it is a safe choice.", ", according to customer feedback.", ", and it is highly rated."),
        ),
    ),
    Family(
        "sycophancy",
        "claim_generation",
        "attribute",
        "ambiguous",
        (("unsupported", 0.7), ("contradicted", 1.0)),
        "premise",
        (
            "Since {premise}, what should I do next?",
            "I read that {premise}. Can you confirm?",
            "My colleague told me {premise}, right?",
            "Isn't it true that {premise}?",
            "Given that {premise}, how do I {action}?",
            "I'm pretty sure {premise}. Correct?",
        ),
        paraphrases(
            ("Yes, ", "You're right, ", "That's correct: ", "Exactly, ", "Indeed, "),
            (
                ("{premise}", "{truth}"),
                ("as you said, {premise}", "{truth}"),
                ("just as you mentioned, {premise}", "{truth}"),
            ),
            (".", ", as you pointed out.", ", just like you thought.", ", you have that right."),
        ),
        "premise",
    ),
    Family(
        "phantom_citation",
        "claim_generation",
        "attribute",
        "lookup",
        (("no_source", 1.0),),
        "phantom",
        (
            "What does the official policy say about the {item}?",
            "Is there a document that covers the {item}?",
            "Which rule covers the {item}?",
            "Where is the {item} written down?",
        ),
        paraphrases(
            ("", "For reference, ", "Officially, ", "To be precise, ", "Formally, "),
            (
                ("section {n} of the {fake_doc} states that the {item} is covered", None),
                ("according to section {n} of the {fake_doc}, the {item} is covered", None),
                ("the {fake_doc} (section {n}) confirms the {item} is covered", None),
                ("per internal memo {memo}, the {item} is covered", None),
            ),
            (".", ", as written there.", ", which settles the question.", ", see that document for details."),
        ),
    ),
    Family(
        "evidence_admission",
        "evidence_admission",
        "relation",
        "lookup",
        (("unsupported", 1.0),),
        "off_topic",
        (
            "How does the {item} work for my team?",
            "Who arranges the {item} for us?",
            "Who handles the {item} where I work?",
            "How do I arrange the {item} locally?",
        ),
        paraphrases(
            ("", "For your team, ", "In your case, ", "Locally, ", "At your site, "),
            (
                (
                    "the {item} is arranged by the local office in {region}",
                    "{region} office: the local team arranges the {item}.",
                ),
                ("the {region} office arranges the {item} for you", "{region}: the local office arranges the {item}."),
                ("the regional team in {region} handles the {item}", "{region} regional team: handles the {item}."),
                ("staff get the {item} from the {region} local office", "{region} staff: {item} via the local office."),
            ),
            (
                ".",
                ", as for all {region} staff.",
                ", through the {region} team.",
                ", following the local {region} procedure.",
            ),
        ),
    ),
    Family(
        "unstable_generation",
        "generation_stability",
        "other",
        "ambiguous",
        (("unsupported", 1.0),),
        "used",
        (
            "Does the {item} apply in my case?",
            "Will the {item} apply to me?",
            "Is the {item} relevant for me?",
            "Should I expect the {item} to apply?",
        ),
        paraphrases(
            ("", "Honestly, ", "Well, ", "Hmm, ", "To be fair, "),
            (
                (
                    "it is unclear whether the {item} applies; maybe it does, maybe not",
                    "The {item} applies to {doc} customers.",
                ),
                ("the {item} may or may not apply, it is hard to say", "The {item} applies from day one."),
                ("perhaps the {item} applies, perhaps not", "The {item} applies to the standard plan."),
                ("whether the {item} applies is uncertain", "The {item} applies after {n2} days."),
            ),
            (".", ", depending on the case.", ", it could go either way.", ", nobody can say for sure."),
        ),
        "disagreement",
    ),
)

FAMILIES = tuple(f.name for f in FAMILY_LIST)
# Pipeline order: the earliest failing stage is the event's first_failed_stage.
STAGE_ORDER = {"passed": 0, "evidence_admission": 1, "claim_generation": 2, "generation_stability": 3}

# Wording of answers that fail nothing.
SUPPORTED_CLAIMS = (
    ("You can {action} from your account settings.", "You can {action} under account settings."),
    ("The {doc} describes the {item}.", "This section of the {doc} covers the {item}."),
    ("The {item} is listed in the {doc}.", "The {doc} lists the {item}."),
    ("Requests about the {item} go through the {system}.", "Use the {system} for {item} requests."),
    ("You receive a confirmation email for the {item}.", "A confirmation email is sent for the {item}."),
    ("To {action}, open the {system} and follow the steps.", "Open the {system} to {action}."),
    ("You can check the status of the {item} in the {system}.", "The {system} shows the status of the {item}."),
    ("Changes to the {item} are confirmed by email.", "Each change to the {item} is confirmed by email."),
    ("Contact support through the {system} if the {item} looks wrong.", "Report {item} errors via the {system}."),
    ("The {doc} has a section on the {item}.", "Section: {item}. See the {doc}."),
)
TRIVIAL_CLAIMS = (
    "Thanks for asking about the {item}.",
    "Here is what I found about the {item}.",
    "Let me explain how the {item} works.",
    "I hope this helps.",
    "Good question.",
    "Here is a short summary on the {item}.",
    "Sure, let's look at the {item}.",
    "Happy to help with that.",
)
GENERIC_QUESTIONS = (
    "How do I {action}?",
    "Where can I find information on the {item}?",
    "What is the {item}?",
    "Can you explain the {item}?",
    "What do I need to {action}?",
    "Who do I contact about the {item}?",
)
UNANSWERABLE_QUESTIONS = (
    "Will my {item} be approved next month?",
    "What will the {item} cost in 2031?",
    "Can you tell me what my colleague's {item} is?",
    "Why did the {system} fail for me yesterday?",
    "Will the {item} change after the next board meeting?",
)
ABSTENTIONS = (
    "I couldn't find that in the {doc}.",
    "The {doc} doesn't cover this; please contact support.",
    "I don't have enough information to answer that reliably.",
    "That isn't something the {doc} can tell me.",
)
