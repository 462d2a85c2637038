// Package deploy holds ddbworker's shipped operational assets and the tests
// that check them; it has no Go API.
//
// # What it owns
//
//   - prometheus/ddbworker-alerts.yaml: the Prometheus alerting rules, each
//     with a severity and its runbook's URL (docs/runbooks.md), and
//     prometheus/tests/: a promtool rules test per alert, with series that
//     fire it and series that must not;
//   - grafana/ddbworker.json: the Grafana dashboard, templated by job and
//     instance;
//   - keda/scaledobject.yaml: the KEDA ScaledObject that scales a worker
//     Deployment on its SQS backlog but not past the database's capacity
//     (docs/scaling.md).
//
// Its tests run promtool (check and test the rules, check every query of
// the dashboard and the ScaledObject), check each asset's structure, and
// evaluate the ScaledObject's formula as KEDA does. That every metric these
// assets name is one the daemon registers is checked by package daemon's
// tests, which build its registries.
package deploy
