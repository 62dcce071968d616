-- Inserted text parts in one file (issue 25). A part of more than 10 MB (ClickHouse's min_bytes_for_wide_part)
-- is written wide: a file and a 1 MiB compression buffer for every column and array, all open at once. The
-- worker writes about 13 MB of events (and their claims) an insert, so each insert held about 180 MiB of
-- buffers; written compact (every column in one file), the same insert holds about 65 MiB at the same CPU,
-- which lowers the worker's peak memory when an insert meets a merge. Merged parts past 64 MiB are wide as before.
ALTER TABLE events MODIFY SETTING min_bytes_for_wide_part = 67108864;

ALTER TABLE claims MODIFY SETTING min_bytes_for_wide_part = 67108864;
