-- The entitlement catalogue and plans. Records are archived (is_active = false), never deleted.
-- A model bundle is a small value object kept as jsonb:
--   [{"modelId", "averageTokensPerLLMCall", "input", "output", "cache", "cacheWrite"}]
-- with every number written as a decimal string, so nothing passes through a float.

CREATE TABLE credits (
  organization_id    text NOT NULL REFERENCES organizations (id),
  id                 text NOT NULL,
  name               text NOT NULL,
  agent_key          text NOT NULL,
  description        text,
  margin_percent     numeric NOT NULL CHECK (margin_percent >= -100),
  model_bundle       jsonb NOT NULL,
  tokens_per_credit  numeric NOT NULL,
  base_price         numeric NOT NULL,
  price_per_credit   numeric NOT NULL,
  is_active          boolean NOT NULL DEFAULT true,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX credits_active_agent_key ON credits (organization_id, agent_key) WHERE is_active;

CREATE TABLE outcomes (
  organization_id    text NOT NULL REFERENCES organizations (id),
  id                 text NOT NULL,
  name               text NOT NULL,
  agent_key          text NOT NULL,
  description        text,
  margin_percent     numeric NOT NULL CHECK (margin_percent >= -100),
  base_price         numeric NOT NULL,
  price_per_outcome  numeric NOT NULL,
  is_active          boolean NOT NULL DEFAULT true,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX outcomes_active_agent_key ON outcomes (organization_id, agent_key) WHERE is_active;

-- A step dropped from its outcome by a PATCH is kept with removed_at set, so that
-- usage rows recorded against it still resolve.
CREATE TABLE outcome_steps (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  outcome_id       text NOT NULL,
  name             text NOT NULL,
  agent_key        text NOT NULL,
  position         integer NOT NULL,
  model_bundle     jsonb NOT NULL,
  base_price       numeric NOT NULL,
  removed_at       timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, outcome_id) REFERENCES outcomes (organization_id, id)
);
CREATE INDEX outcome_steps_by_outcome ON outcome_steps (organization_id, outcome_id, position);
CREATE INDEX outcome_steps_by_agent_key ON outcome_steps (organization_id, agent_key) WHERE removed_at IS NULL;

-- tiers: [{"id", "upTo" (decimal string or null), "price" (decimal string), "order"}], ascending.
CREATE TABLE units (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  name             text NOT NULL,
  agent_key        text NOT NULL,
  description      text,
  pricing_type     text NOT NULL CHECK (pricing_type IN ('FLAT', 'SLAB', 'VOLUME')),
  flat_price       numeric,
  tiers            jsonb NOT NULL DEFAULT '[]',
  is_active        boolean NOT NULL DEFAULT true,
  created_by_name  text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX units_active_agent_key ON units (organization_id, agent_key) WHERE is_active;

CREATE TABLE composites (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  name             text NOT NULL,
  ref_id           text NOT NULL,
  description      text,
  price            numeric NOT NULL CHECK (price >= 0 AND price <= 10000000),
  is_active        boolean NOT NULL DEFAULT true,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX composites_active_ref_id ON composites (organization_id, ref_id) WHERE is_active;

-- What a composite bills together: exactly one of credit_id, outcome_id, unit_id per row.
CREATE TABLE composite_entitlements (
  organization_id  text NOT NULL,
  composite_id     text NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('CREDIT', 'OUTCOME', 'UNIT')),
  target_id        text NOT NULL,
  position         integer NOT NULL,
  PRIMARY KEY (organization_id, composite_id, kind, target_id),
  FOREIGN KEY (organization_id, composite_id) REFERENCES composites (organization_id, id)
);

CREATE TABLE plans (
  organization_id        text NOT NULL REFERENCES organizations (id),
  id                     text NOT NULL,
  name                   text NOT NULL,
  description            text NOT NULL DEFAULT '',
  billing_cycle          text NOT NULL CHECK (billing_cycle IN ('MONTHLY')),
  price_adjustment       numeric NOT NULL DEFAULT 0,
  wallet_funded_arrear   boolean NOT NULL DEFAULT false,
  currency_code          text NOT NULL,
  is_active              boolean NOT NULL DEFAULT true,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

-- A PATCH that sends entitlements replaces the plan's components; purchases keep
-- their own snapshot, so nothing that was sold depends on these rows.
CREATE TABLE plan_components (
  organization_id  text NOT NULL,
  id               text NOT NULL,
  plan_id          text NOT NULL,
  position         integer NOT NULL,
  type             text NOT NULL CHECK (type IN ('WALLET', 'CREDIT', 'OUTCOME', 'UNIT', 'PRICING_METRIC')),
  billing_mode     text NOT NULL CHECK (billing_mode IN ('ADVANCE', 'ARREAR')),
  credit_id        text,
  outcome_id       text,
  unit_id          text,
  composite_id     text,
  quantity         numeric,
  amount           numeric,
  rollover         boolean NOT NULL DEFAULT false,
  PRIMARY KEY (organization_id, id),
  FOREIGN KEY (organization_id, plan_id) REFERENCES plans (organization_id, id),
  FOREIGN KEY (organization_id, credit_id) REFERENCES credits (organization_id, id),
  FOREIGN KEY (organization_id, outcome_id) REFERENCES outcomes (organization_id, id),
  FOREIGN KEY (organization_id, unit_id) REFERENCES units (organization_id, id),
  FOREIGN KEY (organization_id, composite_id) REFERENCES composites (organization_id, id)
);
CREATE INDEX plan_components_by_plan ON plan_components (organization_id, plan_id, position);
