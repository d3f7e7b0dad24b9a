/**
 * Adapter: the userspace LB host's real drivers — the proxy's sockets (UserspaceLb), the
 * prober (ProberHealth), the polled manifest paths (ManifestFolderSource) and
 * performance.now.
 */
import { ManifestFolderSource } from "../../cluster/manifest-folder-source.ts";
import { ProberHealth } from "../../health/prober-health.ts";
import { UserspaceLb } from "../userspace/userspace-lb.ts";
import type { UserspaceLbDrivers } from "./lb-host-drivers.ts";

export function userspaceHostDrivers(): UserspaceLbDrivers {
  return {
    proxy: (o) => new UserspaceLb(o),
    health: (o) => new ProberHealth(o),
    folder: (o) => new ManifestFolderSource(o),
    now: () => performance.now(),
  };
}
