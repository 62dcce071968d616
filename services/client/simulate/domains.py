"""Vocabulary of each route's subject matter, used to fill the family templates."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    name: str
    currency: str
    items: tuple[str, ...]
    actions: tuple[str, ...]
    docs: tuple[str, ...]
    sources: tuple[str, ...]  # source_id of retrieved chunks, one per doc
    systems: tuple[str, ...]
    fake_docs: tuple[str, ...]  # documents that are never retrieved (phantom citations)
    standards: tuple[str, ...]
    premises: tuple[tuple[str, str], ...]  # (false premise a user brings, what the evidence says)


DOMAINS = {
    "billing-faq": Domain(
        "billing-faq",
        "€",
        (
            "annual plan refund",
            "monthly subscription",
            "invoice correction",
            "late payment fee",
            "team seat upgrade",
            "credit note",
            "payment method change",
            "VAT exemption",
            "proration credit",
            "trial extension",
        ),
        (
            "cancel the subscription",
            "request a refund",
            "change the billing date",
            "download past invoices",
            "add a team seat",
            "switch to annual billing",
            "update the card on file",
            "dispute a charge",
        ),
        ("refund policy", "billing terms", "pricing page", "payment FAQ"),
        ("refund-policy", "billing-terms", "pricing", "payment-faq"),
        ("billing portal", "invoice desk", "payments console"),
        ("Finance Directive 7", "2019 pricing memo", "Customer Billing Charter", "Refund Handbook"),
        ("PCI", "SOC 2", "finance"),
        (
            ("refunds for annual plans are instant", "Refunds for annual plans take up to {n2} business days."),
            ("late fees were abolished last year", "A late payment fee of {amount2} applies."),
            ("team seats are free on the monthly plan", "Each team seat is billed at {amount2} per month."),
            ("businesses don't pay VAT", "VAT is charged unless a valid VAT ID is provided."),
            ("cancelling gives a full refund", "Cancellation refunds are prorated."),
            ("the trial converts to a free plan", "The trial converts to a paid monthly plan."),
        ),
    ),
    "parcel-status": Domain(
        "parcel-status",
        "€",
        (
            "express delivery",
            "return label",
            "customs clearance",
            "delivery slot",
            "pickup point hold",
            "damage claim",
            "signature service",
            "weekend delivery",
            "address change",
            "lost parcel investigation",
        ),
        (
            "reschedule a delivery",
            "redirect the parcel",
            "file a damage claim",
            "print a return label",
            "change the delivery address",
            "book a pickup",
            "track an international parcel",
        ),
        ("carrier FAQ", "shipping policy", "tracking guide", "returns page"),
        ("carrier-faq", "shipping-policy", "tracking-guide", "returns"),
        ("tracking portal", "depot hotline", "courier app"),
        ("Carrier Service Charter", "Logistics Bulletin 12", "Postal Code of Practice", "Depot Operations Manual"),
        ("ISO 9001", "customs", "safety"),
        (
            ("weekend delivery is free", "Weekend delivery costs {amount2}."),
            ("parcels wait at pickup points for a month", "Parcels are held at pickup points for {n2} days."),
            ("the sender pays the customs fees", "Customs fees are paid by the recipient."),
            ("address changes after dispatch are free", "Address changes after dispatch cost {amount2}."),
            ("lost parcels are refunded automatically", "Lost parcel refunds need a claim within {n2} days."),
        ),
    ),
    "hr-policy": Domain(
        "hr-policy",
        "€",
        (
            "parental leave",
            "remote work allowance",
            "sick leave",
            "annual bonus",
            "training budget",
            "pension contribution",
            "vacation carry-over",
            "sabbatical",
            "relocation package",
            "overtime compensation",
        ),
        (
            "request parental leave",
            "carry over vacation days",
            "apply for a sabbatical",
            "claim home office expenses",
            "book training",
            "report sick leave",
            "change pension contributions",
        ),
        ("employee handbook", "leave policy", "benefits guide", "remote work policy"),
        ("handbook", "leave-policy", "benefits-guide", "remote-policy"),
        ("HR self-service", "payroll desk", "people portal"),
        ("Works Council Agreement 2018", "HR Circular 44", "Global Benefits Charter", "People Operations Manual"),
        ("payroll", "compliance", "works council"),
        (
            ("parental leave is fully paid for a year", "Parental leave is paid at full salary for {n2} weeks."),
            ("unused vacation days are paid out", "Unused vacation days expire after March 31."),
            ("the remote work allowance covers furniture", "The remote work allowance covers internet costs only."),
            ("sick leave needs no doctor's note", "A doctor's note is needed from day {n2}."),
            ("the training budget doubles after two years", "The training budget is {amount2} per year."),
        ),
    ),
    "product-search": Domain(
        "product-search",
        "$",
        (
            "noise-cancelling headphones",
            "standing desk",
            "espresso machine",
            "4K monitor",
            "robot vacuum",
            "hiking backpack",
            "electric kettle",
            "gaming laptop",
            "air purifier",
            "mechanical keyboard",
        ),
        (
            "compare two models",
            "check stock in a store",
            "filter results by price",
            "reserve an item for pickup",
            "see the warranty terms",
            "find a cheaper alternative",
        ),
        ("product catalogue", "spec sheet", "review digest", "warranty page"),
        ("catalogue", "spec-sheets", "review-digest", "warranty"),
        ("product finder", "stock checker", "comparison tool"),
        ("Consumer Lab Report 9", "Retail Quality Bulletin", "Brand Partner Guide", "Product Safety Register"),
        ("safety", "energy label", "durability"),
        (
            ("the espresso machine comes with a five-year warranty", "The espresso machine has a {n2}-year warranty."),
            ("the robot vacuum empties itself", "The robot vacuum needs manual emptying."),
            ("the 4K monitor includes a USB-C hub", "The 4K monitor has HDMI and DisplayPort inputs."),
            ("the gaming laptop runs a whole day on battery", "Battery life is about {n2} hours."),
            ("the standing desk arrives assembled", "The standing desk ships flat-packed."),
            ("the air purifier is silent at top speed", "At top speed the air purifier runs at {n2} dB."),
        ),
    ),
    "legal-terms": Domain(
        "legal-terms",
        "$",
        (
            "liability cap",
            "termination clause",
            "data processing addendum",
            "arbitration clause",
            "warranty disclaimer",
            "indemnity",
            "auto-renewal term",
            "governing law clause",
            "service credit",
            "confidentiality obligation",
        ),
        (
            "terminate the contract early",
            "transfer the account",
            "opt out of arbitration",
            "request a copy of my data",
            "cancel auto-renewal",
            "claim a service credit",
        ),
        ("terms of service", "master agreement", "privacy notice", "service level agreement"),
        ("tos", "msa", "privacy-notice", "sla"),
        ("contract repository", "legal request form", "compliance desk"),
        ("Legal Memorandum 2017-3", "Consumer Rights Code", "Standard Contract Annex Z", "Regulatory Guidance Note 5"),
        ("GDPR", "SOC 2", "ISO 27001"),
        (
            ("the liability cap excludes data breaches", "The liability cap covers data breaches up to {amount2}."),
            ("the contract can be ended with no notice", "Termination requires {n2} days' written notice."),
            ("arbitration is optional for business customers", "Arbitration is mandatory for business customers."),
            ("auto-renewal was removed from the terms", "Contracts renew automatically for {n2} months."),
            ("service credits are paid in cash", "Service credits are applied to the next invoice."),
        ),
    ),
}
DOMAIN_NAMES = tuple(DOMAINS)

# Scopes that an off-topic chunk belongs to (evidence admitted for the wrong region or unit).
REGIONS = ("Brazil", "Japan", "Ontario", "Bavaria", "Queensland", "Singapore", "Mexico", "Norway", "Kenya", "Chile")
