-- An issue's subtitle: its keywords, dominant verdict, route, stage and versions. Its name is now a
-- title quoting its most representative claim (clustering/naming.py). Older rows read '' until re-clustered.
ALTER TABLE issues ADD COLUMN IF NOT EXISTS subtitle String DEFAULT '' AFTER name;
