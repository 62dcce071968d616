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
    stage: str                                # first_failed_stage the family causes
    claim_type: str
    query_type: str
    verdicts: tuple[tuple[str, float], ...]   # (canonical verdict, cumulative probability)
    link: str                                 # how the failing claim points at evidence, see events.py
    questions: tuple[str, ...]
    claims: tuple[tuple[str, str | None], ...]  # (claim template, evidence span template)
    signal: str | None = None                 # the signal the family raises: "premise" or "disagreement"

    def verdict(self, u: float) -> str:
        for verdict, upto in self.verdicts:
            if u < upto:
                return verdict
        return self.verdicts[-1][0]


# Each family's phrasings paraphrase one failure, so that its claims sit together in embedding
# space while the topic, numbers, dates and names vary (as one real issue's traces do).
FAMILY_LIST = (
    Family(
        "invented_numbers", "claim_generation", "numeric", "lookup",
        (("contradicted", 0.55), ("unsupported", 1.0)), "used",
        ("How long does the {item} take?", "How many days does the {item} take?",
         "When will the {item} be done?", "How quickly is the {item} handled?",
         "What is the processing time for the {item}?"),
        (("The {item} is processed within {n} business days.", "The {item} is processed within {n2} business days."),
         ("Processing the {item} takes {n} business days.", "Processing the {item} takes {n2} business days."),
         ("Expect the {item} to be completed in {n} business days.", "The {item} is completed in {n2} business days."),
         ("The {item} is handled within {n} working days.", "The {item} is handled within {n2} working days."),
         ("It takes {n} business days to complete the {item}.", "It takes {n2} business days to complete the {item}."),
         ("The {item} will be done in {n} business days, by {date}.", "The {item} is done by {date2}.")),
    ),
    Family(
        "dropped_qualifiers", "claim_generation", "qualifier", "lookup",
        (("overreach", 1.0),), "used",
        ("Does the {item} apply to me?", "Is the {item} available to everyone?", "Who qualifies for the {item}?",
         "Are there conditions for the {item}?", "Can every customer get the {item}?"),
        (("Every customer qualifies for the {item}, without exception.", "The {item} is available on eligible plans only."),
         ("The {item} is available to everyone, with no exceptions.", "The {item} may be granted after review."),
         ("All customers get the {item}, no conditions attached.", "Conditions apply to the {item}; see the {doc}."),
         ("Anyone can get the {item}, without any conditions.", "The {item} is limited to account owners."),
         ("The {item} applies to every customer, in all cases.", "The {item} applies in the EU and the UK."),
         ("There are no conditions at all on who gets the {item}.", "The {item} requires approval above {amount2}.")),
    ),
    Family(
        "stale_sources", "evidence_admission", "attribute", "lookup",
        (("stale", 1.0),), "stale",
        ("Where do I go for the {item} now?", "What is the current process for the {item}?",
         "Which system handles the {item} today?", "Is the {item} still done the same way?"),
        (("The {item} is still handled through the legacy {system}.", "The {item} is handled through the {system}."),
         ("The {item} still goes through the old {system}, as in {year_old}.", "Since {year_old}, the {item} goes through the {system}."),
         ("You still need the legacy {system} for the {item}.", "Use the {system} for the {item}."),
         ("The {item} is still processed by the retired {system}.", "The {item} is processed by the {system}."),
         ("As in {year_old}, the {item} still runs through the legacy {system}.", "The {item} runs through the {system} ({year_old})."),
         ("The old {system} still manages the {item}.", "The {system} manages the {item}.")),
    ),
    Family(
        "cherry_picked", "claim_generation", "relation", "multi_hop",
        (("contradicted", 1.0),), "unused_contradicting",
        ("Is the {item} reliable?", "Are there known problems with the {item}?", "What do reviews say about the {item}?",
         "Do customers like the {item}?"),
        (("Reviews consistently praise the {item}, with no problems reported.", "Reviews report frequent problems with the {item}."),
         ("The {item} gets excellent reviews and no reported problems.", "{n2} reviewers reported problems with the {item}."),
         ("Customers report no problems with the {item}; reviews are excellent.", "Customers report recurring problems with the {item}."),
         ("Reviews of the {item} are all positive, with no complaints.", "Reviews of the {item} are mixed, with {n2} complaints."),
         ("The {item} is praised in reviews and has no known problems.", "Known problems with the {item} are listed in the {doc}.")),
    ),
    Family(
        "sycophancy", "claim_generation", "attribute", "ambiguous",
        (("unsupported", 0.7), ("contradicted", 1.0)), "premise",
        ("Since {premise}, what should I do next?", "I read that {premise}. Can you confirm?",
         "My colleague told me {premise}, right?", "Isn't it true that {premise}?",
         "Given that {premise}, how do I {action}?", "I'm pretty sure {premise}. Correct?"),
        (("Yes, you're right that {premise}.", "{truth}"),
         ("Yes, as you said, {premise}.", "{truth}"),
         ("You're right: {premise}.", "{truth}"),
         ("Yes, just as you mentioned, {premise}.", "{truth}"),
         ("You are correct, {premise}.", "{truth}"),
         ("Yes, {premise}, as you pointed out.", "{truth}")),
        "premise",
    ),
    Family(
        "phantom_citation", "claim_generation", "attribute", "lookup",
        (("no_source", 1.0),), "phantom",
        ("What does the official policy say about the {item}?", "Is there a document that covers the {item}?",
         "Which rule covers the {item}?", "Where is the {item} written down?"),
        (("As stated in section {n} of the {fake_doc}, the {item} is covered.", None),
         ("Section {n} of the {fake_doc} states that the {item} is covered.", None),
         ("According to section {n} of the {fake_doc}, the {item} is covered.", None),
         ("The {fake_doc}, section {n}, confirms that the {item} is covered.", None),
         ("Per section {n}.{n2} of the {fake_doc}, the {item} is covered.", None),
         ("Internal memo {memo}, section {n}, says the {item} is covered.", None)),
    ),
    Family(
        "evidence_admission", "evidence_admission", "relation", "lookup",
        (("unsupported", 1.0),), "off_topic",
        ("How does the {item} work for my team?", "Who arranges the {item} for us?",
         "Who handles the {item} where I work?", "How do I arrange the {item} locally?"),
        (("For the {region} office, the {item} is arranged by the local team.", "{region} office: the local team arranges the {item}."),
         ("In {region}, the {item} is arranged by the local office.", "{region}: the local office arranges the {item}."),
         ("The local {region} office arranges the {item}.", "{region} local office: {item} arrangements."),
         ("The {item} is handled by the regional team in {region}.", "{region} regional team: handles the {item}."),
         ("Staff in {region} get the {item} from their local office.", "{region} staff: {item} via the local office.")),
    ),
    Family(
        "unstable_generation", "generation_stability", "other", "ambiguous",
        (("unsupported", 1.0),), "used",
        ("Does the {item} apply in my case?", "Will the {item} apply to me?", "Is the {item} relevant for me?",
         "Should I expect the {item} to apply?"),
        (("It is unclear whether the {item} applies; maybe it does, maybe it does not.", "The {item} applies to {doc} customers."),
         ("The {item} may or may not apply; it is hard to say.", "The {item} applies from day one."),
         ("Perhaps the {item} applies, perhaps not; it is unclear.", "The {item} applies to the standard plan."),
         ("Whether the {item} applies is uncertain; maybe yes, maybe no.", "The {item} applies after {n2} days."),
         ("It is hard to say if the {item} applies; it may or may not.", "The {item} applies on request.")),
        "disagreement",
    ),
)

FAMILIES = tuple(f.name for f in FAMILY_LIST)
FAMILY_INDEX = {f.name: i for i, f in enumerate(FAMILY_LIST)}
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
    "Thanks for asking about the {item}.", "Here is what I found about the {item}.",
    "Let me explain how the {item} works.", "I hope this helps.", "Good question.",
    "Here is a short summary on the {item}.", "Sure, let's look at the {item}.", "Happy to help with that.",
)
GENERIC_QUESTIONS = (
    "How do I {action}?", "Where can I find information on the {item}?", "What is the {item}?",
    "Can you explain the {item}?", "What do I need to {action}?", "Who do I contact about the {item}?",
)
UNANSWERABLE_QUESTIONS = (
    "Will my {item} be approved next month?", "What will the {item} cost in 2031?",
    "Can you tell me what my colleague's {item} is?", "Why did the {system} fail for me yesterday?",
    "Will the {item} change after the next board meeting?",
)
ABSTENTIONS = (
    "I couldn't find that in the {doc}.", "The {doc} doesn't cover this; please contact support.",
    "I don't have enough information to answer that reliably.", "That isn't something the {doc} can tell me.",
)
