import ipaddr from "ipaddr.js";

// Which addresses the service may connect to on a customer's behalf: public
// unicast only, unless an operator allow-list (CIDRs) says otherwise. Private,
// loopback, link-local (cloud metadata 169.254.169.254), CGNAT, multicast,
// reserved and unspecified ranges are refused.
export class AddressPolicy {
  readonly #allow: [ipaddr.IPv4 | ipaddr.IPv6, number][];

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
    let ip: ipaddr.IPv4 | ipaddr.IPv6 = ipaddr.parse(address);
    if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
    for (const [range, bits] of this.#allow) if (ip.kind() === range.kind() && ip.match(range, bits)) return true;
    return ip.range() === "unicast";
  }
}
