/**
 * Which GKE controller owns a LoadBalancer Service and which implementation it builds
 * (docs/providers-gke.md): the loadBalancerClass first (only the class decides when set),
 * then the finalizers as ownership markers (§1.4: a backend choice is frozen at creation),
 * then the annotations, then the controller flags GKE sets for the version.
 * Sources: ingress-gce GetLoadBalancerAnnotationType, WantsL4ILB/WantsL4NetLB,
 * isRBSBasedService, shouldUseNEGBackends, preventLegacyServiceHandling, l4netlbcontroller.go
 * shouldProcessService; cloud-provider-gcp shouldProcessNetLB, ensureInternalLoadBalancer,
 * ensureExternalLoadBalancer, gce_annotations.go GetLoadBalancerAnnotationType, and for the
 * `-legacy` classes pkg/controller/service/controller.go `WantsLoadBalancer` (the forked
 * service controller, `gkeCCMClasses` in controller_gke.go: it claims exactly the two
 * legacy classes; the vendored upstream controller ignores every Service with a class) and
 * gce_loadbalancer.go `EnsureLoadBalancer` (ImplementedElsewhere for every other class).
 * Not modelled: existing forwarding rules other than what the Service's own annotations and
 * finalizers reveal (there is no cloud state offline), and the creation-race delay.
 */
import type { Service } from "../../k8s/objects.ts";
import { objectKey } from "../../k8s/snapshot.ts";
import type { GkeEvent, GkeFinding, GkeOptions, GkePath, Scheme } from "./gke-types.ts";
import { atLeast } from "./gke-version.ts";

export const CLASS_INTERNAL = "networking.gke.io/l4-regional-internal";
export const CLASS_EXTERNAL = "networking.gke.io/l4-regional-external";
export const CLASS_INTERNAL_LEGACY = "networking.gke.io/l4-regional-internal-legacy";
export const CLASS_EXTERNAL_LEGACY = "networking.gke.io/l4-regional-external-legacy";
export const FINALIZER = {
  ilbV1: "gke.networking.io/l4-ilb-v1",
  ilbV2: "gke.networking.io/l4-ilb-v2",
  netlbV1: "gke.networking.io/l4-netlb-v1",
  netlbV2: "gke.networking.io/l4-netlb-v2",
  netlbV3: "gke.networking.io/l4-netlb-v3",
} as const;
const PATH_FINALIZER: Record<GkePath, string | null> = {
  none: null,
  "target-pool": FINALIZER.netlbV1,
  "ccm-ilb": FINALIZER.ilbV1,
  "rbs-instance-groups": FINALIZER.netlbV2,
  "rbs-neg": FINALIZER.netlbV3,
  "subsetting-ilb": FINALIZER.ilbV2,
};
/** ingress-gce writes these on Services it has synced; their presence shows IG resources exist. */
const IG_RESOURCE_ANNOTATION = "service.kubernetes.io/backend-service";
const CLASS_GATE = "1.33.1-gke.1779000";

export interface ControllerChoice {
  readonly path: GkePath;
  readonly scheme: Scheme | null;
  readonly finalizer: string | null;
  /** the owner's finalizer is already on the Service: its resources exist (updates, not creation) */
  readonly existing: boolean;
  readonly subsetting: boolean;
  readonly steps: readonly string[];
  readonly events: readonly GkeEvent[];
  readonly findings: readonly GkeFinding[];
}

/** What every step of the choice reads and appends to. */
interface Walk {
  readonly options: GkeOptions;
  readonly subject: string;
  readonly ann: Readonly<Record<string, string>>;
  readonly fin: ReadonlySet<string>;
  readonly subsetting: boolean;
  /** the load-balancer-type annotation, the current key before the deprecated one */
  readonly typeAnn: string | undefined;
  readonly wantsInternal: boolean;
  readonly steps: string[];
  readonly events: GkeEvent[];
  readonly findings: GkeFinding[];
}

/**
 * In steps: subsetting → the class, if set (it alone decides) → otherwise the
 * load-balancer-type annotation, then internal by finalizer and subsetting, or external by
 * finalizer, annotation and flags.
 */
export function chooseController(service: Service, options: GkeOptions): ControllerChoice {
  const ann = service.metadata.annotations ?? {};
  const typeAnn = ann["networking.gke.io/load-balancer-type"] ?? ann["cloud.google.com/load-balancer-type"];
  const w: Walk = {
    options,
    subject: objectKey(service.metadata),
    ann,
    fin: new Set(service.metadata.finalizers ?? []),
    subsetting: options.subsetting ?? atLeast(options.version, "1.36"),
    typeAnn,
    wantsInternal: typeAnn === "Internal" || typeAnn === "internal",
    steps: [],
    events: [],
    findings: [],
  };
  w.steps.push(subsettingStep(w));
  const cls = service.spec.loadBalancerClass;
  if (cls !== undefined) return byClass(w, cls);
  w.steps.push(
    typeAnn === undefined
      ? "No load-balancer-type annotation: the load balancer is external (§1.1)."
      : `load-balancer-type is "${typeAnn}": ${w.wantsInternal ? "internal" : "external (only Internal/internal mean internal)"} (§1.1).`,
  );
  removedFinalizerWarning(w);
  return w.wantsInternal ? internalByFinalizer(w) : (externalByFinalizer(w) ?? externalByFlags(w));
}

function done(w: Walk, path: GkePath, scheme: Scheme | null): ControllerChoice {
  const finalizer = PATH_FINALIZER[path];
  return {
    path,
    scheme,
    finalizer,
    existing: finalizer !== null && w.fin.has(finalizer),
    subsetting: w.subsetting,
    steps: w.steps,
    events: w.events,
    findings: w.findings,
  };
}

function subsettingStep(w: Walk): string {
  const { subsetting, options } = w;
  return options.subsetting === undefined
    ? `GKE subsetting is ${subsetting ? "on (automatic from 1.36)" : "off (automatic only from 1.36)"} at ${options.version.text}.`
    : `GKE subsetting is ${subsetting ? "on" : "off"} (--${subsetting ? "" : "no-"}gke-subsetting).`;
}

/** spec.loadBalancerClass set: only the class decides, annotations are not read. */
function byClass(w: Walk, cls: string): ControllerChoice {
  const { version } = w.options;
  w.steps.push(
    `spec.loadBalancerClass is "${cls}": only the class decides, annotations are not read (§1.1).`,
  );
  const tooOld = (gate: string) => {
    w.steps.push(`The class needs GKE ${gate} or later; ${version.text} has no controller for it.`);
    return done(w, "none", null);
  };
  if (cls === CLASS_INTERNAL) {
    if (!atLeast(version, CLASS_GATE)) return tooOld(CLASS_GATE);
    if (!w.subsetting) {
      w.steps.push("The class needs GKE subsetting: without it the ILB subsetting controller does not run.");
      return done(w, "none", null);
    }
    w.steps.push("The ILB subsetting controller (ingress-gce) owns it: GCE_VM_IP NEG backends (§1.3).");
    return done(w, "subsetting-ilb", "INTERNAL");
  }
  if (cls === CLASS_EXTERNAL) {
    if (!atLeast(version, CLASS_GATE)) return tooOld(CLASS_GATE);
    classConflict(w, "ingress-gce");
    w.steps.push("The RBS NetLB controller owns it and the NEG controller always makes NEGs for it (§1.2).");
    return done(w, "rbs-neg", "EXTERNAL");
  }
  if (cls === CLASS_INTERNAL_LEGACY) {
    if (!legacyClaimed(w)) return done(w, "none", null);
    w.steps.push(
      "GetLoadBalancerAnnotationType reads the class before any annotation: internal. ensureInternalLoadBalancer processes the class even with ILB subsetting on and whatever the finalizers; the subsetting controller ignores it: the CCM's instance-group ILB (§1.3).",
    );
    return done(w, "ccm-ilb", "INTERNAL");
  }
  if (cls === CLASS_EXTERNAL_LEGACY) {
    if (!legacyClaimed(w)) return done(w, "none", null);
    classConflict(w, "ccm");
    w.steps.push(
      "The legacy class is external whatever the annotations; shouldProcessNetLB takes it, the RBS controller ignores it: the CCM's target-pool NetLB (§1.2).",
    );
    return done(w, "target-pool", "EXTERNAL");
  }
  w.steps.push(
    "No GKE controller implements this class: the CCM answers ImplementedElsewhere, nothing is built.",
  );
  return done(w, "none", null);
}

/**
 * An external class with an internal load-balancer-type: the class wins. Both controllers
 * warn only for exactly `networking.gke.io/load-balancer-type: Internal` (not the deprecated
 * key, not "internal"), in their own wording: ingress-gce l4netlbcontroller.go
 * shouldProcessService quotes the value (%q), cloud-provider-gcp gce_loadbalancer_external.go
 * ensureExternalLoadBalancer does not (%s).
 */
function classConflict(w: Walk, by: "ingress-gce" | "ccm"): void {
  if (!w.wantsInternal) return;
  const exact = w.ann["networking.gke.io/load-balancer-type"] === "Internal";
  if (exact)
    w.events.push({
      type: "Warning",
      reason: "ConflictingConfiguration",
      message: `loadBalancerClass conflicts with networking.gke.io/load-balancer-type: ${by === "ingress-gce" ? '"Internal"' : "Internal"} annotation. External LoadBalancer Service provisioned.`,
    });
  w.steps.push(
    `The class wins over load-balancer-type "${w.typeAnn}": the load balancer is external (§1.1)${exact ? "" : "; no ConflictingConfiguration event, which only exactly networking.gke.io/load-balancer-type: Internal raises"}.`,
  );
}

/** The CCM's forked service controller claims the two -legacy classes, when it runs. */
function legacyClaimed(w: Walk): boolean {
  const { version, flags } = w.options;
  if (!atLeast(version, "1.34")) {
    w.steps.push(
      `The class needs the CCM's forked service controller, which cloud-provider-gcp has from release-1.34; at ${version.text} the CCM's service controller ignores every Service with a class.`,
    );
    return false;
  }
  if (!flags["gke-service-lb-controller"]) {
    w.steps.push(
      "The CCM's forked service controller (gke-service-lb-controller, off by default in cloud-provider-gcp) is not running: GKE documents the -legacy classes from 1.37 (--gke-flag gke-service-lb-controller=true to assume it runs).",
    );
    return false;
  }
  w.steps.push(
    "The CCM's forked service controller claims the -legacy classes (WantsLoadBalancer, gkeCCMClasses); EnsureLoadBalancer serves them and no other class.",
  );
  return true;
}

/** ingress-gce's annotations without any L4 finalizer: someone removed it by hand. */
function removedFinalizerWarning(w: Walk): void {
  const { ann, fin } = w;
  const igResources = ann[IG_RESOURCE_ANNOTATION] !== undefined;
  const igFinalizer = fin.has(FINALIZER.ilbV2) || fin.has(FINALIZER.netlbV2) || fin.has(FINALIZER.netlbV3);
  if (igResources && !igFinalizer && !fin.has(FINALIZER.ilbV1) && !fin.has(FINALIZER.netlbV1))
    w.events.push({
      type: "Warning",
      reason: "UnexpectedlyRemovedFinalizer",
      message: `The L4 finalizer was removed from the Service although ${IG_RESOURCE_ANNOTATION} shows its load balancer resources still exist.`,
    });
}

/** Internal, no class: the CCM's ILB keeps its finalizer; otherwise subsetting decides (§1.3). */
function internalByFinalizer(w: Walk): ControllerChoice {
  const { fin } = w;
  if (fin.has(FINALIZER.ilbV1)) {
    w.steps.push(
      `Finalizer ${FINALIZER.ilbV1}: the CCM keeps its instance-group ILB; subsetting never migrates it.`,
    );
    return done(w, "ccm-ilb", "INTERNAL");
  }
  if (w.subsetting) {
    w.steps.push(
      fin.has(FINALIZER.ilbV2)
        ? `Finalizer ${FINALIZER.ilbV2}: the ILB subsetting controller owns it (NEG backends).`
        : `With subsetting the CCM skips new ILBs; the ILB subsetting controller adds ${FINALIZER.ilbV2} and the NEG controller then builds NEGs.`,
    );
    return done(w, "subsetting-ilb", "INTERNAL");
  }
  if (fin.has(FINALIZER.ilbV2))
    w.findings.push({
      code: "gke_subsetting_finalizer_without_subsetting",
      severity: "warning",
      subject: w.subject,
      message: `The Service carries ${FINALIZER.ilbV2} but subsetting is off; GKE subsetting cannot be disabled once on.`,
    });
  w.steps.push("Without subsetting the CCM builds an instance-group ILB (§1.3).");
  return done(w, "ccm-ilb", "INTERNAL");
}

/** External, no class: a finalizer freezes the backend chosen at creation (§1.2); undefined without one. */
function externalByFinalizer(w: Walk): ControllerChoice | undefined {
  const { fin } = w;
  const rbsAnnotation = w.ann["cloud.google.com/l4-rbs"] === "enabled";
  if (rbsAnnotation && !atLeast(w.options.version, "1.25.5"))
    w.steps.push("cloud.google.com/l4-rbs needs GKE 1.25.5+: ignored at this version.");
  if (fin.has(FINALIZER.netlbV1)) {
    if (fin.has(FINALIZER.netlbV2) || fin.has(FINALIZER.netlbV3)) {
      w.events.push({
        type: "Warning",
        reason: "TargetPoolRaceWithRBS",
        message:
          "Both the target-pool and the RBS controller claimed this Service at creation; the RBS resources are deleted and the target pool stays.",
      });
      w.steps.push(
        "Target-pool and RBS finalizers both present: a creation race, the target pool wins (§1.2).",
      );
    } else if (rbsAnnotation) {
      w.events.push({
        type: "Warning",
        reason: "CanNotMigrateTargetPoolToRBS",
        message:
          "cloud.google.com/l4-rbs was added to a Service served by a target pool. Migration is not supported. Removing annotation.",
      });
      w.steps.push("l4-rbs on a target-pool Service: the annotation is removed, no migration (§1.2).");
    } else w.steps.push(`Finalizer ${FINALIZER.netlbV1}: the CCM keeps its target pool.`);
    return done(w, "target-pool", "EXTERNAL");
  }
  if (fin.has(FINALIZER.netlbV2)) {
    w.steps.push(
      `Finalizer ${FINALIZER.netlbV2}: RBS NetLB with instance groups, frozen at creation (§1.2).`,
    );
    return done(w, "rbs-instance-groups", "EXTERNAL");
  }
  if (fin.has(FINALIZER.netlbV3)) {
    w.steps.push(`Finalizer ${FINALIZER.netlbV3}: RBS NetLB with NEGs, frozen at creation (§1.2).`);
    return done(w, "rbs-neg", "EXTERNAL");
  }
  return undefined;
}

/** External, new: the l4-rbs annotation, GKE's default flags or existing RBS resources pick RBS. */
function externalByFlags(w: Walk): ControllerChoice {
  const { flags, version } = w.options;
  const rbsHonoured = w.ann["cloud.google.com/l4-rbs"] === "enabled" && atLeast(version, "1.25.5");
  const byDefault = flags["enable-l4-netlb-rbs-by-default"];
  const igResources = w.ann[IG_RESOURCE_ANNOTATION] !== undefined;
  if (rbsHonoured || byDefault || igResources) {
    w.steps.push(
      rbsHonoured
        ? 'Annotation cloud.google.com/l4-rbs: "enabled": the RBS NetLB controller owns it.'
        : byDefault
          ? "enable-l4-netlb-rbs-by-default is on (GKE 1.37+): new external Services get a backend-service NetLB."
          : "An RBS load balancer already exists (ingress-gce annotations): the RBS controller keeps it.",
    );
    const neg = flags["enable-l4-netlb-neg"] && flags["enable-l4-netlb-neg-default"];
    w.steps.push(
      neg
        ? "enable-l4-netlb-neg and -neg-default are on (1.32.2-gke.1652000+): GCE_VM_IP NEG backends, finalizer v3."
        : "NetLB NEGs are not the default at this version: instance-group backends, finalizer v2.",
    );
    return done(w, neg ? "rbs-neg" : "rbs-instance-groups", "EXTERNAL");
  }
  w.steps.push(
    "No class, no l4-rbs and RBS is not the default before 1.37: the CCM builds a target-pool NetLB.",
  );
  return done(w, "target-pool", "EXTERNAL");
}
