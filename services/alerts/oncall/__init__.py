"""What engineers on call do with alerts (list, show, ack, silence, unsilence, their runbooks), the rules every kind
follows with their measured quality, and what the API and the CLI show of them."""
