// Validates Kubernetes manifests offline: every document of every file given is checked against
// the schema of its apiVersion and kind (Kubernetes' own, and the Prometheus Operator's custom
// resources), as the API server's validation would. Exit 1 naming the file, document and field
// at fault; a kind it has no schema for is an error too, not a pass.
//   node deploy/check/validate.mjs deploy/kubernetes/*.yaml
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const groups = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
  "monitoring.coreos.com/v1alpha1":
    "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1alpha1",
};

let failed = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const [i, doc] of docs.entries()) {
    const where = `${file}: document ${i + 1}`;
    if (doc.errors.length) {
      console.error(`${where}: ${doc.errors[0].message}`);
      failed++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const module = groups[obj.apiVersion];
    let Model;
    if (module) {
      Model = (await import(`${module}/${obj.kind}`).catch(() => ({})))[obj.kind];
    }
    if (!Model) {
      console.error(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed++;
      continue;
    }
    try {
      new Model(obj).validate();
      checked++;
      console.log(`${where}: ${obj.kind} ${obj.metadata?.name}: valid`);
    } catch (e) {
      console.error(`${where}: ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
      failed++;
    }
  }
}
if (checked === 0 && failed === 0) {
  console.error("no document to check");
  process.exit(1);
}
process.exit(failed ? 1 : 0);
