-- History does not slow the present (docs/operations.md, "History: retention of
-- the inbox and partitions of the usage log"). Signals that ended (PROCESSED or
-- FAILED) longer ago than the retention window leave the `signals` inbox for
-- this archive, in bounded batches, moved by the worker's history job
-- (src/signals/Retention.ts). The inbox then holds the window's signals and those
-- still waiting, whatever the service's age, and its indexes stay that size.
--
-- An archive table rather than time partitions of `signals`: a partitioned
-- table's unique indexes must hold the partition column, so the idempotency key
-- could no longer be unique across months, and a look-up by rawId alone would
-- probe every partition. Here nothing of the inbox's keys changes.
--
-- The same columns as `signals`, by name (the job copies them by name): a
-- migration that adds a column to `signals` adds it here too
-- (test/signal-retention.test.ts compares the two).
CREATE TABLE signals_archive (LIKE signals INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE signals_archive
  -- When the job copied the row here; the row leaves the inbox a pass later (Retention.ts, "settled").
  ADD COLUMN archived_at timestamptz NOT NULL,
  ADD PRIMARY KEY (organization_id, id),
  ADD FOREIGN KEY (organization_id) REFERENCES organizations (id),
  -- Only ended signals are ever moved (also lets the planner skip this table for QUEUED and PENDING).
  ADD CONSTRAINT signals_archive_ended CHECK (status IN ('PROCESSED', 'FAILED'));

-- A repeated idempotency key is answered by its first signal wherever that
-- signal is (docs/signals.md "Idempotency"): intake looks here too for keys the
-- inbox does not hold. Not unique: uniqueness was enforced when the signal
-- entered the inbox, and a row this index refused would be a signal the job
-- could never move.
CREATE INDEX signals_archive_idempotency
  ON signals_archive (organization_id, route, idempotency_key) WHERE idempotency_key IS NOT NULL;
