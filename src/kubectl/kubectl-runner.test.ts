import assert from "node:assert/strict";
import { test } from "node:test";
import { classifyKubectlFailure, type KubectlRunner, runAll } from "./kubectl-runner.ts";

const GET = ["get", "loadbalancerippools", "-o", "json"];

test("kubectl's failures get stable codes from its own messages", () => {
  const cases: [string, boolean, string][] = [
    ["", true, "kubectl_missing"],
    ['error: the server doesn\'t have a resource type "loadbalancerippools"\n', false, "crd_missing"],
    [
      'Error from server (Forbidden): loadbalancerippools.passlb.io is forbidden: User "jane" cannot list resource "loadbalancerippools"\n',
      false,
      "kubectl_forbidden",
    ],
    [
      "E1130 12:00:00 memcache.go:265] couldn't get current server API group list\nUnable to connect to the server: dial tcp 192.0.2.1:6443: i/o timeout\n",
      false,
      "api_unreachable",
    ],
    ["error: You must be logged in to the server (Unauthorized)\n", false, "kubectl_failed"],
  ];
  for (const [stderr, missing, code] of cases) {
    const e = classifyKubectlFailure(GET, { missing, stderr });
    assert.equal(e.code, code, stderr);
    assert.deepEqual(e.details.args, GET);
  }
});

test("the message names the call and kubectl's own line, not client-go's log lines", () => {
  const e = classifyKubectlFailure(GET, {
    missing: false,
    stderr:
      'E1130 14:02:05.134229   25258 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list"\nThe connection to the server localhost:8080 was refused - did you specify the right host or port?\n',
  });
  assert.equal(e.code, "api_unreachable");
  assert.match(e.message, /: The connection to the server localhost:8080 was refused - did you specify/);
});

test("the message names the call and kubectl's first line", () => {
  const e = classifyKubectlFailure(GET, {
    missing: false,
    stderr: "\nerror: You must be logged in to the server (Unauthorized)\n",
  });
  assert.equal(
    e.message,
    "kubectl get loadbalancerippools -o json failed: error: You must be logged in to the server (Unauthorized)",
  );
});

test("runAll reports a failed call only after every other call has ended", async () => {
  const ended: string[] = [];
  const runner: KubectlRunner = {
    run: (args) =>
      args[0] === "fail"
        ? Promise.reject(new Error("no such resource"))
        : new Promise((resolve) =>
            setTimeout(() => {
              ended.push(args[0]!);
              resolve(`${args[0]} output`);
            }, 50),
          ),
  };
  await assert.rejects(runAll(runner, [["fail"], ["slow"]]), /no such resource/);
  assert.deepEqual(ended, ["slow"], "the slow call had ended when the failure was reported");
  assert.deepEqual(await runAll(runner, [["a"], ["b"]]), ["a output", "b output"]);
});
