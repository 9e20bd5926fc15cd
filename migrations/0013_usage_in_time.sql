-- Usage in its own time (docs/signals.md "Usage in its own time", docs/billing.md
-- "Late usage"): a signal carries the moment it happened and is billed in the
-- purchase cycle that contains that moment, however late the worker prices it.

-- How old a signal's timestamp may be (days), and how long a cycle-end USAGE
-- invoice stays DRAFT so late usage of that cycle can still change it (hours).
ALTER TABLE organizations
  ADD COLUMN late_usage_days integer NOT NULL DEFAULT 35 CHECK (late_usage_days BETWEEN 0 AND 365),
  ADD COLUMN invoice_grace_hours integer NOT NULL DEFAULT 0 CHECK (invoice_grace_hours BETWEEN 0 AND 720);

-- The moment the usage happened, as the caller said it; NULL means the moment
-- of intake (received_at). Late signals (a moment before their intake by more
-- than the backfill threshold) queue in a lane of their own, so a backfill
-- never holds today's signals back.
ALTER TABLE signals
  ADD COLUMN occurred_at timestamptz,
  ADD COLUMN late boolean NOT NULL DEFAULT false;
-- The queue's index becomes one per lane in a single index: each lane's head
-- is read in id order (a backfill queued before today's signals is never
-- scanned by the on-time lane's claim), and a queued row is indexed once, as
-- before (two partial indexes per lane beside the old one cost every intake
-- and every drained signal one index write more).
DROP INDEX signals_queued;
CREATE INDEX signals_queued ON signals (late, id) WHERE status = 'QUEUED';

-- Each usage row says when its usage happened, which cycle of its purchase
-- billed it, how it split between allowance and arrears (what a reversal
-- gives back), and, on a reversing row, which row it takes back.
ALTER TABLE usage_log
  ADD COLUMN occurred_at timestamptz,
  ADD COLUMN cycle_index integer,
  ADD COLUMN advance_quantity numeric,
  ADD COLUMN arrear_quantity numeric,
  ADD COLUMN arrear_charge numeric,
  ADD COLUMN reverses text,
  ADD COLUMN reversed_by text,
  ADD COLUMN reason text;
-- A row is reversed at most once: the reversal locks the row and sets
-- reversed_by (a unique index cannot span the table's monthly partitions).
CREATE INDEX usage_log_reverses ON usage_log (organization_id, reverses) WHERE reverses IS NOT NULL;
-- The idempotency keys of reversals (POST /signal/usage-log/{id}/reverse): the
-- key is written first in the reversing transaction, so a concurrent twin waits
-- on this primary key and then replays; a key belongs to one usage row.
CREATE TABLE usage_reversal_keys (
  organization_id  text NOT NULL REFERENCES organizations (id),
  idempotency_key  text NOT NULL,
  usage_log_id     text NOT NULL,
  reversal_id      text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, idempotency_key)
);

-- Every ended cycle of a purchase: its period, whether its usage invoice is
-- still DRAFT (inside the grace period, late usage changes it) or FINAL (late
-- usage goes on the customer's next usage invoice as lines of their own).
CREATE TABLE purchase_cycles (
  organization_id   text NOT NULL,
  purchase_id       text NOT NULL,
  cycle_index       integer NOT NULL,
  customer_id       text NOT NULL,
  period_start      timestamptz NOT NULL,
  period_end        timestamptz NOT NULL,
  status            text NOT NULL CHECK (status IN ('DRAFT', 'FINAL')),
  usage_invoice_id  text,
  finalize_at       timestamptz NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, purchase_id, cycle_index),
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id)
);
CREATE INDEX purchase_cycles_by_customer ON purchase_cycles (organization_id, customer_id, period_start);
CREATE INDEX purchase_cycles_drafts ON purchase_cycles (finalize_at) WHERE status = 'DRAFT';

-- The balance rows of an ended cycle, as late usage of that cycle moves them:
--   remaining: the allowance left for late usage (what expired at the cycle
--     end; what rolled over belongs to the next cycle);
--   cycle_quantity: everything metered in the cycle, late usage included (tiers);
--   arrear_amount: every ARREAR charge of the cycle, late ones included;
--   invoiced_arrear: how much of it invoices hold (the cycle's usage invoice
--     once final, then late lines); the difference is owed on the next one.
CREATE TABLE cycle_balances (
  organization_id   text NOT NULL,
  purchase_id       text NOT NULL,
  cycle_index       integer NOT NULL,
  component_id      text NOT NULL,
  customer_id       text NOT NULL,
  type              text NOT NULL,
  billing_mode      text NOT NULL,
  target_id         text,
  granted           numeric NOT NULL DEFAULT 0,
  used              numeric NOT NULL DEFAULT 0,
  remaining         numeric NOT NULL DEFAULT 0,
  cycle_quantity    numeric NOT NULL DEFAULT 0,
  arrear_amount     numeric NOT NULL DEFAULT 0,
  invoiced_arrear   numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, purchase_id, cycle_index, component_id),
  FOREIGN KEY (organization_id, purchase_id, cycle_index)
    REFERENCES purchase_cycles (organization_id, purchase_id, cycle_index)
);
CREATE INDEX cycle_balances_owed ON cycle_balances (organization_id, customer_id) WHERE arrear_amount <> invoiced_arrear;

-- A USAGE invoice is DRAFT during the grace period: listed, never payable.
ALTER TABLE invoices DROP CONSTRAINT invoices_status_check;
ALTER TABLE invoices ADD CONSTRAINT invoices_status_check CHECK (status IN ('DRAFT', 'OPEN', 'PAID', 'VOID'));

-- The period a line bills: the invoice's for today's lines; an earlier cycle's
-- for a late line.
ALTER TABLE invoice_lines
  ADD COLUMN period_start timestamptz,
  ADD COLUMN period_end timestamptz,
  ADD COLUMN cycle_index integer;
UPDATE invoice_lines l SET period_start = i.period_start, period_end = i.period_end
FROM invoices i WHERE i.organization_id = l.organization_id AND i.id = l.invoice_id;
