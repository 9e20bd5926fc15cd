-- Issue 27, items 3 and 4.
--
-- A payment recorded over HTTP (`POST /invoices/{id}/payments`) or by the CLI
-- (`billing invoice pay --idempotency-key`) may carry an idempotency key: unique
-- per organisation among payments, with the fingerprint of the request it was
-- first used with (src/idempotency/Idempotency.ts). Written in the transaction that
-- records the payment, so a failed payment never uses up its key and the unique
-- index decides a race between two identical requests. Wallet payments carry none.
ALTER TABLE payments ADD COLUMN idempotency_key text;
ALTER TABLE payments ADD COLUMN fingerprint text;
CREATE UNIQUE INDEX payments_key ON payments (organization_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- The organisation's own API rate limits (docs/api.md, "Rate limits"): a JSON object
-- {signals?, reads?, writes?}, each {perSecond, burst}; a family left out, or the
-- whole column NULL, takes the built-in default. Read with the API key (the key
-- cache), so a change reaches every API process within the cache's 0.5 s.
ALTER TABLE organizations ADD COLUMN rate_limits jsonb;
