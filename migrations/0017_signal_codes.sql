-- Refused usage told (issue 27, docs/signals.md "Looking a signal up",
-- docs/webhooks.md `signal.refused`): a signal the worker refused or holds
-- keeps the machine code of its reason beside its status and message, the
-- code every error answer carries (`statusDetail.code`, docs/api.md "Error
-- codes"): the snake_case of the refusal's name (`out_of_allowance`, ...).
ALTER TABLE signals ADD COLUMN error_code text;

-- Rows ended before the code was kept: their code from what was recorded.
-- Each status but 422 has one refusal; the 422s are told apart by the
-- message each refusal writes (src/pricing/meters/).
UPDATE signals SET error_code = CASE
    WHEN status = 'PENDING' THEN 'customer_not_found'
    WHEN error_status = 404 THEN 'customer_not_found'
    WHEN error_status = 409 THEN 'customer_archived'
    WHEN error_status = 400 THEN 'invalid_usage'
    WHEN error_status = 500 THEN 'internal_error'
    WHEN error_message LIKE 'Out of allowance:%' THEN 'out_of_allowance'
    WHEN error_message LIKE 'model % is not enabled in this workspace' THEN 'model_not_enabled'
    WHEN error_message LIKE '%has no active plan' THEN 'no_active_plan'
    WHEN error_message LIKE 'member % does not belong to customer %' THEN 'unknown_member'
    WHEN error_message LIKE '%not sold on the customer''s plan%' OR error_message LIKE '%is not on the customer''s plan'
      THEN 'not_on_plan'
    ELSE 'unknown_target'
  END
WHERE status IN ('PENDING', 'FAILED') AND error_status IS NOT NULL;

-- A `signal.refused` event is about a signal whose customer may not exist
-- (a customerId no customer has): its customer is then unknown.
ALTER TABLE webhook_events ALTER COLUMN customer_id DROP NOT NULL;
