-- Events and operations over HTTP (issue 37; docs/api.md "API keys over HTTP",
-- docs/webhooks.md "Events over HTTP").
--
-- 1. Any key of an organisation may create others (`POST /api-keys`), so each
--    key records the key whose request created it: a key that leaked and
--    minted keys of its own is then found, and those revoked with it. NULL:
--    created from the CLI (`billing org create`, `billing key create`).
ALTER TABLE api_keys ADD COLUMN created_by text;
ALTER TABLE api_keys
  ADD CONSTRAINT api_keys_created_by_fkey
  FOREIGN KEY (organization_id, created_by) REFERENCES api_keys (organization_id, id);

-- 2. `GET /events?customerId=` pages a customer's events newest first by id:
--    without this index it would read every event of the organisation to
--    find one customer's.
CREATE INDEX webhook_events_by_customer ON webhook_events (organization_id, customer_id, id);
