-- Fewer merges of the text tables too (issue 25). Migration 022 left events and claims at the default merge
-- base because chDB wrote their merged parts in LZ4 until a merge passed about 150 MB. The store now names
-- its part codecs (services/store/clickhouse-compression.xml: every merged part in ZSTD), so these tables merge
-- wider as well. Measured on 150,000 simulated answers written 2,000 at a time in one process: merges read
-- 0.91 M rows instead of 1.63 M, the write and its merges took about 34 CPU µs per claim instead of about 40
-- (two runs each), and after OPTIMIZE FINAL the store held 91.6 bytes per claim instead of 172.
ALTER TABLE events MODIFY SETTING merge_selector_base = 20;

ALTER TABLE claims MODIFY SETTING merge_selector_base = 20;
