/** The userspace LB's socket behaviour on node:net sockets (the default). */
import { lbPlumbingSuite } from "./lb-plumbing-suite.ts";

lbPlumbingSuite("net", 18610);
