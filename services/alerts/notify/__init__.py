"""Who gets told what: an alert's summary and payloads, the decision what to send, and the receivers' queues that
send it without blocking ingestion."""
