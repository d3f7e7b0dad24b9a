/**
 * GKE version strings (`1.37.1-gke.1000000`) parsed and compared the way GKE orders its
 * releases: major, minor, patch, then the `-gke.N` build number, each numerically.
 * A short form (`1.36`, `1.33.1`) is accepted and means the earliest build of that line, so
 * `atLeast(v, "1.36")` reads as the GKE docs' "1.36 and later" (docs/providers-gke.md: every
 * version gate comes from the GKE documentation, not from the controllers' code).
 * Deliberately does not know release channels or which versions exist.
 */

export interface GkeVersion {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
  readonly build: number;
  /** the text as given */
  readonly text: string;
}

const VERSION = /^v?(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?$/;

export function parseGkeVersion(text: string): GkeVersion | undefined {
  const m = VERSION.exec(text.trim());
  if (!m) return undefined;
  return {
    major: Number(m[1]),
    minor: Number(m[2]),
    patch: Number(m[3] ?? 0),
    build: Number(m[4] ?? 0),
    text: text.trim(),
  };
}

export function compareGkeVersion(a: GkeVersion, b: GkeVersion): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || a.build - b.build;
}

/** `version >= gate`, where gate is a literal version from the spec (throws on a typo: a bug). */
export function atLeast(version: GkeVersion, gate: string): boolean {
  const g = parseGkeVersion(gate);
  if (!g) throw new Error(`bad GKE version gate ${gate}`);
  return compareGkeVersion(version, g) >= 0;
}
