import type { Command } from "commander"
import { listFooter, nextCursorOf, limitOption } from "../lists.ts"
import { Effect } from "effect"
import { toPage } from "../../src/http/Pagination.ts"
import { Member, MemberCreate, Members, MemberUpdate } from "../../src/members/Members.ts"
import { Details, Table } from "../ui/Table.tsx"
import { decodeInput, encode, organizationOf, runnerOn, withOrg } from "../run.ts"
import { BillingCommandServices } from "../commandServices.ts"
import { CustomerId, type OrganizationId } from "../../src/ids.ts"

const run = runnerOn(BillingCommandServices)

const memberJson = encode(Member)

const presentOne = (title: string) => ({
  json: (member: Member) => ({ member: memberJson(member) }),
  view: (member: Member) => (
    <Details
      title={title}
      fields={[["id", member.id], ["customer", member.customerId], ["email", member.email], ["name", member.name ?? "-"], ["role", member.role]]}
    />
  )
})

const withMembers = <A, E>(options: { readonly org?: string }, f: (members: Members, organizationId: OrganizationId) => Effect.Effect<A, E>) =>
  Effect.flatMap(organizationOf(options), (organizationId) => Effect.flatMap(Members, (members) => f(members, organizationId)))

interface MemberOptions {
  readonly json?: boolean
  readonly org?: string
  readonly email?: string
  readonly name?: string
  readonly role?: string
}

const fieldsOf = (options: MemberOptions) => ({
  ...(options.email !== undefined ? { email: options.email } : {}),
  ...(options.name !== undefined ? { name: options.name } : {}),
  ...(options.role !== undefined ? { role: options.role } : {})
})

export const registerMember = (program: Command) => {
  const member = program.command("member").description("members of a customer")

  withOrg(member.command("list").description("list a customer's members").argument("<customerId>"))
    .option(...limitOption)
    .option("--cursor <id>", "id of the last row of the previous page")
    .action((customerId: string, options: { json?: boolean; org?: string; limit?: number; cursor?: string }) =>
      run(options, withMembers(options, (members, org) => members.list(org, CustomerId.make(customerId), toPage(options))), {
        json: (list) => ({ members: list.map(memberJson), nextCursor: nextCursorOf(list, options) }),
        view: (list) => (
          <Table
            columns={[
              { header: "ID", value: (m) => m.id },
              { header: "EMAIL", value: (m) => m.email },
              { header: "NAME", value: (m) => m.name ?? "-" },
              { header: "ROLE", value: (m) => m.role }
            ]}
            rows={list}
            footer={listFooter(`${list.length} member(s)`, list, options)}
          />
        )
      }))

  withOrg(member.command("add").description("add a member to a customer").argument("<customerId>"))
    .requiredOption("--email <email>")
    .option("--name <name>")
    .option("--role <role>", "OWNER, ADMIN or MEMBER (default)")
    .action((customerId: string, options: MemberOptions) =>
      run(
        options,
        withMembers(options, (members, org) =>
          Effect.flatMap(decodeInput(MemberCreate, fieldsOf(options)), (input) => members.create(org, CustomerId.make(customerId), input))),
        presentOne("Member added")
      ))

  withOrg(member.command("update").description("change a member").argument("<customerId>").argument("<memberId>"))
    .option("--email <email>")
    .option("--name <name>")
    .option("--role <role>", "OWNER, ADMIN or MEMBER")
    .action((customerId: string, memberId: string, options: MemberOptions) =>
      run(
        options,
        withMembers(options, (members, org) =>
          Effect.flatMap(decodeInput(MemberUpdate, fieldsOf(options)), (patch) =>
            members.update(org, CustomerId.make(customerId), memberId, patch))),
        presentOne("Member updated")
      ))

  withOrg(member.command("remove").description("remove a member").argument("<customerId>").argument("<memberId>"))
    .action((customerId: string, memberId: string, options: { json?: boolean; org?: string }) =>
      run(options, withMembers(options, (members, org) => members.remove(org, CustomerId.make(customerId), memberId)), presentOne("Member removed")))
}
