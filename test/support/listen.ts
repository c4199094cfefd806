import type { Server } from "node:http";
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";

// Binds a test server to a free loopback port and returns the port.
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

// A loopback port free right now, for a server whose URL must be known before
// it starts (a child process, an app that advertises its own URL). Not one
// the kernel hands out itself (port 0): those come from the ephemeral range,
// which every outgoing connection of every parallel suite also draws from,
// so one could take the port between this probe and the server's listen
// (seen: EADDRINUSE with four jest workers). Below that range only other
// listeners compete, and a random pick makes two suites' picks collide
// about once in 10,000.
export async function freeLoopbackPort(): Promise<number> {
  const [ephemeralLow] = ephemeralRange();
  const low = 10_000;
  for (;;) {
    const port = low + Math.floor(Math.random() * (ephemeralLow - low));
    if (await bindable(port)) return port;
  }
}

function ephemeralRange(): [number, number] {
  try {
    const [from, to] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (from! > 10_000 + 1000 && to! > from!) return [from!, to!];
  } catch {
    // not Linux: the IANA dynamic range
  }
  return [49_152, 65_535];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}
