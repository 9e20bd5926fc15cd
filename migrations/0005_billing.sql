-- The billing engine: purchases with their frozen plan snapshot, per-component
-- balance counters, the customer's wallet and its ledger, adjustments with their
-- idempotency keys, invoices, payments, taxes, members and portal signing keys.
-- Balances are maintained counters, moved in the transaction that records why.

-- status: SCHEDULED -> ACTIVE -> CANCELLED. The current cycle is
-- [period_start, period_end); cycle_index counts cycles from the anchor.
CREATE TABLE purchases (
  organization_id    text NOT NULL REFERENCES organizations (id),
  id                 text NOT NULL,
  customer_id        text NOT NULL,
  plan_id            text NOT NULL,
  status             text NOT NULL CHECK (status IN ('SCHEDULED', 'ACTIVE', 'CANCELLED')),
  billing_date       timestamptz NOT NULL,
  cycle_index        integer NOT NULL DEFAULT 0,
  period_start       timestamptz,
  period_end         timestamptz,
  auto_payment       boolean NOT NULL DEFAULT false,
  spent_this_cycle   numeric NOT NULL DEFAULT 0,
  -- The plan, its components and their catalogue prices at purchase time (decimals as strings).
  snapshot           jsonb NOT NULL,
  cancelled_at       timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id)
);
-- One live (SCHEDULED or ACTIVE) purchase per customer; the index decides races.
CREATE UNIQUE INDEX purchases_one_live_per_customer
  ON purchases (organization_id, customer_id) WHERE status IN ('SCHEDULED', 'ACTIVE');
CREATE INDEX purchases_due ON purchases (period_end) WHERE status = 'ACTIVE';
CREATE INDEX purchases_scheduled ON purchases (billing_date) WHERE status = 'SCHEDULED';

-- One row per plan component of a purchase, for the current cycle.
--   granted/used/remaining: ADVANCE allowance (remaining may go below zero only
--     for composites, whose extra occurrences are debt for the next grant);
--   cycle_quantity: everything metered on this component this cycle;
--   arrear_amount: ARREAR charges of this cycle not yet invoiced.
CREATE TABLE purchase_balances (
  organization_id   text NOT NULL,
  purchase_id       text NOT NULL,
  component_id      text NOT NULL,
  customer_id       text NOT NULL,
  type              text NOT NULL,
  billing_mode      text NOT NULL,
  target_id         text,
  granted           numeric NOT NULL DEFAULT 0,
  used              numeric NOT NULL DEFAULT 0,
  remaining         numeric NOT NULL DEFAULT 0,
  original_granted  numeric,
  cycle_quantity    numeric NOT NULL DEFAULT 0,
  arrear_amount     numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, purchase_id, component_id),
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id)
);
CREATE INDEX purchase_balances_target ON purchase_balances (organization_id, purchase_id, type, target_id);

CREATE TABLE wallets (
  organization_id        text NOT NULL,
  customer_id            text NOT NULL,
  balance                numeric NOT NULL DEFAULT 0,
  reserved_balance       numeric NOT NULL DEFAULT 0,
  low_balance_alert_usd  numeric CHECK (low_balance_alert_usd >= 0),
  recurring_grant_usd    numeric,
  updated_at             timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, customer_id),
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id)
);

-- type: PURCHASE_GRANT, CYCLE_GRANT, RECURRING_GRANT, ADJUSTMENT, USAGE_LOG, INVOICE_PAYMENT
CREATE TABLE wallet_ledger (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  customer_id      text NOT NULL,
  type             text NOT NULL,
  delta            numeric NOT NULL,
  balance_after    numeric NOT NULL,
  usage_log_id     text,
  purchase_id      text,
  invoice_id       text,
  notes            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX wallet_ledger_by_customer ON wallet_ledger (organization_id, customer_id, id);

-- endpoint: credits, outcomes, units, composites, wallet. A keyed row is written
-- first in the adjusting transaction, so a failed adjustment leaves no key behind
-- and a concurrent twin waits on the index, then replays.
CREATE TABLE balance_adjustments (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  endpoint         text NOT NULL,
  idempotency_key  text,
  fingerprint      text NOT NULL,
  customer_id      text NOT NULL,
  purchase_id      text,
  component_id     text,
  delta            numeric NOT NULL,
  applied_delta    numeric NOT NULL DEFAULT 0,
  notes            text,
  adjusted_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX balance_adjustments_key
  ON balance_adjustments (organization_id, endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE taxes (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  name             text NOT NULL,
  rate_percent     numeric NOT NULL CHECK (rate_percent >= 0 AND rate_percent <= 100),
  is_active        boolean NOT NULL DEFAULT true,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

-- kind: PLAN (issued at a cycle start) or USAGE (ARREAR usage of an ended cycle).
CREATE TABLE invoices (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  customer_id      text NOT NULL,
  purchase_id      text,
  kind             text NOT NULL CHECK (kind IN ('PLAN', 'USAGE')),
  status           text NOT NULL CHECK (status IN ('OPEN', 'PAID', 'VOID')),
  currency_code    text NOT NULL,
  period_start     timestamptz,
  period_end       timestamptz,
  subtotal         numeric NOT NULL,
  tax_total        numeric NOT NULL,
  total            numeric NOT NULL,
  issued_at        timestamptz NOT NULL,
  paid_at          timestamptz,
  voided_at        timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE INDEX invoices_by_customer ON invoices (organization_id, customer_id, id);
CREATE INDEX invoices_by_purchase ON invoices (organization_id, purchase_id);

-- kind: LINE or TAX; amounts exact, the invoice's totals in cents.
CREATE TABLE invoice_lines (
  organization_id  text NOT NULL,
  invoice_id       text NOT NULL,
  position         integer NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('LINE', 'TAX')),
  description      text NOT NULL,
  quantity         numeric,
  unit_price       numeric,
  amount           numeric NOT NULL,
  component_id     text,
  tax_id           text,
  rate_percent     numeric,
  PRIMARY KEY (organization_id, invoice_id, position),
  FOREIGN KEY (organization_id, invoice_id) REFERENCES invoices (organization_id, id)
);

-- method: MANUAL (an operator recorded it) or WALLET (auto-payment).
CREATE TABLE payments (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  invoice_id       text NOT NULL,
  customer_id      text NOT NULL,
  amount           numeric NOT NULL,
  method           text NOT NULL CHECK (method IN ('MANUAL', 'WALLET')),
  reference        text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, invoice_id) REFERENCES invoices (organization_id, id)
);
CREATE INDEX payments_by_customer ON payments (organization_id, customer_id, id);

CREATE TABLE customer_members (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  customer_id      text NOT NULL,
  email            text NOT NULL,
  name             text,
  role             text NOT NULL DEFAULT 'MEMBER',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id)
);
CREATE UNIQUE INDEX customer_members_email ON customer_members (organization_id, customer_id, lower(email));

-- The secret each organisation's portal tokens and pay links are signed with.
CREATE TABLE signing_keys (
  organization_id  text PRIMARY KEY REFERENCES organizations (id),
  secret           text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);
