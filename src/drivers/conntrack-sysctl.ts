/**
 * Adapter: reads the kernel's conntrack sizes and writes nf_conntrack_max
 * (/proc/sys/net/netfilter/nf_conntrack_max, nf_conntrack_buckets). Both are global to the
 * host and writable only in the initial network namespace (kernel commit 2671fa4,
 * "netfilter: conntrack: Make global sysctls readonly in non-init netns"), so a write from
 * inside another namespace fails with `conntrack_sysctl_failed`. Also reads the entry count
 * (nf_conntrack_count, per network namespace: Documentation/networking/nf_conntrack-sysctl.rst
 * in the kernel tree) for the `passlb_conntrack_*` gauges (docs/metrics.md). Does not: judge
 * the sizes (conntrack-sizing.ts).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PasslbError } from "../errors.ts";
import type { ConntrackSizes } from "../lb-host/conntrack-sizing.ts";

export interface ConntrackSysctl {
  /** undefined when nf_conntrack is not loaded (the files do not exist) */
  read(): Promise<ConntrackSizes | undefined>;
  writeMax(value: number): Promise<void>;
}

export function createConntrackSysctl(dir = "/proc/sys/net/netfilter"): ConntrackSysctl {
  const num = async (name: string): Promise<number | undefined> => {
    try {
      return Number((await readFile(join(dir, name), "utf8")).trim());
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new PasslbError(
        "conntrack_sysctl_failed",
        `cannot read ${join(dir, name)}: ${(e as Error).message}`,
        {
          cause: e,
        },
      );
    }
  };
  return {
    async read() {
      const max = await num("nf_conntrack_max");
      const buckets = await num("nf_conntrack_buckets");
      return max === undefined || buckets === undefined ? undefined : { max, buckets };
    },
    async writeMax(value) {
      const path = join(dir, "nf_conntrack_max");
      try {
        await writeFile(path, `${value}\n`);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        throw new PasslbError(
          "conntrack_sysctl_failed",
          `cannot set ${path} to ${value}: ${(e as Error).message}${code === "EACCES" || code === "EROFS" ? " (it is writable only as root in the host's initial network namespace)" : ""}`,
          { cause: e, details: { errno: code } },
        );
      }
    },
  };
}

/** Entries now and the limit; undefined when nf_conntrack is not loaded. */
export async function readConntrackUsage(
  dir = "/proc/sys/net/netfilter",
): Promise<{ entries: number; max: number } | undefined> {
  try {
    const [entries, max] = await Promise.all(
      ["nf_conntrack_count", "nf_conntrack_max"].map(async (f) =>
        Number((await readFile(join(dir, f), "utf8")).trim()),
      ),
    );
    return Number.isFinite(entries) && Number.isFinite(max) ? { entries: entries!, max: max! } : undefined;
  } catch {
    return undefined;
  }
}
