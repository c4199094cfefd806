// Once per jest run, after every suite (jest.config.js): stops the throwaway
// PostgreSQL server global-setup.ts started, if it did, so jest can exit.
export default async function tearDown(): Promise<void> {
  const holder = globalThis as { agentplaneEmbeddedPostgres?: { stop(): Promise<void> } };
  const server = holder.agentplaneEmbeddedPostgres;
  delete holder.agentplaneEmbeddedPostgres;
  await server?.stop();
}
