// A connection that PostgreSQL loses while it is still starting up: the
// driver's first statement on every new connection reads the array types
// (postgres.js fetch_types), and a database crash lands there whenever a
// connection was being opened at that moment. The call that opened it fails
// as unavailable, or goes through on the next connection; nothing rejects
// where no caller can catch it, which would end the process (a runtime
// thread of `serve`: issue 19 item 6). The losses are staged by a proxy in
// front of the test server, at the moment the types query arrives.
import { createServer, connect, type Server, type Socket } from "node:net";
import { StoreUnavailableError } from "../src/store/errors.js";
import { pg } from "../src/store/postgres/errors.js";
import { openPostgres, type Sql } from "../src/store/postgres/open.js";
import { freeLoopbackPort } from "./support/listen.js";
import { createTestDatabase, type TestDatabase } from "./support/postgres.js";

// What the proxy does to the first connection that sends the types query.
type Loss =
  // Closes it as a backend does at an immediate shutdown (no error message),
  // and refuses connections from then on, as a stopped server does.
  | "closed, then refused"
  // Answers with the error pg_terminate_backend sends, then closes it.
  | "terminated";

const TYPES_QUERY = "pg_catalog.pg_type";

// The error message of a backend terminated by pg_terminate_backend.
function terminatedMessage(): Buffer {
  const field = (code: string, value: string) => Buffer.from(`${code}${value}\0`);
  const body = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", "57P01"),
    field("M", "terminating connection due to administrator command"),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write("E");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

interface Proxy {
  url: string;
  // Accepts connections again (after "closed, then refused").
  reopen(): Promise<void>;
  // True once the loss was staged.
  staged(): boolean;
  close(): Promise<void>;
}

async function startProxy(target: string, loss: Loss): Promise<Proxy> {
  const upstream = new URL(target);
  const port = await freeLoopbackPort();
  const sockets = new Set<Socket>();
  let armed = true;
  let server: Server;
  const listen = async () => {
    server = createServer((client) => {
      const backend = connect(Number(upstream.port || 5432), upstream.hostname);
      sockets.add(client).add(backend);
      const drop = () => {
        client.destroy();
        backend.destroy();
      };
      client.on("error", drop).on("close", drop);
      backend.on("error", drop).on("close", drop);
      backend.on("data", (data: Buffer) => client.write(data));
      client.on("data", (data: Buffer) => {
        if (!armed || !data.includes(TYPES_QUERY)) return void backend.write(data);
        armed = false;
        backend.destroy();
        if (loss === "terminated") return void client.end(terminatedMessage());
        // Refused before the driver learns of the close, so that its attempt
        // to connect again is.
        server.close();
        client.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  };
  await listen();
  const url = new URL(target);
  url.host = `127.0.0.1:${port}`;
  return {
    url: url.toString(),
    reopen: listen,
    staged: () => !armed,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
    },
  };
}

let database: TestDatabase;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => void unhandled.push(reason);

beforeAll(async () => {
  database = await createTestDatabase();
  process.on("unhandledRejection", onUnhandled);
});

afterAll(async () => {
  process.off("unhandledRejection", onUnhandled);
  await database?.drop();
});

describe("a PostgreSQL connection lost while it starts up", () => {
  let proxy: Proxy | undefined;
  let sql: Sql | undefined;

  beforeEach(() => {
    unhandled.length = 0;
  });

  afterEach(async () => {
    await sql?.end({ timeout: 1 });
    await proxy?.close();
    sql = proxy = undefined;
  });

  // Rejections the process reports unhandled come after the turn they
  // happened in; several turns later every one of them has been reported.
  const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

  it("closed and then refused: the call fails as unavailable, nothing rejects unhandled, and the pool connects again once the server is back", async () => {
    proxy = await startProxy(database.url, "closed, then refused");
    sql = openPostgres({ url: proxy.url, poolSize: 1 }).sql;
    const db = sql;

    await expect(pg(() => db`select 1 as one`)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(proxy.staged()).toBe(true);
    await settled();
    expect(unhandled).toEqual([]);

    await proxy.reopen();
    expect(await pg(() => db`select 1 as one`)).toEqual([{ one: 1 }]);
    await settled();
    expect(unhandled).toEqual([]);
  });

  it("terminated: the call goes through on the next connection, not failed with the terminated one's error, and nothing rejects unhandled", async () => {
    proxy = await startProxy(database.url, "terminated");
    sql = openPostgres({ url: proxy.url, poolSize: 1 }).sql;
    const db = sql;

    expect(await pg(() => db`select 1 as one`)).toEqual([{ one: 1 }]);
    expect(proxy.staged()).toBe(true);
    await settled();
    expect(unhandled).toEqual([]);
  });
});
