/**
 * Distinct (organisation, key) pairs in key order, as two parallel arrays for `unnest`: the one
 * way the drain, the cycle job and the ledger pass sets of keys to a statement. Sorted, so
 * statements that lock what they find lock in the same order wherever they run.
 */

/** A key within its organisation, as the maps of a batch's rows key them. */
export const scoped = (organizationId: string, key: string) => `${organizationId}/${key}`

export interface KeyPairs {
  readonly size: number
  readonly organizations: ReadonlyArray<string>
  readonly keys: ReadonlyArray<string>
}

export const keyPairs = (items: Iterable<readonly [string, string]>): KeyPairs => {
  const unique = new Map<string, readonly [string, string]>()
  for (const item of items) unique.set(scoped(item[0], item[1]), item)
  // The map's keys sorted, each built once: a comparator that built them allocated two strings a comparison.
  const sorted = [...unique.keys()].sort().map((key) => unique.get(key)!)
  return { size: sorted.length, organizations: sorted.map((pair) => pair[0]), keys: sorted.map((pair) => pair[1]) }
}
