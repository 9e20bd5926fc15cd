-- A live step (not removed, of an active outcome) claims its agentKey in the
-- organisation: signals and adjustments find a step by that key alone, so two
-- live steps must never share it. The flag mirrors "removed_at IS NULL and the
-- outcome is active" so that a partial unique index can decide, races included.
ALTER TABLE outcome_steps ADD COLUMN key_claimed boolean NOT NULL DEFAULT true;

UPDATE outcome_steps s SET key_claimed = (s.removed_at IS NULL AND o.is_active)
  FROM outcomes o
  WHERE o.organization_id = s.organization_id AND o.id = s.outcome_id;

CREATE UNIQUE INDEX outcome_steps_claimed_agent_key ON outcome_steps (organization_id, agent_key) WHERE key_claimed;
