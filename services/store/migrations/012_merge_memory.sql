-- Bounded memory while draining a backlog (issue 25): a background merge of events or claims reads
-- merge_max_block_size rows of every part at once, and these rows carry the question, the answer and the
-- claims' text. At ClickHouse's 8,192 a worker's merges took about 140 MB beside ingest; 1,024 reads the
-- same parts in smaller steps.
ALTER TABLE events MODIFY SETTING merge_max_block_size = 1024;

ALTER TABLE claims MODIFY SETTING merge_max_block_size = 1024;
