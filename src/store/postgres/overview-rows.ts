// The figures of each run of a range, as the tenant overview groups them
// live (./overview.ts) and the sealer rolls them up (./overview-rollups.ts).
import { DURATION_KEY, TIMED_RUN } from "../overview.js";
import { RUN_GROUPS } from "../run-conditions.js";

// service/error-kinds.ts's LEADING_KIND, in PostgreSQL's regex dialect.
const LEADING_WORD = String.raw`^(?:steps\[\d+\][^:]*: )?([a-z_]+)\y`;

// $1 tenant, $2/$3 id range, $4/$5 the slice's times, $6 the window's start,
// $7 bucket width: the figures of each run, which the sealer rolls up too
// (./overview-rollups.ts). Read a status group at a time (RUN_GROUPS), each a
// range of the index holding it, since no index holds all of a tenant's
// runs by id.
export const RUN_ROWS = RUN_GROUPS.map(
  (group) => `
    select ((create_time - $6) / $7)::int as bucket, status, agent_id, trigger_id,
      case when status = 'failed' then coalesce(substring(error from '${LEADING_WORD}'), '') when status = 'timed_out' then '' end as word,
      case when ${TIMED_RUN} then ${DURATION_KEY("(end_time - start_time)")} end::float8 as d
    from runs where tenant_id = $1 and id >= $2 and id < $3 and create_time >= $4 and create_time < $5 and ${group}`,
).join("\n    union all");
