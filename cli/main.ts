/**
 * `billing`: the operator CLI. Commander parses; Ink shows; every command calls
 * the same services as the API (never the API itself). See DESIGN.md §8 for the
 * stable forms that scripts rely on.
 */
import { Command } from "commander"
import { registerAdjust } from "./commands/adjust.tsx"
import { registerBalance } from "./commands/balance.tsx"
import { registerCycle } from "./commands/cycle.tsx"
import { registerInvoice } from "./commands/invoice.tsx"
import { registerMember } from "./commands/member.tsx"
import { registerPortal } from "./commands/portal.tsx"
import { registerPurchase } from "./commands/purchase.tsx"
import { registerTax } from "./commands/tax.tsx"
import { registerWallet } from "./commands/wallet.tsx"
import { registerCustomer } from "./commands/customer.tsx"
import { registerCredit } from "./commands/credit.tsx"
import { registerModel } from "./commands/model.tsx"
import { registerOutcome } from "./commands/outcome.tsx"
import { registerKey, registerOrg } from "./commands/org.tsx"
import { registerServe } from "./commands/serve.tsx"
import { registerSignal } from "./commands/signal.tsx"
import { registerStatus } from "./commands/status.tsx"
import { registerUsage } from "./commands/usage.tsx"
import { registerWorker } from "./commands/worker.tsx"
import { registerListen } from "./commands/listen.tsx"
import { registerWebhook } from "./commands/webhook.tsx"
import { registerToolkit } from "./commands/toolkit.tsx"
import { registerUnit } from "./commands/unit.tsx"
import { registerComposite } from "./commands/composite.tsx"
import { registerPlan } from "./commands/plan.tsx"

const program = new Command("billing")
  .description("usage metering and billing for AI products")
  .showHelpAfterError()

registerServe(program)
registerWorker(program)
registerStatus(program)
registerOrg(program)
registerKey(program)
registerCustomer(program)
registerPurchase(program)
registerCycle(program)
registerBalance(program)
registerAdjust(program)
registerWallet(program)
registerInvoice(program)
registerTax(program)
registerMember(program)
registerPortal(program)
registerSignal(program)
registerUsage(program)
registerModel(program)
registerCredit(program)
registerOutcome(program)
registerWebhook(program)
registerListen(program)
registerToolkit(program)
registerUnit(program)
registerComposite(program)
registerPlan(program)

await program.parseAsync(process.argv)
