package lambda

import "github.com/ddbworker/ddbworker/lambda/internal/emf"

// ReportedMetricsForTest are the metrics the function writes as EMF.
func ReportedMetricsForTest() []emf.Metric { return reportedMetrics() }
