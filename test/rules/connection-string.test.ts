/**
 * Connection strings with libpq's meaning (src/db/ConnectionString.ts) and the
 * session a host must offer (src/db/HostRouting.ts `matches`). Pure.
 */
import { describe, expect, it } from "vitest"
import { describeConnectionString, parseConnectionString } from "../../src/db/ConnectionString.ts"
import { matches } from "../../src/db/HostRouting.ts"

describe("a multi-host DATABASE_URL", () => {
  it("names each host in order, the session it wants, and hands the driver one host at a time", () => {
    const parsed = parseConnectionString(
      "postgres://postgres:s%40cret@127.0.0.1:6001,127.0.0.1:6002/billing?target_session_attrs=read-write&sslmode=disable"
    )
    expect(parsed.hosts).toEqual([{ host: "127.0.0.1", port: 6001 }, { host: "127.0.0.1", port: 6002 }])
    expect(parsed.targetSessionAttrs).toBe("read-write")
    expect(parsed.database).toBe("billing")
    expect(parsed.connectTimeoutMs).toBe(undefined)
    // libpq's connect_timeout, in seconds, at least 2.
    expect(parseConnectionString("postgres://h1,h2/db?connect_timeout=7").connectTimeoutMs).toBe(7000)
    expect(parseConnectionString("postgres://h1,h2/db?connect_timeout=1").connectTimeoutMs).toBe(2000)
    expect(parsed.forHost(parsed.hosts[1]!)).toBe("postgres://postgres:s%40cret@127.0.0.1:6002/billing?sslmode=disable")
    // What node-postgres's own parser reads from the one-host URI: the right host, port, user and password.
    expect(new URL(parsed.forHost(parsed.hosts[0]!)).port).toBe("6001")
  })

  it("takes IPv6 hosts, hosts without a port, a password with @ and the host and port parameters", () => {
    const parsed = parseConnectionString("postgresql://u:p@ss@[::1]:7000,db.example,:6543/app")
    expect(parsed.hosts).toEqual([
      { host: "::1", port: 7000 },
      { host: "db.example", port: 5432 },
      { host: "localhost", port: 6543 }
    ])
    expect(parsed.forHost(parsed.hosts[0]!)).toBe("postgresql://u:p@ss@[::1]:7000/app")
    const byParameter = parseConnectionString("postgres:///app?host=a,b&port=1,2&target_session_attrs=primary")
    expect(byParameter.hosts).toEqual([{ host: "a", port: 1 }, { host: "b", port: 2 }])
    expect(byParameter.forHost(byParameter.hosts[1]!)).toBe("postgres://b:2/app")
  })

  it("hands a plain one-host URL to the driver exactly as written", () => {
    const uri = "postgres://postgres@127.0.0.1:5432/test?billing_shared_session=1"
    const parsed = parseConnectionString(uri)
    expect(parsed.hosts).toEqual([{ host: "127.0.0.1", port: 5432 }])
    expect(parsed.targetSessionAttrs).toBe("any")
    expect(parsed.forHost(parsed.hosts[0]!)).toBe(uri)
  })

  it("refuses what it cannot honour, naming it and never the password", () => {
    const refused = (uri: string) => {
      try {
        parseConnectionString(uri)
      } catch (error) {
        return (error as Error).message
      }
      throw new Error(`accepted ${uri}`)
    }
    expect(refused("postgres://u:hunter2@h:1/d?target_session_attrs=master")).toMatch(/target_session_attrs "master".*read-write/)
    expect(refused("postgres://u:hunter2@h:99999/d")).toMatch(/port "99999"/)
    expect(refused("postgres://u:hunter2@h:1,h:2/d?load_balance_hosts=random")).toMatch(/load_balance_hosts "random"/)
    // What to write instead, whatever is wrong (issue 37): another database's URL, no URL, nothing, a host that is none.
    expect(refused("mysql://u:hunter2@h/d")).toBe(
      "DATABASE_URL is a mysql:// URL: billing runs on PostgreSQL only; give postgres://user@host:5432/database, " +
        "or unset it for the embedded database"
    )
    expect(refused("not a url")).toMatch(/^DATABASE_URL is not a PostgreSQL URI: give postgres:\/\/user@host:5432\/database/)
    expect(refused("")).toMatch(/^DATABASE_URL is set but empty/)
    expect(refused("jo:hunter2@h/d")).not.toContain("jo")
    expect(refused("postgres://u:hunter2@not a host/d")).toMatch(/^host "not a host" in DATABASE_URL is not a host name/)
    expect(refused("postgres:///d?host=a,b%20c")).toMatch(/host "b c"/)
    for (const uri of ["mysql://u:hunter2@h/d", "postgres://u:hunter2@not a host/d", "hunter2", "jo:hunter2@h/d"]) expect(refused(uri)).not.toContain("hunter2")
    // A socket folder and IPv6 are hosts.
    expect(parseConnectionString("postgres://u@%2Fvar%2Frun%2Fpostgresql/d").hosts).toEqual([{ host: "/var/run/postgresql", port: 5432 }])
    expect(parseConnectionString("postgres://u@[::1]:6000/d").hosts).toEqual([{ host: "::1", port: 6000 }])
    expect(() => parseConnectionString("mysql://h/d", "DATABASE_READ_URL")).toThrow(/^DATABASE_READ_URL is a mysql:\/\/ URL/)
    expect(refused("postgres:///d?host=a,b,c&port=1,2")).toMatch(/3 hosts but 2 ports/)
    for (const uri of ["postgres://u:hunter2@h:1/d?target_session_attrs=x", "postgres://u:hunter2@h:0/d"]) {
      expect(refused(uri)).not.toContain("hunter2")
    }
  })

  it("is described by its hosts and database, never its credentials", () => {
    expect(describeConnectionString("postgres://u:hunter2@10.0.0.1:6001,10.0.0.2:6002/billing?target_session_attrs=read-write"))
      .toBe("10.0.0.1:6001,10.0.0.2:6002/billing")
    expect(describeConnectionString("postgres://u:hunter2@h/d?target_session_attrs=x")).not.toContain("hunter2")
  })
})

describe("the session a host offers", () => {
  const primary = { inRecovery: false, readOnly: false }
  const standby = { inRecovery: true, readOnly: true }
  const readOnlyPrimary = { inRecovery: false, readOnly: true }

  it("follows libpq's target_session_attrs", () => {
    expect(matches("read-write", primary)).toBe(true)
    expect(matches("read-write", standby)).toBe(false)
    expect(matches("read-write", readOnlyPrimary)).toBe(false)
    expect(matches("read-only", readOnlyPrimary)).toBe(true)
    expect(matches("read-only", primary)).toBe(false)
    expect(matches("primary", readOnlyPrimary)).toBe(true)
    expect(matches("primary", standby)).toBe(false)
    expect(matches("standby", standby)).toBe(true)
    expect(matches("standby", primary)).toBe(false)
    for (const state of [primary, standby, readOnlyPrimary]) {
      expect(matches("any", state)).toBe(true)
      expect(matches("prefer-standby", state)).toBe(true)
    }
  })
})
