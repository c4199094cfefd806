// An agent is saved only with steps or a model. Tests whose agents never run
// (no runtime, the no-op executor, a scripted one) give them this model: at a
// documentation address (TEST-NET-1) the outbound guard refuses at once, so
// even a real executor fails such a run quickly instead of waiting on a host.
export const PLACEHOLDER_MODEL = { baseUrl: "http://192.0.2.1/v1", model: "placeholder" };
