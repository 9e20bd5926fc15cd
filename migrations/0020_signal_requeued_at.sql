-- A retried signal's moment (docs/signals.md "Usage in its own time", "A
-- signal that waited"): when a PENDING or FAILED signal goes back to the queue
-- (its customer took its externalId, or an operator replayed it), the moment
-- of that requeue is kept. A signal sent without a `timestamp` is usage "now"
-- each time it is submitted: its moment is coalesce(occurred_at, requeued_at,
-- received_at), so a signal that waited for its customer is billed in the
-- cycle of its retry, not refused because it was received before the plan was
-- bought. A signal with a timestamp keeps it (occurred_at wins).
-- NULL: never requeued (rows written before this column: the moment is as it was).
ALTER TABLE signals ADD COLUMN IF NOT EXISTS requeued_at timestamptz;
