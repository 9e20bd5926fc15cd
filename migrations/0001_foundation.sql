-- Organisations (workspaces), their API keys, their model catalogue and customers.
-- Every tenant table leads its keys with organization_id (see DESIGN.md §2).

CREATE TABLE organizations (
  id                       text PRIMARY KEY,
  name                     text NOT NULL,
  currency_code            text NOT NULL DEFAULT 'USD',
  reserved_wallet_enabled  boolean NOT NULL DEFAULT false,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  name             text NOT NULL,
  -- SHA-256 of the whole key; the key itself is shown once and never stored.
  key_hash         text NOT NULL,
  key_prefix       text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz,
  revoked_at       timestamptz,
  last_used_at     timestamptz,
  PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (key_hash);

-- Rates are USD per million tokens. A null cache rate means the model has none.
CREATE TABLE models (
  organization_id   text NOT NULL REFERENCES organizations (id),
  id                text NOT NULL,
  name              text NOT NULL,
  input_rate        numeric NOT NULL CHECK (input_rate >= 0),
  output_rate       numeric NOT NULL CHECK (output_rate >= 0),
  cache_read_rate   numeric CHECK (cache_read_rate >= 0),
  cache_write_rate  numeric CHECK (cache_write_rate >= 0),
  enabled           boolean NOT NULL DEFAULT true,
  built_in          boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);

CREATE TABLE customers (
  organization_id  text NOT NULL REFERENCES organizations (id),
  id               text NOT NULL,
  external_id      text,
  slug             text NOT NULL,
  name             text NOT NULL,
  email            text NOT NULL,
  description      text,
  website          text,
  phone            text,
  legal_name       text,
  address_line1    text,
  city             text,
  state            text,
  country          text,
  pincode          text,
  tax_id           text,
  currency_code    text NOT NULL,
  archived_at      timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, id)
);
-- externalId is unique among active customers only: an archived one's may be reused.
CREATE UNIQUE INDEX customers_active_external_id
  ON customers (organization_id, external_id)
  WHERE archived_at IS NULL AND external_id IS NOT NULL;
