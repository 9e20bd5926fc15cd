-- Changing a purchase's plan mid-cycle (docs/billing.md "Changing plans").

-- A PRORATION invoice: the unused share of the old plan's price credited, the
-- new plan's price for the rest of the cycle charged, and the old plan's
-- ARREAR usage so far, issued when a plan changes NOW.
ALTER TABLE invoices DROP CONSTRAINT invoices_kind_check;
ALTER TABLE invoices ADD CONSTRAINT invoices_kind_check CHECK (kind IN ('PLAN', 'USAGE', 'PRORATION'));

-- A change at the cycle end (CYCLE_END): the plan, frozen when the change was
-- asked for, that the cycle job puts the purchase on at its next renewal.
ALTER TABLE purchases
  ADD COLUMN scheduled_plan_id text,
  ADD COLUMN scheduled_snapshot jsonb;

-- The snapshot an ended cycle was billed under, when the purchase has changed
-- plan since (NULL: the purchase's own). Late usage of that cycle is priced,
-- and its draft and late lines are named, from it.
ALTER TABLE purchase_cycles ADD COLUMN snapshot jsonb;

-- Every plan change asked for: what it changed, and its idempotency key. The
-- keyed row is written first in the changing transaction, so a concurrent twin
-- waits on the unique index, then replays.
CREATE TABLE purchase_changes (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  purchase_id      text NOT NULL,
  customer_id      text NOT NULL,
  idempotency_key  text,
  fingerprint      text NOT NULL,
  from_plan_id     text NOT NULL,
  to_plan_id       text NOT NULL,
  timing           text NOT NULL CHECK (timing IN ('NOW', 'CYCLE_END')),
  invoice_id       text,
  changed_at       timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id)
);
CREATE UNIQUE INDEX purchase_changes_key
  ON purchase_changes (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX purchase_changes_by_purchase ON purchase_changes (organization_id, purchase_id);
