// The pieces every resource's pages repeat: the list, the detail page's
// Edit/Delete, the create-or-edit page, a live table.
import type { ReactNode } from "react";
import { Link, useRouter } from "../router.js";
import { useTenant } from "../tenant.js";
import { Heading, useLoad } from "../pages/common.js";
import { runStatusName } from "../format.js";
import { Status, When } from "./bits.js";
import { ErrorBanner, type useAction } from "./form.js";

// A list page: the "New …" link for writers, the load error, what an empty
// list says (with the next step), then a table row per record.
export function RecordList<T extends { id: string }>(props: {
  title: string;
  create: { to: string; label: string };
  records: { value?: T[]; error?: string };
  empty: ReactNode;
  columns: string[];
  children: (record: T) => ReactNode[];
}) {
  const { canWrite } = useTenant();
  return (
    <>
      <Heading>{props.title}</Heading>
      {canWrite && (
        <p>
          <Link to={props.create.to} className="button">
            {props.create.label}
          </Link>
        </p>
      )}
      <ErrorBanner message={props.records.error} />
      {props.records.value?.length === 0 && <div className="empty">{props.empty}</div>}
      {!!props.records.value?.length && (
        <div className="table-scroll">
          <table className="records">
            <thead>
              <tr>
                {props.columns.map((c) => (
                  <th key={c} scope="col">
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {props.records.value.map((r) => (
                <tr key={r.id} data-id={r.id}>
                  {props.children(r).map((cell, i) => (
                    <td key={i} data-label={props.columns[i]}>
                      {cell}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

// The newest run matching a query (an agent's, a trigger's): its status and
// when, linked; read once per row.
export function LastRun({ agentId = "", triggerId = "" }: { agentId?: string; triggerId?: string }) {
  const { api, base } = useTenant();
  const run = useLoad(async () => (await api.listRuns({ agentId, triggerId, pageSize: 1 })).runs[0] ?? null, [agentId, triggerId]);
  if (run.value === undefined) return <span className="muted">…</span>;
  if (run.value === null) return <span className="muted">never</span>;
  return (
    <Link to={`${base}/runs/${run.value.id}`} className="last-run">
      <Status name={runStatusName(run.value.status)} /> <When ts={run.value.createTime} />
    </Link>
  );
}

// A record's enabled flag as a badge.
export const Enabled = ({ enabled }: { enabled: boolean | undefined }) => <Status name={enabled === false ? "disabled" : "enabled"} />;

// A detail page's actions for writers on record `id` of the list at `list`:
// Edit, the page's own, and Delete once confirmed, which goes back to the list.
export function RecordActions(props: {
  list: string;
  id: string;
  confirm: string;
  del: ReturnType<typeof useAction>;
  remove: () => Promise<unknown>;
  children?: ReactNode;
}) {
  const { canWrite } = useTenant();
  const { navigate } = useRouter();
  if (!canWrite) return null;
  return (
    <p className="actions">
      <Link to={`${props.list}/${props.id}/edit`} className="button">
        Edit
      </Link>{" "}
      {props.children && <>{props.children} </>}
      <button
        type="button"
        className="danger"
        onClick={() => confirm(props.confirm) && void props.del.run(async () => (await props.remove(), navigate(props.list)))}
      >
        Delete
      </button>
    </p>
  );
}

// A create-or-edit page: the form once what it needs (the record being
// edited) has loaded.
export function EditPage(props: { title: string; error?: string; ready: boolean; children: ReactNode }) {
  return (
    <>
      <Heading>{props.title}</Heading>
      <ErrorBanner message={props.error} />
      {props.ready && props.children}
    </>
  );
}

// A form's submit button: "Create …" for a new record, "Save …" for one edited.
export function SubmitButton({ busy, editing, noun }: { busy: boolean; editing: boolean; noun: string }) {
  return (
    <button type="submit" disabled={busy}>
      {editing ? `Save ${noun}` : `Create ${noun}`}
    </button>
  );
}

// A live list as a table, or what an empty one says.
export function RecordTable(props: { columns: string[]; className?: string; empty: ReactNode; error?: string; rows: ReactNode[] }) {
  return (
    <>
      <ErrorBanner message={props.error} />
      {props.rows.length === 0 ? (
        <div className="empty">{props.empty}</div>
      ) : (
        <div className="table-scroll">
        <table className={props.className}>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th key={c} scope="col">
                  {c}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>{props.rows}</tbody>
        </table>
        </div>
      )}
    </>
  );
}
