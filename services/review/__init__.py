"""Human review of claims: sampling into a queue, blind labelling, agreement and calibrated rates."""
