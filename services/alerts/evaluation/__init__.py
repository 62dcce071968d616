"""Evaluation: the minute evaluator (a pass reads its inputs once, steps a pure function, then reads what its alerts
ask for and writes), its state in the store, the leader's alerting tick, the route bound's alert, and the backtest
that replays a file through all of it."""
