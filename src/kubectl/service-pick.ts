/**
 * Which Services a `kubectl passlb` command shows: `[svc]` and `-n`, with kubectl's meaning
 * where it is cheap to keep (`-n` limits to a namespace) and one convenience kubectl lacks
 * (a name without `-n` is looked up in every namespace, and must be unique). `ns/name` is
 * accepted too. Pure.
 */

export type ServicePick =
  | { readonly ok: true; readonly matches: (key: string) => boolean; readonly key?: string }
  | { readonly ok: false; readonly error: string };

export function pickServices(
  keys: readonly string[],
  name: string | undefined,
  namespace: string | undefined,
): ServicePick {
  const inNamespace = (key: string) => namespace === undefined || key.startsWith(`${namespace}/`);
  if (name === undefined) return { ok: true, matches: inNamespace };
  const [ns, short] = name.includes("/") ? (name.split("/", 2) as [string, string]) : [namespace, name];
  const found = keys.filter((k) => (ns === undefined ? k.endsWith(`/${short}`) : k === `${ns}/${short}`));
  if (found.length === 0)
    return {
      ok: false,
      error: `Service ${ns === undefined ? short : `${ns}/${short}`} not found${ns === undefined ? " in any namespace" : ""}`,
    };
  if (found.length > 1)
    return {
      ok: false,
      error: `Service ${short} is in several namespaces (${found.join(", ")}): pass -n NAMESPACE`,
    };
  const key = found[0] as string;
  return { ok: true, matches: (k) => k === key, key };
}
