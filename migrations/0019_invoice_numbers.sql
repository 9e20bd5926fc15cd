-- Invoice numbers (issue 27, docs/billing.md "Invoice numbers"): every
-- finalised invoice (any status but DRAFT) carries a number a person can quote,
-- sequential and gap-free per organisation: its prefix (an organisation
-- setting) and its place in the organisation's sequence, at least six digits.
--
-- The sequence is a counter row per organisation, taken with one UPDATE in the
-- transaction that finalises the invoices (src/billing/Invoices.ts,
-- `numbering`), not a PostgreSQL sequence: a sequence hands out numbers outside
-- transactions and leaves gaps when one rolls back. The counter row is locked
-- until its transaction commits, so it serialises finalisations per
-- organisation; it is taken last, for a whole batch at once.

ALTER TABLE organizations
  ADD COLUMN invoice_number_prefix text NOT NULL DEFAULT 'INV-'
    CHECK (invoice_number_prefix ~ '^[A-Za-z0-9._/-]{0,20}$');

-- last_number: the highest number taken; the next invoice gets last_number + 1.
-- A row appears with the organisation's first finalised invoice.
CREATE TABLE invoice_counters (
  organization_id  text NOT NULL REFERENCES organizations (id),
  last_number      bigint NOT NULL CHECK (last_number >= 0),
  PRIMARY KEY (organization_id)
);

-- sequence_number: the place in the organisation's sequence; number: as shown,
-- fixed when the invoice is finalised (a later prefix change leaves it as it is).
ALTER TABLE invoices
  ADD COLUMN sequence_number bigint,
  ADD COLUMN number text;

-- Invoices finalised before numbers existed: numbered in creation order.
WITH numbered AS (
  SELECT organization_id, id,
         row_number() OVER (PARTITION BY organization_id ORDER BY created_at, id) AS sequence_number
  FROM invoices
  WHERE status <> 'DRAFT'
)
UPDATE invoices i
SET sequence_number = n.sequence_number,
    number = 'INV-' || lpad(n.sequence_number::text, greatest(6, length(n.sequence_number::text)), '0')
FROM numbered n
WHERE i.organization_id = n.organization_id AND i.id = n.id;

INSERT INTO invoice_counters (organization_id, last_number)
SELECT organization_id, max(sequence_number) FROM invoices
WHERE sequence_number IS NOT NULL
GROUP BY organization_id;

ALTER TABLE invoices
  ADD CONSTRAINT invoices_numbered_when_final CHECK (
    (status = 'DRAFT') = (sequence_number IS NULL) AND (number IS NULL) = (sequence_number IS NULL)
  );
CREATE UNIQUE INDEX invoices_by_number ON invoices (organization_id, sequence_number);
