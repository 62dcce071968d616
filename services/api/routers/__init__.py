"""One router per on-call surface; each is built from the process's Services and the access Gate."""
