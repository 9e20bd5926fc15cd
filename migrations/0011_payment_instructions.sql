-- How an organisation's customers pay an OPEN invoice (bank details, a payment
-- page, a contact), shown as plain text on the hosted invoice page. NULL: not set.
ALTER TABLE organizations ADD COLUMN payment_instructions text;
