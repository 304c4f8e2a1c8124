//! The diagnosis graph: causes lead to causes and explain symptoms.
//!
//! Built with petgraph to check what makes the graph usable: no cycles among causes (printed as
//! a path so the author sees the loop), every cause leads to at least one symptom, and, for root-cause
//! analysis, every cause's transitive ancestors.

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{Dfs, Reversed};
use petgraph::Direction;

use super::compiled::{Cause, LoadErrorKind};

/// Checks the graph and fills `Cause::ancestors`. Returns the problems found.
pub(super) fn validate(causes: &mut [Cause], symptom_count: usize) -> Vec<(LoadErrorKind, String)> {
    let mut errors = Vec::new();
    // Nodes: causes first (index i), then symptoms (index causes.len() + j).
    let mut g: StableDiGraph<usize, ()> = StableDiGraph::new();
    let nodes: Vec<NodeIndex> = (0..causes.len() + symptom_count)
        .map(|i| g.add_node(i))
        .collect();
    for (i, c) in causes.iter().enumerate() {
        for &j in &c.leads_to {
            g.add_edge(nodes[i], nodes[j], ());
        }
        for &s in c
            .explains
            .iter()
            .chain(c.explains_when.iter().map(|(s, _)| s))
        {
            g.add_edge(nodes[i], nodes[causes.len() + s], ());
        }
    }

    if let Some(cycle) = find_cycle(&g, &nodes[..causes.len()]) {
        let path: Vec<&str> = cycle.iter().map(|&n| causes[g[n]].id.as_str()).collect();
        errors.push((
            LoadErrorKind::Cycle,
            format!("error: cycle in diagnosis graph: [{}]", path.join(" -> ")),
        ));
        return errors;
    }

    for (i, c) in causes.iter().enumerate() {
        let mut dfs = Dfs::new(&g, nodes[i]);
        let mut reaches_symptom = false;
        while let Some(n) = dfs.next(&g) {
            if g[n] >= causes.len() {
                reaches_symptom = true;
                break;
            }
        }
        if !reaches_symptom {
            errors.push((
                LoadErrorKind::Unreachable,
                format!(
                    "error: cause `{}` ({}) is not reachable from any symptom: give it `explains`, `explains_when` or `leads_to`",
                    c.id, c.file
                ),
            ));
        }
    }

    let reversed = Reversed(&g);
    let ancestors: Vec<Vec<usize>> = (0..causes.len())
        .map(|i| {
            let mut dfs = Dfs::new(reversed, nodes[i]);
            let mut up = Vec::new();
            while let Some(n) = dfs.next(reversed) {
                if n != nodes[i] {
                    up.push(g[n]);
                }
            }
            up.sort_unstable();
            up
        })
        .collect();
    for (c, a) in causes.iter_mut().zip(ancestors) {
        c.ancestors = a;
    }
    errors
}

/// Finds one cycle among `starts` and returns it as a closed path (first node repeated at the end).
fn find_cycle(g: &StableDiGraph<usize, ()>, starts: &[NodeIndex]) -> Option<Vec<NodeIndex>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let mut mark = vec![Mark::New; g.node_count()];
    for &start in starts {
        if mark[start.index()] != Mark::New {
            continue;
        }
        // Iterative DFS keeping the active path, so a back edge yields the cycle directly.
        let mut path: Vec<NodeIndex> = vec![start];
        let mut iters = vec![g.neighbors_directed(start, Direction::Outgoing).detach()];
        mark[start.index()] = Mark::Active;
        while let Some(it) = iters.last_mut() {
            match it.next_node(g) {
                Some(next) => match mark[next.index()] {
                    Mark::Active => {
                        let from = path.iter().position(|&n| n == next).unwrap_or(0);
                        let mut cycle: Vec<NodeIndex> = path[from..].to_vec();
                        cycle.push(next);
                        return Some(cycle);
                    }
                    Mark::New => {
                        mark[next.index()] = Mark::Active;
                        path.push(next);
                        iters.push(g.neighbors_directed(next, Direction::Outgoing).detach());
                    }
                    Mark::Done => {}
                },
                None => {
                    let n = path.pop().expect("path and iterators have equal length");
                    mark[n.index()] = Mark::Done;
                    iters.pop();
                }
            }
        }
    }
    None
}
