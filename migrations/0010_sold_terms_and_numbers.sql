-- A purchase's snapshot now freezes each credit component's pricing terms
-- (margin, basePrice, tokensPerCredit), so a credit edited after the sale no
-- longer changes what existing purchases pay. Snapshots written before kept
-- only pricePerCredit: they take the credit's terms as of this upgrade, the
-- closest record there is, and keep them from now on.
UPDATE purchases p
SET snapshot = jsonb_set(p.snapshot, '{components}', (
  SELECT jsonb_agg(
    CASE
      WHEN component->>'type' = 'CREDIT' AND NOT component ? 'creditTerms' THEN component || jsonb_build_object(
        'creditTerms', (
          SELECT jsonb_build_object(
            'basePrice', c.base_price::text,
            'tokensPerCredit', c.tokens_per_credit::text,
            'marginPercent', c.margin_percent::text)
          FROM credits c
          WHERE c.organization_id = p.organization_id AND c.id = component->>'targetId'))
      ELSE component
    END ORDER BY position)
  FROM jsonb_array_elements(p.snapshot->'components') WITH ORDINALITY AS e(component, position)))
WHERE EXISTS (
  SELECT 1 FROM jsonb_array_elements(p.snapshot->'components') AS e(component)
  WHERE component->>'type' = 'CREDIT' AND NOT component ? 'creditTerms');

-- A unit's flatPrice is a number on the wire, as the spec types it: 0 on SLAB
-- and VOLUME units, which are priced by their tiers.
UPDATE units SET flat_price = 0 WHERE flat_price IS NULL;
ALTER TABLE units ALTER COLUMN flat_price SET DEFAULT 0, ALTER COLUMN flat_price SET NOT NULL;
