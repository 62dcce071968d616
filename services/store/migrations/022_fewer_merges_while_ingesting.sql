-- Fewer merges while ingest drains (issue 25). Every insert adds a part to each table a view writes, and the
-- merge selector's default base (5) merges a few similar parts at a time, so a row is rewritten several times.
-- rate_minute's rows are the dearest to merge (forty sums per row) and event_keys' the most numerous. With base
-- 20 they merge wider and less often: measured on 150,000 simulated answers written 2,000 at a time, in one
-- process, merges read 1.63 M rows instead of 2.73 M and the whole write took 6 fewer CPU µs per claim (two
-- pairs of runs: 48.2 -> 42.1 and 42.0 -> 36.3), and about a dozen parts stay in each table instead of two to
-- four. The selector still lowers the base for parts older than a few minutes, so an idle store merges them
-- down, and every read here sums or deduplicates by key, never relying on a merge.
-- events and claims keep the default: chDB compresses a merged part with ZSTD(3) only once the merge is large
-- (from about 150 MB), and wider merges of those tables left the store's text in LZ4 parts at nearly twice the bytes
-- per claim (bench/storage.py).
ALTER TABLE rate_minute MODIFY SETTING merge_selector_base = 20;

ALTER TABLE event_keys MODIFY SETTING merge_selector_base = 20;
