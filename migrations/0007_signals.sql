-- Signals: the durable inbox, the usage log, outcome runs and composite occurrences.
-- See docs/signals.md for the life of a signal.

-- One row per accepted request of /signal/*: written before the 202 is sent, so
-- an accepted signal exists whatever crashes afterwards. Workers claim QUEUED
-- rows with FOR UPDATE SKIP LOCKED and end them PROCESSED, PENDING or FAILED.
CREATE TABLE signals (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  message_id       text NOT NULL,
  route            text NOT NULL CHECK (route IN ('CREDIT', 'OUTCOME', 'OUTCOME_COMPLETE', 'UNIT', 'WALLET', 'COMPOSITE_COMPLETE')),
  status           text NOT NULL DEFAULT 'QUEUED' CHECK (status IN ('QUEUED', 'PROCESSED', 'PENDING', 'FAILED')),
  -- customer_id is known at intake when the caller sent it, else set once the externalId resolves.
  customer_id      text,
  external_id      text,
  idempotency_key  text,
  agent_key        text,
  run_id           text,
  composite_ref    text,
  composite_value  text,
  member           text,
  -- The request as accepted (decoded and re-encoded), which the worker prices.
  body             jsonb NOT NULL,
  -- The answer of a synchronous completion, returned again for a repeated idempotency key.
  response         jsonb,
  attempts         integer NOT NULL DEFAULT 0,
  error_status     integer,
  error_message    text,
  usage_log_id     text,
  received_at      timestamptz NOT NULL DEFAULT now(),
  processed_at     timestamptz,
  PRIMARY KEY (organization_id, id)
);
-- Idempotency keys are unique per organisation and per route (the spec's meter).
CREATE UNIQUE INDEX signals_idempotency
  ON signals (organization_id, route, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The claim query: the oldest QUEUED rows of every organisation; the index holds only the queue.
CREATE INDEX signals_queued ON signals (id) WHERE status = 'QUEUED';
CREATE INDEX signals_by_customer ON signals (organization_id, customer_id, id);
CREATE INDEX signals_pending_by_external_id
  ON signals (organization_id, external_id) WHERE status = 'PENDING';
CREATE INDEX signals_by_run ON signals (organization_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX signals_by_composite_tag
  ON signals (organization_id, composite_ref, composite_value) WHERE composite_ref IS NOT NULL;

-- What each processed signal metered and cost. A row's customer_cost is exactly
-- what the customer's balance (or ARREAR usage) moved. Partitioned by month of
-- created_at (DESIGN §9), so that old months can be detached.
CREATE TABLE usage_log (
  organization_id     text NOT NULL REFERENCES organizations (id),
  id                  text NOT NULL,
  customer_id         text NOT NULL,
  meter               text NOT NULL CHECK (meter IN ('CREDIT', 'OUTCOME_STEP', 'OUTCOME', 'UNIT', 'WALLET', 'COMPOSITE')),
  entitlement_id      text,
  entitlement_name    text,
  agent_key           text,
  model               text,
  input_tokens        bigint,
  output_tokens       bigint,
  cache_tokens        bigint,
  cache_write_tokens  bigint,
  quantity            numeric NOT NULL,
  provider_cost       numeric NOT NULL,
  customer_cost       numeric NOT NULL,
  -- ADVANCE or ARREAR for what the row drew from; null when the row bills nothing.
  billing_mode        text,
  balance_remaining   numeric,
  purchase_id         text,
  signal_id           text NOT NULL,
  message_id          text NOT NULL,
  run_id              text,
  composite_id        text,
  composite_ref       text,
  composite_value     text,
  member              text,
  custom              jsonb,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX usage_log_by_customer ON usage_log (organization_id, customer_id, id);
-- Catches rows of a month nobody created a partition for; the worker creates
-- each month ahead of time, so it stays empty.
CREATE TABLE usage_log_default PARTITION OF usage_log DEFAULT;

-- The partition of the UTC month holding `day`, created if missing. Serialised
-- by an advisory lock, so workers starting together do not race.
CREATE FUNCTION ensure_usage_log_month(day timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  month_start timestamptz := date_trunc('month', day AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  partition_name text := 'usage_log_' || to_char(day AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('usage_log_partitions'));
  IF to_regclass(partition_name) IS NULL THEN
    EXECUTE format('CREATE TABLE %I PARTITION OF usage_log FOR VALUES FROM (%L) TO (%L)',
                   partition_name, month_start, month_start + interval '1 month');
  END IF;
END
$$;
SELECT ensure_usage_log_month(now());
SELECT ensure_usage_log_month(now() + interval '1 month');

-- A completed outcome run; a run is open while it has step signals and no row here.
CREATE TABLE outcome_runs (
  organization_id  text NOT NULL REFERENCES organizations (id),
  run_id           text NOT NULL,
  customer_id      text NOT NULL,
  signal_id        text NOT NULL,
  completed_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, run_id)
);

-- One occurrence of a composite: the signals tagged {refId: value}.
CREATE TABLE composite_occurrences (
  organization_id  text NOT NULL REFERENCES organizations (id),
  composite_id     text NOT NULL,
  value            text NOT NULL,
  status           text NOT NULL DEFAULT 'WAITING' CHECK (status IN ('WAITING', 'PARKED', 'COMPLETED')),
  -- Set by composite/complete: who is billed, with what metadata, by which request.
  customer_id      text,
  signal_id        text,
  member           text,
  custom           jsonb,
  usage_log_id     text,
  completed_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, composite_id, value)
);
