import assert from "node:assert/strict";
import { test } from "node:test";
import { stringify } from "yaml";
import { parseDocuments } from "./documents.ts";

const list = {
  apiVersion: "v1",
  kind: "List",
  items: [
    { apiVersion: "v1", kind: "Node", metadata: { name: "a" } },
    { apiVersion: "v1", kind: "Service", metadata: { name: "s", annotations: { "x/y": "1" } } },
  ],
};

test("a JSON List and the same List in YAML give the same documents", () => {
  const fromJson = parseDocuments("c.json", JSON.stringify(list));
  const fromYaml = parseDocuments("c.yaml", stringify(list));
  assert.deepEqual(fromJson.problems, []);
  assert.equal(fromJson.documents.length, 2);
  assert.deepEqual(
    fromJson.documents.map((d) => ({ ...d, source: "" })),
    fromYaml.documents.map((d) => ({ ...d, source: "" })),
  );
  assert.deepEqual(fromJson.documents[1], { source: "c.json", index: 1, item: 2, value: list.items[1] });
});

test("text that only looks like JSON goes to the YAML parser (flow style, broken JSON)", () => {
  const flow = parseDocuments("f.yaml", "{apiVersion: v1, kind: Node, metadata: {name: a}}\n");
  assert.deepEqual(flow.documents[0]?.value, { apiVersion: "v1", kind: "Node", metadata: { name: "a" } });
  const broken = parseDocuments("b.json", '{"kind": "Node",, }');
  assert.equal(broken.documents.length, 0);
  assert.match(broken.problems[0]?.message ?? "", /not valid YAML\/JSON/);
});
