-- The verifier's score of each queued claim (issue 56): review samples and post-stratifies by score band, and the
-- Review page checks the score against the settled labels. NULL: the verifier sent none (or queued before this).
ALTER TABLE review_queue ADD COLUMN IF NOT EXISTS score Nullable(Float32);
