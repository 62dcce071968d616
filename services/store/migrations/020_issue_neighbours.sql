-- Each issue's most linked issues (issue id -> link ratio of their claims' nearest neighbours, written by the
-- tracker at each re-clustering): the evidence a suggested merge needs beside the centroids (services/triage/merges.py).
ALTER TABLE issues ADD COLUMN IF NOT EXISTS neighbours Map(String, Float32) DEFAULT map();
