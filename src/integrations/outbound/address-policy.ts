import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;

const v6 = (cidr: string) => ipaddr.parseCIDR(cidr) as [ipaddr.IPv6, number];
const MAPPED = v6("::ffff:0:0/96");
const TRANSLATED = v6("::ffff:0:0:0/96"); // RFC 6145
const COMPATIBLE = v6("::/96");
const SIX_TO_FOUR = v6("2002::/16");
const NAT64 = v6("64:ff9b::/96");
const NAT64_LOCAL = v6("64:ff9b:1::/48"); // RFC 8215
const TEREDO = v6("2001::/32");

const ipv4At = (bytes: number[], offset: number) => new ipaddr.IPv4(bytes.slice(offset, offset + 4));

// RFC 6052 §2.2: the IPv4 address follows the prefix, skipping bits 64-71.
function rfc6052(bytes: number[], prefixBytes: number): ipaddr.IPv4 {
  const after = [...bytes.slice(prefixBytes, 8), ...bytes.slice(9)];
  return new ipaddr.IPv4(after.slice(0, 4));
}

// The IPv4 addresses an IPv6 address carries, i.e. where a packet to it may
// end up: a host reachable over IPv4 through a mapping, translator or tunnel.
// Each one must be acceptable for the IPv6 address to be.
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = ip.toByteArray();
  // `::` and `::1` are IPv6's own unspecified and loopback addresses.
  const compatible = ip.match(COMPATIBLE) && ip.range() === "unicast";
  if (ip.match(MAPPED) || ip.match(TRANSLATED) || compatible || ip.match(NAT64)) return [ipv4At(bytes, 12)];
  if (ip.match(SIX_TO_FOUR)) return [ipv4At(bytes, 2)];
  // The local-use prefix may be any length the operator chose: every
  // position RFC 6052 allows is taken as a possible destination.
  if (ip.match(NAT64_LOCAL)) return [rfc6052(bytes, 6), rfc6052(bytes, 7), rfc6052(bytes, 8), ipv4At(bytes, 12)];
  // Teredo: the server in bits 32-63, the client complemented in the last 32.
  if (ip.match(TEREDO)) return [ipv4At(bytes, 4), new ipaddr.IPv4(bytes.slice(12).map((b) => b ^ 0xff))];
  return [];
}

// Which addresses the service may connect to on a tenant's behalf: plain
// public unicast only (ipaddr.js's `unicast`, the range left after every
// special-purpose one: private, loopback, link-local with cloud metadata,
// CGNAT, benchmarking, documentation, multicast, reserved, unspecified), unless
// the operator's allow-list (CIDRs) names it. An IPv6 address that embeds IPv4
// addresses is judged by those, so `::ffff:127.0.0.1` is loopback, and an
// allow-list of 127.0.0.0/8 covers it too.
export class AddressPolicy {
  readonly #allow: [Address, number][];

  constructor(allowCidrs: string[] = []) {
    this.#allow = allowCidrs.map((cidr) => {
      try {
        return ipaddr.parseCIDR(cidr);
      } catch {
        throw new Error(`"${cidr}" is not a CIDR range`);
      }
    });
  }

  permits(address: string): boolean {
    return this.check(address) === undefined;
  }

  // Why an address is refused ("127.0.0.1 is loopback"), or undefined.
  check(address: string): string | undefined {
    let ip: Address;
    try {
      ip = ipaddr.parse(address);
    } catch {
      return `${address} is not an IP address`;
    }
    if (this.#allowed(ip)) return undefined;
    if (ip.kind() === "ipv6") {
      const inner = embeddedIPv4(ip as ipaddr.IPv6);
      if (inner.length) {
        const refused = inner.filter((v4) => !this.#allowed(v4) && v4.range() !== "unicast");
        if (!refused.length) return undefined;
        return `${address} embeds ${[...new Set(refused.map((v4) => `${v4.toString()} (${v4.range()})`))].join(", ")}`;
      }
    }
    const range = ip.range();
    return range === "unicast" ? undefined : `${address} is ${range}`;
  }

  #allowed(ip: Address): boolean {
    return this.#allow.some(([range, bits]) => ip.kind() === range.kind() && ip.match(range, bits));
  }
}
