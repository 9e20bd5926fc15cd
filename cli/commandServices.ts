/**
 * Services that several command modules call (cli/run.ts `runnerOn`): a
 * billing command builds the billing engine, not the signal pipeline, the
 * webhook sender or the customer's pages.
 */
export { BillingLive as BillingCommandServices } from "../src/app/BillingLive.ts"
