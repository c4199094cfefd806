// The outbound address policy on its own: which resolved or literal
// addresses the service may connect to on a tenant's behalf.
import ipaddr from "ipaddr.js";
import { AddressPolicy } from "../src/integrations/outbound/address-policy.js";

const strict = new AddressPolicy();
const loopbackAllowed = new AddressPolicy(["127.0.0.0/8"]);

// Teredo hides the client's IPv4 address as its complement in the last 32 bits.
const teredoClient = (v4: string) => {
  const [a, b, c, d] = ipaddr.IPv4.parse(v4).octets.map((o) => 255 - o) as [number, number, number, number];
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
};

describe("address policy", () => {
  it.each([
    ["8.8.8.8", "public IPv4"],
    ["1.1.1.1", "public IPv4"],
    ["2606:4700:4700::1111", "public IPv6"],
    ["::ffff:8.8.8.8", "IPv4-mapped public"],
    ["::808:808", "IPv4-compatible public"],
    ["2002:808:808::1", "6to4 of a public address"],
    ["64:ff9b::808:808", "NAT64 of a public address"],
    [`2001:0:4136:e378:8000:63bf:${teredoClient("8.8.8.8")}`, "Teredo of a public client and server"],
  ])("permits %s (%s)", (address) => {
    expect(strict.check(address)).toBeUndefined();
    expect(strict.permits(address)).toBe(true);
  });

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.0.0.7", "private"],
    ["172.16.0.1", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "linkLocal"],
    ["100.64.0.1", "carrierGradeNat"],
    ["100.127.255.255", "carrierGradeNat"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["198.18.0.1", "reserved"],
    ["198.19.255.255", "reserved"],
    ["192.0.0.8", "reserved"],
    ["192.0.2.1", "reserved"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.255", "broadcast"],
    ["224.0.0.1", "multicast"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "linkLocal"],
    ["fc00::1", "uniqueLocal"],
    ["fd12:3456::1", "uniqueLocal"],
    ["ff02::1", "multicast"],
    ["100::1", "discard"],
    ["2001:db8::1", "reserved"],
    ["2001:2::1", "benchmarking"],
    // IPv4 embedded in IPv6: classified by the IPv4 address inside.
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["::ffff:7f00:1", "127.0.0.1"],
    ["::ffff:a9fe:a9fe", "169.254.169.254"],
    ["::127.0.0.1", "127.0.0.1"],
    ["::7f00:1", "127.0.0.1"],
    ["::a9fe:a9fe", "169.254.169.254"],
    ["::a00:7", "10.0.0.7"],
    ["::ffff:0:7f00:1", "127.0.0.1"],
    ["2002:7f00:1::", "127.0.0.1"],
    ["2002:a9fe:a9fe::1", "169.254.169.254"],
    ["2002:a00:7:1::1", "10.0.0.7"],
    ["64:ff9b::7f00:1", "127.0.0.1"],
    ["64:ff9b::a9fe:a9fe", "169.254.169.254"],
    ["64:ff9b:1::a9fe:a9fe", "169.254.169.254"],
    ["64:ff9b:1:7f00:0:100::", "127.0.0.1"],
    [`2001:0:4136:e378:8000:63bf:${teredoClient("127.0.0.1")}`, "127.0.0.1"],
    [`2001:0:4136:e378:8000:63bf:${teredoClient("169.254.169.254")}`, "169.254.169.254"],
    [`2001:0:a00:7:8000:63bf:${teredoClient("8.8.8.8")}`, "10.0.0.7"],
  ])("refuses %s, naming %s", (address, named) => {
    expect(strict.permits(address)).toBe(false);
    expect(strict.check(address)).toContain(named);
  });

  it("matches the allow-list against the embedded IPv4 address too", () => {
    for (const address of ["127.0.0.1", "::ffff:127.0.0.1", "::127.0.0.1", "2002:7f00:1::", "64:ff9b::7f00:1", `2001:0:4136:e378:8000:63bf:${teredoClient("127.0.0.1")}`])
      expect([address, loopbackAllowed.check(address)]).toEqual([address, undefined]);
    for (const address of ["::1", "10.0.0.7", "::ffff:a9fe:a9fe", "2002:a9fe:a9fe::"]) expect([address, loopbackAllowed.permits(address)]).toEqual([address, false]);
  });

  it("allows IPv6 ranges listed as IPv6", () => {
    const policy = new AddressPolicy(["::1/128", "fd00::/8"]);
    expect(policy.permits("::1")).toBe(true);
    expect(policy.permits("fd12::1")).toBe(true);
    expect(policy.permits("127.0.0.1")).toBe(false);
  });

  it("refuses an allow-list entry that is not a CIDR range", () => {
    expect(() => new AddressPolicy(["localhost"])).toThrow('"localhost" is not a CIDR range');
  });
});
