-- Triage that people set on an issue (services/triage): its assignee, the condition it is archived until (JSON,
-- '' when not archived), its ticket's URL, and the versions current when it was resolved "in the next version".
ALTER TABLE issues ADD COLUMN IF NOT EXISTS assignee String DEFAULT '';
ALTER TABLE issues ADD COLUMN IF NOT EXISTS archive String DEFAULT '';
ALTER TABLE issues ADD COLUMN IF NOT EXISTS ticket_url String DEFAULT '';
ALTER TABLE issues ADD COLUMN IF NOT EXISTS resolved_in Map(String, String) DEFAULT map();
