-- Due dates and overdue (issue 38, docs/billing.md "Due dates and overdue").
--
-- Payment terms: how many days after an invoice becomes final (issued OPEN or
-- PAID, or a DRAFT finalised when its grace period ends) it is due. The
-- organisation's terms apply to every customer that has none of its own
-- (customers.payment_terms_days NULL). 0 (the default) is due on receipt.
ALTER TABLE organizations
  ADD COLUMN payment_terms_days integer NOT NULL DEFAULT 0
    CHECK (payment_terms_days BETWEEN 0 AND 365),
  -- The organisation's billing contact, shown on the hosted invoice page and
  -- the PDF: an e-mail address and a postal address as free text lines.
  ADD COLUMN billing_email text,
  ADD COLUMN billing_address_lines text[];

ALTER TABLE customers
  ADD COLUMN payment_terms_days integer CHECK (payment_terms_days BETWEEN 0 AND 365);

-- due_date: fixed when the invoice becomes final (the moment it became final plus
-- the terms in force then, in whole days of 24 hours), null while DRAFT, kept as it
-- is when the invoice is paid or voided. overdue_at: when the cycle job marked the
-- OPEN invoice overdue (once), kept after a payment or a void.
ALTER TABLE invoices
  ADD COLUMN due_date timestamptz,
  ADD COLUMN overdue_at timestamptz;

-- Invoices finalised before terms existed were due at once (terms 0): a DRAFT
-- finalised later at its grace period's end, any other when it was issued.
UPDATE invoices i
SET due_date = coalesce(
  (SELECT pc.finalize_at FROM purchase_cycles pc
   WHERE pc.organization_id = i.organization_id AND pc.usage_invoice_id = i.id AND pc.finalize_at > i.issued_at
   LIMIT 1),
  i.issued_at)
WHERE i.status <> 'DRAFT';

ALTER TABLE invoices
  ADD CONSTRAINT invoices_due_when_final CHECK ((status = 'DRAFT') = (due_date IS NULL));

-- The cycle job's scan for OPEN invoices past their due date not marked yet.
CREATE INDEX invoices_overdue_due ON invoices (due_date) WHERE status = 'OPEN' AND overdue_at IS NULL;
