// `npm run build:xdp`: compiles src/lb-host/xdp/passlb-xdp.c to dist/bpf/passlb-xdp.o
// (docs/dataplane-xdp.md "Build"). Needs clang and libbpf-dev; the quickstart does not.
import { buildXdpObject, XDP_OBJECT } from "../src/lb-host/xdp/xdp-object.ts";

await buildXdpObject(process.argv[2] ?? XDP_OBJECT);
console.log(`built ${process.argv[2] ?? XDP_OBJECT}`);
