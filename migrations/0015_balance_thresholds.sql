-- Threshold alerts of prepaid balances (docs/webhooks.md, `balance.threshold.crossed`):
-- one row per threshold a prepaid (ADVANCE) balance row reached in one cycle of its
-- purchase. The primary key is the "once a cycle": a threshold that is reached again
-- in the same cycle (after a grant lifted the balance back, or a reversal) finds its
-- row and fires nothing; the next cycle (a new cycle_index) fires again. Written in
-- the transaction that moved the balance, whether or not an endpoint listened.
CREATE TABLE balance_threshold_alerts (
  organization_id  text NOT NULL,
  purchase_id      text NOT NULL,
  cycle_index      integer NOT NULL,
  component_id     text NOT NULL,
  -- Percent of what was granted this cycle that was used.
  threshold        smallint NOT NULL CHECK (threshold IN (50, 80, 100)),
  customer_id      text NOT NULL,
  -- The usage-log row whose move reached the threshold; NULL for an adjustment.
  usage_log_id     text,
  -- The webhook event stored for it; NULL when no endpoint was subscribed.
  event_id         text,
  fired_at         timestamptz NOT NULL,
  PRIMARY KEY (organization_id, purchase_id, cycle_index, component_id, threshold),
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id)
);
