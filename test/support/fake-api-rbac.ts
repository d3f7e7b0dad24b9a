/**
 * Test-only: authentication and RBAC of the fake Kubernetes API server, from the Roles,
 * ClusterRoles and bindings in deploy/ (rbac-controller.yaml, rbac-lb.yaml,
 * components/*\/rbac-*.yaml), so every test request runs with the rights passlb ships.
 *
 * - Bearer tokens name users (apiserver's token authenticator): a ServiceAccount is
 *   `system:serviceaccount:NS:NAME` in groups system:serviceaccounts,
 *   system:serviceaccounts:NS, system:authenticated. An unknown token is 401; no token is
 *   system:anonymous (group system:unauthenticated).
 * - Request attributes (apiserver pkg/endpoints/request/requestinfo.go): GET of a collection
 *   is list (watch with ?watch=true), of a name get; POST create, PUT update, PATCH patch,
 *   DELETE delete; a list or watch with fieldSelector metadata.name=N carries name N.
 * - A rule allows (kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go RuleAllows and
 *   pkg/apis/rbac/v1/evaluation_helpers.go): verb and API group equal or "*", resource
 *   equal to "res" or "res/sub" (or "*", "*\/sub"), and resourceNames empty or holding the
 *   request's name — so a create, which has no name, never matches a rule with
 *   resourceNames. A RoleBinding grants in its namespace only.
 * - Denied: 403 Forbidden, worded by apiserver
 *   pkg/endpoints/handlers/responsewriters/errors.go forbiddenMessage + apimachinery
 *   NewForbidden: `leases.coordination.k8s.io "x" is forbidden: User "system:serviceaccount:
 *   passlb-system:passlb-controller" cannot get resource "leases" in API group
 *   "coordination.k8s.io" in the namespace "passlb-system"`.
 * - Bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): group
 *   system:masters may do anything (cluster-admin); system:authenticated may GET the
 *   discovery paths (system:discovery); everyone /version, /healthz (system:public-info-viewer).
 *
 * Every allowed ServiceAccount request is recorded against the grant (role, rule, verb,
 * resource, name) it used, so a test can list the grants no code path used (`unusedGrants`).
 * Deliberately not: aggregated ClusterRoles, impersonation, the Node authorizer, webhooks.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { ApiStatusError } from "./fake-api-store.ts";

export interface FakeUser {
  readonly name: string;
  readonly groups: readonly string[];
}

export interface RequestAttributes {
  readonly user: FakeUser;
  readonly verb: string;
  /** resource request or a plain path (discovery, /version) */
  readonly resource?: { group: string; resource: string; sub: string; namespace: string; name: string };
  readonly path: string;
}

interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames: readonly string[];
}

interface Role {
  readonly kind: "Role" | "ClusterRole";
  readonly name: string;
  readonly namespace: string;
  readonly rules: readonly Rule[];
}

interface Binding {
  readonly namespace: string | undefined;
  readonly roleKind: string;
  readonly roleName: string;
  readonly subjects: readonly string[];
}

export const DEPLOY_DIR = new URL("../../deploy/", import.meta.url).pathname;

export function serviceAccountUser(namespace: string, name: string): FakeUser {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
  };
}

/** The identities every fake server knows, by bearer token. */
export const DEFAULT_USERS: Record<string, FakeUser> = {
  admin: { name: "passlb-test-admin", groups: ["system:masters", "system:authenticated"] },
  controller: serviceAccountUser("passlb-system", "passlb-controller"),
  lb: serviceAccountUser("passlb-system", "passlb-lb"),
  jane: { name: "jane", groups: ["system:authenticated"] },
};

export const ANONYMOUS: FakeUser = { name: "system:anonymous", groups: ["system:unauthenticated"] };

const DISCOVERY = [
  /^\/api(\/.*)?$/,
  /^\/apis(\/.*)?$/,
  /^\/openapi(\/.*)?$/,
  /^\/version\/?$/,
  /^\/(healthz|livez|readyz)$/,
];
const PUBLIC = [/^\/version\/?$/, /^\/(healthz|livez|readyz)$/];

const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);

/** The RBAC documents of a deploy folder: its top level and components/*. */
export function deployRbacFiles(dir = DEPLOY_DIR): string[] {
  const files = readdirSync(dir)
    .filter((f) => f.startsWith("rbac-") && f.endsWith(".yaml"))
    .map((f) => join(dir, f));
  const components = join(dir, "components");
  for (const c of readdirSync(components)) {
    for (const f of readdirSync(join(components, c)))
      if (f.startsWith("rbac-")) files.push(join(components, c, f));
  }
  return files.sort();
}

export class FakeRbac {
  readonly roles: Role[] = [];
  readonly bindings: Binding[] = [];
  /** grant key → requests that used it */
  readonly #used = new Map<string, number>();

  constructor(files: readonly string[] = deployRbacFiles()) {
    for (const file of files) {
      for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
        // biome-ignore lint/suspicious/noExplicitAny: YAML documents checked field by field
        const o = doc.toJS() as any;
        if (!o) continue;
        const ns = o.metadata?.namespace ?? "passlb-system";
        if (o.kind === "Role" || o.kind === "ClusterRole") {
          this.roles.push({
            kind: o.kind,
            name: o.metadata.name,
            namespace: o.kind === "Role" ? ns : "",
            rules: (o.rules ?? []).map((r: Record<string, unknown>) => ({
              apiGroups: list(r.apiGroups),
              resources: list(r.resources),
              verbs: list(r.verbs),
              resourceNames: list(r.resourceNames),
            })),
          });
        } else if (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") {
          this.bindings.push({
            namespace: o.kind === "RoleBinding" ? ns : undefined,
            roleKind: o.roleRef.kind,
            roleName: o.roleRef.name,
            subjects: (o.subjects ?? []).map((s: { kind: string; name: string; namespace?: string }) =>
              s.kind === "ServiceAccount" ? `system:serviceaccount:${s.namespace ?? ns}:${s.name}` : s.name,
            ),
          });
        }
      }
    }
  }

  /** Roles bound to `user` that apply in `namespace` ("" for cluster-scoped requests). */
  #rolesFor(user: FakeUser, namespace: string): Role[] {
    const who = new Set([user.name, ...user.groups]);
    const out: Role[] = [];
    for (const b of this.bindings) {
      if (!b.subjects.some((s) => who.has(s))) continue;
      if (b.namespace !== undefined && b.namespace !== namespace) continue;
      const role = this.roles.find(
        (r) =>
          r.kind === b.roleKind &&
          r.name === b.roleName &&
          (r.kind === "ClusterRole" || r.namespace === b.namespace),
      );
      if (role) out.push(role);
    }
    return out;
  }

  /** Throws 403 unless allowed; records the grant a ServiceAccount request used. */
  authorize(a: RequestAttributes): void {
    if (a.user.groups.includes("system:masters")) return;
    const r = a.resource;
    if (!r) {
      const allowed =
        a.verb === "get" &&
        (PUBLIC.some((re) => re.test(a.path)) ||
          (a.user.groups.includes("system:authenticated") && DISCOVERY.some((re) => re.test(a.path))));
      if (allowed) return;
      throw new ApiStatusError(
        403,
        "Forbidden",
        `forbidden: User ${JSON.stringify(a.user.name)} cannot ${a.verb} path ${JSON.stringify(a.path)}`,
      );
    }
    const combined = r.sub ? `${r.resource}/${r.sub}` : r.resource;
    for (const role of this.#rolesFor(a.user, r.namespace)) {
      for (const [i, rule] of role.rules.entries()) {
        const verbOk = rule.verbs.includes("*") || rule.verbs.includes(a.verb);
        const groupOk = rule.apiGroups.includes("*") || rule.apiGroups.includes(r.group);
        const resOk =
          rule.resources.includes("*") ||
          rule.resources.includes(combined) ||
          (r.sub !== "" && rule.resources.includes(`*/${r.sub}`));
        const nameOk =
          rule.resourceNames.length === 0 || (r.name !== "" && rule.resourceNames.includes(r.name));
        if (verbOk && groupOk && resOk && nameOk) {
          const key = grantKey(
            role,
            i,
            a.verb,
            r.group,
            combined,
            rule.resourceNames.length > 0 ? r.name : "",
          );
          this.#used.set(key, (this.#used.get(key) ?? 0) + 1);
          return;
        }
      }
    }
    const qualified = r.group === "" ? r.resource : `${r.resource}.${r.group}`;
    const scope = r.namespace ? `in the namespace ${JSON.stringify(r.namespace)}` : "at the cluster scope";
    const msg = `User ${JSON.stringify(a.user.name)} cannot ${a.verb} resource ${JSON.stringify(combined)} in API group ${JSON.stringify(r.group)} ${scope}`;
    throw new ApiStatusError(
      403,
      "Forbidden",
      r.name
        ? `${qualified} ${JSON.stringify(r.name)} is forbidden: ${msg}`
        : `${qualified} is forbidden: ${msg}`,
      { name: r.name, group: r.group, kind: r.resource },
    );
  }

  /**
   * Every (verb, resource[, name]) the roles bound to `subject` grant that no recorded request
   * used, as `Kind name: verb resource [name]` lines.
   */
  unusedGrants(subject: string): string[] {
    const out: string[] = [];
    for (const b of this.bindings) {
      if (!b.subjects.includes(subject)) continue;
      const role = this.roles.find((r) => r.kind === b.roleKind && r.name === b.roleName);
      if (!role) continue;
      for (const [i, rule] of role.rules.entries()) {
        for (const verb of rule.verbs)
          for (const group of rule.apiGroups)
            for (const res of rule.resources)
              for (const name of rule.resourceNames.length > 0 ? rule.resourceNames : [""]) {
                if (this.#used.has(grantKey(role, i, verb, group, res, name))) continue;
                out.push(
                  `${role.kind} ${role.name}: ${verb} ${group === "" ? "" : `${group}/`}${res}${name ? ` ${name}` : ""}`,
                );
              }
      }
    }
    return [...new Set(out)].sort();
  }

  resetUsage(): void {
    this.#used.clear();
  }
}

function grantKey(
  role: Role,
  rule: number,
  verb: string,
  group: string,
  resource: string,
  name: string,
): string {
  return [role.kind, role.name, rule, verb, group, resource, name].join(" ");
}
