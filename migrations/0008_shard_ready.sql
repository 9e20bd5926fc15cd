-- Ready to shard (DESIGN.md §2, docs/scaling.md): in every tenant table the
-- primary key, every unique index and every foreign key lead with
-- organization_id, and a foreign key pairs organization_id with the referenced
-- table's organization_id. Citus can then distribute every tenant table by
-- organization_id, co-located, without a rewrite. test/shard-readiness.test.ts
-- reads the catalogue and fails on any key that breaks the rule.
--
-- The audit of 0001-0007 found one key that breaks it (api_keys_hash) and a
-- number of references by id that no foreign key enforced. This migration fixes
-- both; 0001-0007 are left as they were applied.

-- 1. api_keys: the key's hash was unique across all organisations. A distributed
-- table cannot have that index (Citus requires the distribution column in every
-- unique index), so uniqueness is now per organisation, and a plain index serves
-- the one lookup that starts without an organisation: authentication by key.
-- A key is 192 random bits, so two organisations never hold the same hash.
DROP INDEX api_keys_hash;
CREATE UNIQUE INDEX api_keys_organization_key_hash ON api_keys (organization_id, key_hash);
CREATE INDEX api_keys_by_key_hash ON api_keys (key_hash);

-- 2. References by id that no foreign key enforced. Each is added as
-- (organization_id, x_id) REFERENCES t (organization_id, id): the referenced row
-- must belong to the same organisation, and on Citus both rows live on the same
-- shard group, where PostgreSQL itself can check the key. Every one of these
-- parents is written before the rows that name it and is never deleted
-- (records are archived), so the service's writes already satisfy them; the
-- ALTERs check existing rows too.
--
-- Left unenforced on purpose (the rule above does not need them, and a key
-- would be wrong):
--   * usage_log_id (wallet_ledger, signals, composite_occurrences): usage_log is
--     partitioned by created_at, so its key is (organization_id, id, created_at)
--     and there is no (organization_id, id) key to reference.
--   * outcome_runs.signal_id, composite_occurrences.signal_id: written before the
--     completion's own signal row, in the same transaction (src/signals/Signals.ts).
--   * purchase_balances.component_id, invoice_lines.component_id: a component of
--     the purchase's frozen snapshot; a plan PATCH replaces plan_components rows.
--   * composite_entitlements.target_id, purchase_balances.target_id,
--     usage_log.entitlement_id: a credit, outcome or unit depending on a kind column.
--   * run_id, external_id, message_id, idempotency keys: the caller's values, not rows.
--   * signals.customer_id and every reference of usage_log (customer, signal,
--     purchase, composite): the two hottest inserts of the service. A foreign
--     key costs an index probe and a share lock on the parent row per inserted
--     row; intake already checks the customer in its INSERT, and the drain
--     writes usage rows only for signals, customers and purchases it has just
--     read and locked in the same transaction.

ALTER TABLE purchases
  ADD CONSTRAINT purchases_organization_id_plan_id_fkey
  FOREIGN KEY (organization_id, plan_id) REFERENCES plans (organization_id, id);

ALTER TABLE purchase_balances
  ADD CONSTRAINT purchase_balances_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id);

-- A ledger row is a movement of one customer's wallet; the wallet row is
-- created and locked before its first ledger row.
ALTER TABLE wallet_ledger
  ADD CONSTRAINT wallet_ledger_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES wallets (organization_id, customer_id),
  ADD CONSTRAINT wallet_ledger_organization_id_purchase_id_fkey
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id),
  ADD CONSTRAINT wallet_ledger_organization_id_invoice_id_fkey
  FOREIGN KEY (organization_id, invoice_id) REFERENCES invoices (organization_id, id);

-- purchase_id and component_id are set together (both null for the wallet), so
-- the composite key is checked only when the adjustment moved a balance row.
ALTER TABLE balance_adjustments
  ADD CONSTRAINT balance_adjustments_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id),
  ADD CONSTRAINT balance_adjustments_purchase_balance_fkey
  FOREIGN KEY (organization_id, purchase_id, component_id)
    REFERENCES purchase_balances (organization_id, purchase_id, component_id);

ALTER TABLE invoices
  ADD CONSTRAINT invoices_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id),
  ADD CONSTRAINT invoices_organization_id_purchase_id_fkey
  FOREIGN KEY (organization_id, purchase_id) REFERENCES purchases (organization_id, id);

ALTER TABLE invoice_lines
  ADD CONSTRAINT invoice_lines_organization_id_tax_id_fkey
  FOREIGN KEY (organization_id, tax_id) REFERENCES taxes (organization_id, id);

ALTER TABLE payments
  ADD CONSTRAINT payments_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id);

ALTER TABLE webhook_deliveries
  ADD CONSTRAINT webhook_deliveries_organization_id_replay_of_fkey
  FOREIGN KEY (organization_id, replay_of) REFERENCES webhook_deliveries (organization_id, id);

ALTER TABLE outcome_runs
  ADD CONSTRAINT outcome_runs_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id);

ALTER TABLE composite_occurrences
  ADD CONSTRAINT composite_occurrences_organization_id_composite_id_fkey
  FOREIGN KEY (organization_id, composite_id) REFERENCES composites (organization_id, id),
  ADD CONSTRAINT composite_occurrences_organization_id_customer_id_fkey
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id);
