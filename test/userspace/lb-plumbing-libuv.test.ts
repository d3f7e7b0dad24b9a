/** The userspace LB's socket behaviour on libuv's TCP handles (opt-in: `tcp: "experimental-libuv"`). */
import { lbPlumbingSuite } from "./lb-plumbing-suite.ts";

lbPlumbingSuite("libuv", 18600);
