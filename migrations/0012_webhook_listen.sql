-- `billing listen --forward-to URL`: a listen session is a webhook endpoint of its
-- own (so the outbox records its events and deliveries exactly as for any endpoint),
-- marked by listen_until. The session's process forwards its deliveries itself and
-- pushes listen_until forward while it runs; the worker never claims them, and once
-- listen_until has passed (the session ended or its process died) no new event
-- gets a delivery for it. NULL: an ordinary endpoint.
ALTER TABLE webhook_endpoints ADD COLUMN listen_until timestamptz;
