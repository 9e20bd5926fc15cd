-- The set-based drain claims whole customers (src/signals/SignalProcessor.ts):
-- a customer's oldest queued signals, found by the key the per-customer lock
-- uses (its id, or 'ext:' and the externalId while it is not resolved yet).
CREATE INDEX signals_queued_by_customer
  ON signals (organization_id, (coalesce(customer_id, 'ext:' || external_id)), id) WHERE status = 'QUEUED';
