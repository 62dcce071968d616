-- The versions an eval run answered with (model, prompt, retriever, ...: the same keys as events.versions), so
-- `claimwatch eval compare --baseline model=gen-2026-10 --candidate model=gen-2026-11` can find runs by them.
-- The origin run's rows keep an empty map: its answers came from whatever production served at the time.
ALTER TABLE eval_results ADD COLUMN IF NOT EXISTS versions Map(String, String);
