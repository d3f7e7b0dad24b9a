/** The userspace LB's socket behaviour on libuv's TCP handles (the default where available). */
import { lbPlumbingSuite } from "./lb-plumbing-suite.ts";

lbPlumbingSuite("libuv", 18600);
