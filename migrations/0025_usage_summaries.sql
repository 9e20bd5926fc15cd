-- Usage summaries (GET /usage/summary, src/usage/UsageSummary.ts; docs/signals.md
-- "Usage summaries"). A summary reads the rows whose usage happened in its range,
-- `coalesce(occurred_at, created_at)`, and the log is partitioned by `created_at`:
-- the months before the range are left out when the statement is planned, but
-- every month after it must be read too (a late row of the range is written
-- later), so a month of last year read the whole year since, by the customer's
-- index, row by row (docs/benchmarks.md "Usage summaries").
--
-- A customer's rows by the moment their usage happened: a range reads its own
-- rows, and one probe of each later month.
CREATE INDEX usage_log_by_customer_moment
  ON usage_log (organization_id, customer_id, (coalesce(occurred_at, created_at)));
-- An organisation's summary reads every customer's rows of its range: the same
-- moments by block (BRIN: a few kilobytes a month, next to nothing per insert),
-- so that the later months' blocks holding nothing of the range are skipped.
-- Rows are written in time order, moments a little before (late rows, at most
-- the late-usage window), which is what a block range summary needs.
CREATE INDEX usage_log_moment
  ON usage_log USING brin ((coalesce(occurred_at, created_at))) WITH (autosummarize = on);
