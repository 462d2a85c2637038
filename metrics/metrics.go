package metrics

// Provider declares instruments. Its methods are called when a component
// is built, never per message; they must be safe for concurrent use, as
// must the instruments they return.
type Provider interface {
	// Counter declares a counter (a total that only grows).
	Counter(name, help string, labels ...string) Vec[Counter]
	// Gauge declares a gauge (a value that goes up and down).
	Gauge(name, help string, labels ...string) Vec[Gauge]
	// Histogram declares a histogram with the given upper bounds of its
	// buckets, in increasing order.
	Histogram(name, help string, buckets []float64, labels ...string) Vec[Histogram]
}

// Vec is an instrument's family: one instrument per set of label values,
// given in the order of the declared label names (none for an instrument
// declared without labels).
type Vec[T any] interface {
	WithLabelValues(values ...string) T
}

// Counter is a total that only grows.
type Counter interface {
	Inc()
	// Add adds v, which must not be negative.
	Add(v float64)
}

// Gauge is a value that goes up and down.
type Gauge interface {
	Set(v float64)
	Inc()
	Dec()
	Add(v float64)
}

// Histogram counts observations into buckets.
type Histogram interface {
	Observe(v float64)
}

// Discard is the Provider of a component configured with none: its
// instruments count nothing.
var Discard Provider = discard{}

type discard struct{}

func (discard) Counter(string, string, ...string) Vec[Counter] { return nopVec[Counter]{nop{}} }
func (discard) Gauge(string, string, ...string) Vec[Gauge]     { return nopVec[Gauge]{nop{}} }
func (discard) Histogram(string, string, []float64, ...string) Vec[Histogram] {
	return nopVec[Histogram]{nop{}}
}

// nopVec is a family of Discard: every label set is the same nop.
type nopVec[T any] struct{ i T }

func (v nopVec[T]) WithLabelValues(...string) T { return v.i }

// nop is every instrument of Discard.
type nop struct{}

func (nop) Inc()            {}
func (nop) Dec()            {}
func (nop) Add(float64)     {}
func (nop) Set(float64)     {}
func (nop) Observe(float64) {}
