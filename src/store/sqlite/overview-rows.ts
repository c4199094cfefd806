// The runs of a tenant's range that the overview groups live (./overview.ts)
// and the sealer rolls up (./overview-rollups.ts): named parameters :tenant,
// :lo/:hi (the id range), :start/:end (the creation times). Read a status
// group at a time (RUN_GROUPS), each a range of the index holding it, since
// no index holds all of a tenant's runs by id; only the columns the groups
// read, so no run's steps or output are loaded.
import { RUN_GROUPS } from "../run-conditions.js";

const IN_RANGE = `tenant_id = :tenant and id >= :lo and id < :hi and create_time >= :start and create_time < :end`;

export const RUNS_IN_RANGE = `(${RUN_GROUPS.map(
  (group) => `select status, agent_id, trigger_id, error, create_time, start_time, end_time from runs where ${IN_RANGE} and ${group}`,
).join(" union all ")})`;
