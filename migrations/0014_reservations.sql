-- Spend holds (issue 26, part 3): a reserving POST /entitlements/check holds an
-- amount of one balance of a customer until a signal carrying its id settles
-- it, it is released, or it expires. Amounts are in the balance's own unit:
-- credits, outcomes or units of the target (CREDIT, OUTCOME, UNIT), USD of the
-- ordinary Wallet (WALLET, target_id NULL).
--
-- A hold counts while status = 'HELD' and expires_at is after the instant a
-- reader asks at: an expired hold releases itself without a job (its row stays
-- HELD and is reported EXPIRED).
CREATE TABLE reservations (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  customer_id      text NOT NULL,
  meter            text NOT NULL CHECK (meter IN ('CREDIT', 'OUTCOME', 'UNIT', 'WALLET')),
  target_id        text,
  amount           numeric NOT NULL CHECK (amount > 0),
  status           text NOT NULL DEFAULT 'HELD' CHECK (status IN ('HELD', 'SETTLED', 'RELEASED')),
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  ended_at         timestamptz,
  -- The signal that settled the hold, and its usage-log row.
  signal_id        text,
  usage_log_id     text,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id),
  CHECK ((meter = 'WALLET') = (target_id IS NULL))
);

-- The holds a check counts: a customer's HELD rows.
CREATE INDEX reservations_held ON reservations (organization_id, customer_id) WHERE status = 'HELD';
