-- Webhooks (DESIGN.md §7): endpoints, the events written with each wallet change
-- (the outbox), one delivery per endpoint and event, and every attempt of it.
-- Nothing here is ever deleted: a removed endpoint keeps its deliveries.

CREATE TABLE webhook_endpoints (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  url              text NOT NULL,
  events           text[] NOT NULL,
  -- USD; the drop level used for customers that have no alert level of their own.
  threshold        numeric CHECK (threshold >= 0),
  enabled          boolean NOT NULL DEFAULT true,
  -- The whole signing secret, `whsec_` prefix included: the receiver needs it as-is.
  secret           text NOT NULL,
  removed_at       timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

-- body is the exact JSON text sent (and signed) on every attempt of every delivery.
CREATE TABLE webhook_events (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  event_type       text NOT NULL,
  customer_id      text NOT NULL,
  triggered_at     timestamptz NOT NULL,
  body             text NOT NULL,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, customer_id) REFERENCES customers (organization_id, id)
);
CREATE INDEX webhook_events_by_time ON webhook_events (organization_id, triggered_at);

-- PENDING deliveries are due at next_attempt_at; a claimed one has it pushed out by a
-- lease, so a worker that dies mid-attempt leaves it to be tried again.
CREATE TABLE webhook_deliveries (
  organization_id   text NOT NULL,
  id                text NOT NULL,
  event_id          text NOT NULL,
  endpoint_id       text NOT NULL,
  status            text NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED', 'CANCELLED')),
  attempts          integer NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz,
  last_status_code  integer,
  last_error        text,
  delivered_at      timestamptz,
  -- A delivery made by `webhook replay` names the one it repeats.
  replay_of         text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, event_id) REFERENCES webhook_events (organization_id, id),
  FOREIGN KEY (organization_id, endpoint_id) REFERENCES webhook_endpoints (organization_id, id)
);
-- The worker looks for each endpoint's oldest due deliveries.
CREATE INDEX webhook_deliveries_due
  ON webhook_deliveries (organization_id, endpoint_id, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (organization_id, event_id);
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (organization_id, endpoint_id, id);

CREATE TABLE webhook_attempts (
  organization_id  text NOT NULL,
  delivery_id      text NOT NULL,
  attempt          integer NOT NULL,
  started_at       timestamptz NOT NULL,
  duration_ms      integer NOT NULL,
  status_code      integer,
  error            text,
  PRIMARY KEY (organization_id, delivery_id, attempt),
  FOREIGN KEY (organization_id, delivery_id) REFERENCES webhook_deliveries (organization_id, id)
);
