"""An alert's life: the kinds there are, the alert record, its transitions (observe, merge, resolve), its state as
people read it (acks, silences, whom to tell), and the repository that keeps alerts and silences."""
