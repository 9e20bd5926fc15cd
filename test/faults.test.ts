/**
 * src/db/Faults.ts: which failures pass (retry the work whole) and which are
 * the database refusing data (isolate the row). Pure, no database.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Duration, Effect, Schedule } from "effect"
import Pg from "pg"
import { describe, expect, it } from "vitest"
import { faultOf, isTransientError, transientBackoff } from "../src/db/Faults.ts"

/** A server error as node-postgres reports it: its SQLSTATE in `code`. */
const serverError = (code: string, message = "refused") => Object.assign(new Pg.DatabaseError(message, 0, "error"), { code })

/** A socket error as node reports it. */
const socketError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code })

const asSqlError = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

describe("a database failure", () => {
  it.each([
    ["08006", "connection failure"],
    ["08003", "connection does not exist"],
    ["57P01", "terminating connection due to administrator command"],
    ["57P02", "crash shutdown"],
    ["57P03", "the database system is starting up"],
    ["53300", "too many connections"],
    ["40001", "could not serialize access"],
    ["40P01", "deadlock detected"]
  ])("with SQLSTATE %s (%s) is transient", (code, message) => {
    expect(isTransientError(asSqlError(serverError(code, message)))).toBe(true)
  })

  it.each([
    ["22023", "invalid parameter value"],
    ["22003", "numeric value out of range"],
    ["23505", "duplicate key value"],
    ["23503", "foreign key violation"],
    ["P0001", "raise exception"],
    ["42703", "column does not exist"],
    ["57014", "canceling statement due to statement timeout"],
    // A refusal whose text happens to read like a lost connection is still a refusal: the SQLSTATE decides.
    ["22023", "connection terminated by the customer's rule"]
  ])("with SQLSTATE %s (%s) is the data's", (code, message) => {
    expect(isTransientError(asSqlError(serverError(code, message)))).toBe(false)
  })

  it.each(["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH"])("with socket error %s is transient", (code) => {
    expect(isTransientError(asSqlError(socketError(code)))).toBe(true)
  })

  it.each([
    "Connection terminated unexpectedly",
    "Connection terminated",
    "Client has encountered a connection error and is not queryable",
    "timeout exceeded when trying to connect",
    "Connection timed out"
  ])("from the driver without SQLSTATE, %j, is transient", (message) => {
    expect(isTransientError(asSqlError(new Error(message)))).toBe(true)
  })

  it("refused on every address of the host (an AggregateError) is transient", () => {
    const refused = Object.assign(new AggregateError([socketError("ECONNREFUSED"), socketError("ECONNREFUSED")], ""), {
      code: "ECONNREFUSED"
    })
    expect(isTransientError(asSqlError(refused))).toBe(true)
    expect(isTransientError(asSqlError(new AggregateError([socketError("ECONNREFUSED")], "")))).toBe(true)
  })

  it("that is no database error at all (a bug, a row that does not decode) is not transient", () => {
    expect(isTransientError(new TypeError("Cannot read properties of undefined"))).toBe(false)
    expect(isTransientError(asSqlError(new Error("something else")))).toBe(false)
    expect(isTransientError(undefined)).toBe(false)
    expect(isTransientError("ECONNRESET")).toBe(false)
  })
})

describe("the fault of a failed effect", () => {
  it("is Transient when a lost connection is in it, as a failure or as a defect", () => {
    expect(faultOf(Cause.fail(asSqlError(serverError("57P01"))))).toBe("Transient")
    expect(faultOf(Cause.die(asSqlError(socketError("ECONNRESET"))))).toBe("Transient")
  })

  it("is Transient when a refused statement was followed by a ROLLBACK the lost connection failed", () => {
    const cause = Cause.sequential(
      Cause.die(asSqlError(serverError("22023"))),
      Cause.die(asSqlError(new Error("Client has encountered a connection error and is not queryable")))
    )
    expect(faultOf(cause)).toBe("Transient")
  })

  it("is Data when the database refused a row, or for anything else", () => {
    expect(faultOf(Cause.die(asSqlError(serverError("23505"))))).toBe("Data")
    expect(faultOf(Cause.die(new RangeError("bad")))).toBe("Data")
    expect(faultOf(Cause.interrupt("x" as never))).toBe("Data")
  })
})

describe("the back-off between tries of transient work", () => {
  it("starts at 50 ms, doubles, and never waits more than 500 ms", async () => {
    const delays = await Effect.runPromise(
      Schedule.delays(transientBackoff).pipe(
        (schedule) => Schedule.run(schedule, Date.now(), Array.from({ length: 8 }, () => undefined)),
        Effect.map((chunk) => [...chunk].map((delay) => Duration.toMillis(delay)))
      )
    )
    expect(delays).toEqual([50, 100, 200, 400, 500, 500, 500, 500])
  })
})
