//! `rules graph`: the diagnosis graph as Graphviz dot or a Mermaid flowchart.

use llm_doctor_engine::Playbook;

/// Renders causes → causes (leads_to) and causes → symptoms (explains).
pub fn graph(pb: &Playbook, mermaid: bool) -> String {
    let mut out = String::new();
    if mermaid {
        out.push_str("flowchart LR\n");
        for s in &pb.symptoms {
            out.push_str(&format!("  {}([{}])\n", s.id, s.id));
        }
        for c in &pb.causes {
            out.push_str(&format!("  {}[{}]\n", c.id, c.id));
        }
        for c in &pb.causes {
            for &n in &c.leads_to {
                out.push_str(&format!("  {} --> {}\n", c.id, pb.causes[n].id));
            }
            for &s in &c.explains {
                out.push_str(&format!("  {} -.-> {}\n", c.id, pb.symptoms[s].id));
            }
            for (s, _) in &c.explains_when {
                out.push_str(&format!("  {} -.->|when| {}\n", c.id, pb.symptoms[*s].id));
            }
        }
    } else {
        out.push_str("digraph diagnosis {\n  rankdir=LR;\n");
        for s in &pb.symptoms {
            out.push_str(&format!(
                "  \"{}\" [shape=ellipse, style=filled, fillcolor=\"#fde2e2\"];\n",
                s.id
            ));
        }
        for c in &pb.causes {
            out.push_str(&format!("  \"{}\" [shape=box];\n", c.id));
        }
        for c in &pb.causes {
            for &n in &c.leads_to {
                out.push_str(&format!("  \"{}\" -> \"{}\";\n", c.id, pb.causes[n].id));
            }
            for &s in &c.explains {
                out.push_str(&format!(
                    "  \"{}\" -> \"{}\" [style=dashed];\n",
                    c.id, pb.symptoms[s].id
                ));
            }
            for (s, _) in &c.explains_when {
                out.push_str(&format!(
                    "  \"{}\" -> \"{}\" [style=dotted, label=\"when\"];\n",
                    c.id, pb.symptoms[*s].id
                ));
            }
        }
        out.push_str("}\n");
    }
    out
}
