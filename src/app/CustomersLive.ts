/**
 * Customers' one open port, filled: `Customers` calls `CustomerArrivals` up
 * through the floors, signals answer it (docs/architecture.md "Floors"). Every
 * layer built on `Customers.Default` leaves the port open until it goes
 * through `withArrivalsAnswered`. Its own module, so a CLI command that needs
 * customers alone loads neither billing nor the signal pipeline.
 */
import { Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { RequeueOnArrivalLive } from "../signals/Requeue.ts"

/** Customers' arrivals answered by signals (src/signals/Requeue.ts). */
export const withArrivalsAnswered = Layer.provide(RequeueOnArrivalLive)

/** Customers with signals answering its arrivals: what a door that needs Customers alone builds. */
export const CustomersLive = withArrivalsAnswered(Customers.Default)
