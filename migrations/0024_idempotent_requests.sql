-- The `Idempotency-Key` header on every POST of the API (docs/api.md
-- "Idempotency-Key on every POST"; src/http/IdempotencyKeyHeader.ts,
-- src/idempotency/KeyedRequests.ts). One row per key of an organisation: the
-- request it was first used with (its fingerprint: method, path and body), and
-- once that request has ended, the answer it got, which a repeat within 24 hours
-- is answered with again.
--
-- The row is claimed (inserted, committed) before the request runs, so a
-- concurrent repeat finds it and waits; `response_status` NULL is a request
-- still in flight. `claim_token` names the claim: only its holder completes or
-- releases it, and a claim abandoned by a process that died is taken over
-- after a lease (`claimed_at`). `created_at` is when the key was first used:
-- 24 hours on, the key is free again (expired on read) and the worker's
-- history job deletes the row.
CREATE TABLE idempotent_requests (
  organization_id   text NOT NULL REFERENCES organizations (id),
  idempotency_key   text NOT NULL,
  fingerprint       text NOT NULL,
  method            text NOT NULL,
  path              text NOT NULL,
  claim_token       text NOT NULL,
  created_at        timestamptz NOT NULL,
  claimed_at        timestamptz NOT NULL,
  response_status   integer,
  response_headers  jsonb,
  response_body     text,
  completed_at      timestamptz,
  PRIMARY KEY (organization_id, idempotency_key),
  CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  CHECK ((response_status IS NULL) = (response_body IS NULL)),
  CHECK ((response_status IS NULL) = (completed_at IS NULL))
);

-- The history job's purge of keys older than 24 hours.
CREATE INDEX idempotent_requests_by_age ON idempotent_requests (created_at);
