//! deploy/: the Kubernetes manifests for `serve` next to kube-prometheus-stack. They validate
//! offline against the Kubernetes and Prometheus Operator schemas, the PrometheusRule is what
//! `rules export prometheus` writes, and the ConfigMap's configuration starts `serve`.

use std::io::BufRead;
use std::process::{Command, Stdio};

use crate::support::{outcome, root, run};

const MANIFESTS: [&str; 2] = [
    "deploy/kubernetes/llm-doctor.yaml",
    "deploy/kubernetes/prometheus-rule.yaml",
];

/// `node deploy/check/validate.mjs FILES`: success and its output.
fn validate(files: &[&str]) -> (bool, String) {
    let check = root().join("deploy/check");
    assert!(
        check.join("node_modules").exists(),
        "the schema packages are missing: run scripts/test.sh (or npm ci --prefix deploy/check)"
    );
    let script = check.join("validate.mjs");
    let mut args = vec![script.to_str().unwrap()];
    args.extend_from_slice(files);
    crate::export::tool("node", &args)
}

#[test]
fn the_manifests_validate_against_the_kubernetes_and_operator_schemas() {
    let (ok, out) = validate(&MANIFESTS);
    assert!(ok, "{out}");
    for kind in [
        "ConfigMap",
        "Deployment",
        "Service",
        "ServiceMonitor",
        "AlertmanagerConfig",
        "PrometheusRule",
    ] {
        assert!(
            out.contains(&format!(": {kind} llm-doctor")),
            "{kind}: {out}"
        );
    }
    // The check has teeth: a wrong type, a value the operator's enum lacks, a kind it has no
    // schema for.
    let text = std::fs::read_to_string(root().join(MANIFESTS[0])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (bad, field) in [
        (
            text.replace("containerPort: 9095", "containerPort: \"x\""),
            "containerPort must be integer",
        ),
        (
            text.replace("matchType: \"=~\"", "matchType: \"~~\""),
            "matchType must be equal to one of the allowed values",
        ),
        (
            text.replace("kind: Service\n", "kind: Servise\n"),
            "no schema for v1 Servise",
        ),
    ] {
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, bad).unwrap();
        let (ok, out) = validate(&[path.to_str().unwrap()]);
        assert!(!ok && out.contains(field), "{field}: {out}");
    }
}

/// The PrometheusRule carries exactly the groups `rules export prometheus` prints;
/// `UPDATE_GOLDEN=1` rewrites it after a playbook change (review the diff).
#[test]
fn the_prometheus_rule_is_the_export() {
    let (code, export, err) = outcome(&run(&["rules", "export", "prometheus"]));
    assert_eq!(code, 0, "{err}");
    let export: serde_yaml::Value = serde_yaml::from_str(&export).unwrap();
    let path = root().join(MANIFESTS[1]);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let resource = serde_yaml::from_str::<serde_yaml::Value>(
            "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: llm-doctor\n  namespace: monitoring\n  labels:\n    app.kubernetes.io/name: llm-doctor\n    release: kube-prometheus-stack\nspec: {}\n",
        );
        let mut resource = resource.unwrap();
        resource["spec"]["groups"] = export["groups"].clone();
        std::fs::write(
            &path,
            "# Written by tests/deploy.rs from `llm-doctor rules export prometheus` (UPDATE_GOLDEN=1):\n# do not edit. kube-prometheus-stack's Prometheus selects rules by the release label.\n"
                .to_string()
                + &serde_yaml::to_string(&resource).unwrap(),
        )
        .unwrap();
    }
    let committed: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(committed["kind"], "PrometheusRule");
    assert!(
        committed["spec"]["groups"] == export["groups"],
        "{} is stale: run with UPDATE_GOLDEN=1",
        MANIFESTS[1]
    );
}

/// The configuration the ConfigMap mounts starts `serve` (its addresses pointed here: the
/// cluster's are not reachable from a test).
#[test]
fn the_configmap_configuration_starts_serve() {
    let text = std::fs::read_to_string(root().join(MANIFESTS[0])).unwrap();
    let first: serde_yaml::Value =
        serde_yaml::from_str(text.split("\n---\n").next().unwrap()).unwrap();
    assert_eq!(first["kind"], "ConfigMap");
    let config = first["data"]["doctor.yaml"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("receiver-token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let local = config
        .replace("0.0.0.0:9095", "127.0.0.1:0")
        .replace(
            "/etc/llm-doctor/secret/receiver-token",
            token.to_str().unwrap(),
        )
        .replace("llm-doctor-peers.monitoring.svc:9095", "localhost:9095");
    assert_ne!(local, config, "the test no longer rewrites the addresses");
    let path = dir.path().join("doctor.yaml");
    std::fs::write(&path, local).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_llm-doctor"))
        // As the Deployment runs it, its pod IP advertised.
        .args([
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--advertise",
            "http://127.0.0.1:9095",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first_line = std::io::BufReader::new(child.stderr.take().unwrap())
        .lines()
        .next()
        .map(|l| l.unwrap_or_default())
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first_line.contains("is listening"), "{first_line}");
}

/// The replicas find each other: `peers.dns` names the headless Service of the Deployment's
/// pods, and each replica advertises its pod IP.
#[test]
fn the_replicas_are_peers_through_a_headless_service() {
    let text = std::fs::read_to_string(root().join(MANIFESTS[0])).unwrap();
    let docs: Vec<serde_yaml::Value> = text
        .split("\n---\n")
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let named = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    let config = named("ConfigMap", "llm-doctor-config")["data"]["doctor.yaml"]
        .as_str()
        .unwrap();
    assert!(
        config.contains("dns: llm-doctor-peers.monitoring.svc:9095"),
        "{config}"
    );
    let peers = named("Service", "llm-doctor-peers");
    assert_eq!(peers["spec"]["clusterIP"], "None");
    let deployment = named("Deployment", "llm-doctor");
    assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(
        peers["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--advertise", "http://$(POD_IP):9095"]),
        "{args:?}"
    );
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "status.podIP"
    );
}
