// The peer of bench/engine/run.ts, in a process of its own as agentplane's
// `serve` is: Fastify takes a POST per event and adds one graphile-worker job
// for it (addJob, one insert and its commit), and graphile-worker's runner in
// the same process executes the trivial job. GET /stats says how many jobs
// were added and completed. Settings from the environment:
//   PEER_DATABASE_URL, PEER_PORT, PEER_CONCURRENCY,
//   PEER_LOCAL_QUEUE (graphile's local queue size; 0 leaves it off),
//   PEER_COMPLETE_BATCH_MS (completeJobBatchDelay; -1 leaves it off).
import Fastify from "fastify";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is required`);
  return v;
};

async function main(): Promise<void> {
  const connectionString = env("PEER_DATABASE_URL");
  const concurrency = Number(env("PEER_CONCURRENCY"));
  const localQueue = Number(process.env.PEER_LOCAL_QUEUE ?? "0");
  const completeJobBatchDelay = Number(process.env.PEER_COMPLETE_BATCH_MS ?? "-1");
  const logger = new Logger(() => () => {});
  await runMigrations({ connectionString, logger });
  const utils = await makeWorkerUtils({ connectionString, logger });
  let added = 0;
  let completed = 0;
  const runner = await run({
    connectionString,
    concurrency,
    logger,
    noHandleSignals: true,
    pollInterval: 1000,
    taskList: {
      noop: async () => {
        completed++;
      },
    },
    preset: { worker: { ...(localQueue > 0 && { localQueue: { size: localQueue } }), completeJobBatchDelay } },
  });
  const app = Fastify({ logger: false });
  app.post("/events", async (req, reply) => {
    await utils.addJob("noop", req.body as object);
    added++;
    return reply.code(202).send({ ok: true });
  });
  app.get("/stats", async () => ({ added, completed }));
  await app.listen({ host: "127.0.0.1", port: Number(env("PEER_PORT")) });
  console.log("ready");
  process.once("SIGTERM", () => {
    void (async () => {
      await app.close();
      await runner.stop();
      await utils.release();
      process.exit(0);
    })();
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
