/**
 * Conntrack sizing on the LB host (issue 16 §2). Pure: the kernel's two sizes (and the
 * operator's `--conntrack-max`, if given) in, the value to write and the findings out.
 *
 * The rule: keep `nf_conntrack_max` at least `nf_conntrack_buckets`, the kernel's default
 * relation ("nf_conntrack_max … This value is set to nf_conntrack_buckets by default",
 * Documentation/networking/nf_conntrack-sysctl.rst). When the table is full, a new entry
 * is admitted only if early_drop evicts an unreplied one, and it looks at a bounded number
 * of entries in a few hash buckets from where the new one hashes (net/netfilter/
 * nf_conntrack_core.c, early_drop / NF_CT_EVICTION_RANGE); with fewer entries than buckets
 * those buckets are mostly empty and the eviction fails. Issue 16 measured it under a
 * spoofed SYN flood: ≥ 99 % of legitimate new connections succeeded with the default
 * relation, 14–65 % with nf_conntrack_max below the bucket count.
 *
 * Does not: read or write /proc (conntrack-sysctl.ts), log (the caller prints findings).
 */

export interface ConntrackSizes {
  /** /proc/sys/net/netfilter/nf_conntrack_max */
  readonly max: number;
  /** /proc/sys/net/netfilter/nf_conntrack_buckets */
  readonly buckets: number;
}

export interface ConntrackFinding {
  readonly code: "conntrack_max_below_buckets" | "conntrack_not_loaded";
  readonly severity: "warning" | "info";
  readonly message: string;
}

export interface ConntrackPlan {
  /** the value to write to nf_conntrack_max, when it must change */
  readonly write?: number;
  readonly findings: readonly ConntrackFinding[];
}

export function conntrackSizing(observed: ConntrackSizes | undefined, requested?: number): ConntrackPlan {
  if (!observed)
    return {
      ...(requested !== undefined && { write: requested }),
      findings: [
        {
          code: "conntrack_not_loaded",
          severity: "info",
          message:
            "nf_conntrack is not loaded (no /proc/sys/net/netfilter/nf_conntrack_max): sizes not checked",
        },
      ],
    };
  const max = requested ?? observed.max;
  const findings: ConntrackFinding[] = [];
  if (max < observed.buckets)
    findings.push({
      code: "conntrack_max_below_buckets",
      severity: "warning",
      message: `nf_conntrack_max ${max}${requested !== undefined ? " (--conntrack-max)" : ""} is below nf_conntrack_buckets ${observed.buckets}: when the table fills (a SYN flood), the kernel's early drop finds too few entries to evict and legitimate new connections fail (issue 16 measured 14–65 % success); keep it at least ${observed.buckets} (--conntrack-max ${observed.buckets})`,
    });
  return { ...(requested !== undefined && requested !== observed.max && { write: requested }), findings };
}
