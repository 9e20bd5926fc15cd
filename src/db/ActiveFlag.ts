/**
 * The archive and unarchive doors of a catalogue service. Nothing in the catalogue is deleted:
 * archiving clears `is_active` and unarchiving sets it, both through the service's own
 * `setActive`, which decides what a repeat answers and which unique index makes an unarchive a 409.
 */
import { Effect } from "effect"
import type { OrganizationId } from "../ids.ts"

export const archiveDoors = <A, E, R>(
  service: string,
  setActive: (organizationId: OrganizationId, id: string, active: boolean) => Effect.Effect<A, E, R>
) => ({
  archive: Effect.fn(`${service}.archive`)((organizationId: OrganizationId, id: string) => setActive(organizationId, id, false)),
  unarchive: Effect.fn(`${service}.unarchive`)((organizationId: OrganizationId, id: string) => setActive(organizationId, id, true))
})
