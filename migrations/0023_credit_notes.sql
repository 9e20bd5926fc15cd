-- Credit notes (issue 38, docs/billing.md "Credit notes"): a correction of an
-- issued invoice that leaves the invoice as it was issued. A note credits an
-- amount of the invoice's total, or named lines of it (with the invoice's taxes
-- on them), never more than remains (the total less earlier notes). On an OPEN
-- invoice it lowers what is due (applied_to AMOUNT_DUE; at zero the invoice
-- becomes PAID with no payment); on a PAID invoice its amount goes to the
-- customer's wallet through the ledger (applied_to WALLET, wallet_ledger_id the
-- ledger row). Written by src/billing/CreditNotes.ts, in one transaction with
-- the invoice's change, the wallet's and the events.

-- Numbers: a sequence of their own per organisation (CN-000001), taken like the
-- invoices' (src/billing/InvoiceNumbers.ts): a counter row moved on in the
-- note's transaction and locked until it commits, so a note rolled back gives
-- its number back and the sequence has no gaps. A row appears with the
-- organisation's first note.
CREATE TABLE credit_note_counters (
  organization_id  text NOT NULL REFERENCES organizations (id),
  last_number      bigint NOT NULL CHECK (last_number >= 0),
  PRIMARY KEY (organization_id)
);

-- amount: what the note credits, taxes included, in cents. lines: the invoice
-- lines credited, [{line (place in the invoice's lines, from 1), description,
-- amount}]; tax_lines: the invoice's taxes given back on them, [{taxId, name,
-- ratePercent, amount}]; both empty for an amount of the whole invoice (amounts
-- are decimal strings: exact). idempotency_key + fingerprint: the optional key
-- of the request and what made it (invoice, amount or lines, reason), unique
-- per organisation; a refused request leaves no row, so never uses up its key.
CREATE TABLE credit_notes (
  organization_id   text NOT NULL,
  id                text NOT NULL,
  sequence_number   bigint NOT NULL,
  number            text NOT NULL,
  invoice_id        text NOT NULL,
  customer_id       text NOT NULL,
  amount            numeric NOT NULL CHECK (amount > 0 AND amount = round(amount, 2)),
  reason            text NOT NULL,
  lines             jsonb NOT NULL DEFAULT '[]',
  tax_lines         jsonb NOT NULL DEFAULT '[]',
  applied_to        text NOT NULL CHECK (applied_to IN ('AMOUNT_DUE', 'WALLET')),
  wallet_ledger_id  text,
  idempotency_key   text,
  fingerprint       text,
  created_at        timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, invoice_id) REFERENCES invoices (organization_id, id),
  CHECK ((applied_to = 'WALLET') = (wallet_ledger_id IS NOT NULL)),
  CHECK ((idempotency_key IS NULL) = (fingerprint IS NULL))
);
CREATE UNIQUE INDEX credit_notes_by_number ON credit_notes (organization_id, sequence_number);
-- An invoice's notes, oldest first: GET /invoices/{id} and its lists, the events, the overdue marks.
CREATE INDEX credit_notes_by_invoice ON credit_notes (organization_id, invoice_id, sequence_number);
-- A customer's newest note (`billing trigger credit_note.created`).
CREATE INDEX credit_notes_by_customer ON credit_notes (organization_id, customer_id, id);
CREATE UNIQUE INDEX credit_notes_key
  ON credit_notes (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
