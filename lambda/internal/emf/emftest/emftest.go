package emftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The specification's limits.
const (
	maxDocumentBytes  = 256 << 10 // a CloudWatch Logs event (1 MB today; 256 KB in earlier versions: the stricter)
	maxMetrics        = 100       // MetricDefinitions per MetricDirective
	maxValues         = 100       // members of a numeric array metric target
	maxDimensionKeys  = 30        // keys per DimensionSet
	maxDimensionValue = 1024      // characters of a dimension target's value
	maxReference      = 250       // characters of a DimensionSet's reference (the schema's maxLength)
	maxNamespace      = 1024      // the schema's maxLength; CloudWatch's own limit is 255
	maxMetricName     = 1024      // the schema's maxLength; CloudWatch's own limit is 255
)

// units is the schema's MetricUnit pattern.
var units = regexp.MustCompile(`^(Seconds|Microseconds|Milliseconds|Bytes|Kilobytes|Megabytes|Gigabytes|Terabytes|Bits|Kilobits|Megabits|Gigabits|Terabits|Percent|Count|Bytes\/Second|Kilobytes\/Second|Megabytes\/Second|Gigabytes\/Second|Terabytes\/Second|Bits\/Second|Kilobits\/Second|Megabits\/Second|Gigabits\/Second|Terabits\/Second|Count\/Second|None)$`)

// Document is a parsed, valid document: its timestamp, namespace,
// dimension sets and their values, and metrics (number or numbers).
type Document struct {
	Timestamp  int64
	Namespace  string
	Dimensions [][]string
	Values     map[string]string    // dimension key → value
	Metrics    map[string][]float64 // metric name → its value(s)
	Units      map[string]string
	Arrays     map[string]bool // metrics given as arrays
}

// Validate parses line, one document, and checks every rule of the
// specification (and CloudWatch's limits where they are stricter); it
// returns the document and every violation, joined.
func Validate(line []byte) (*Document, error) {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(line) > maxDocumentBytes {
		fail("the document has %d bytes: more than a log event's %d", len(line), maxDocumentBytes)
	}
	// The LogEvent message MUST be a valid JSON object with no additional
	// data at the beginning or end.
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() || dec.InputOffset() != int64(len(bytes.TrimRight(line, " \t\r\n"))) {
		return nil, errors.New("data after the JSON object")
	}
	if root == nil {
		return nil, errors.New("not a JSON object")
	}
	doc := &Document{Values: map[string]string{}, Metrics: map[string][]float64{}, Units: map[string]string{}, Arrays: map[string]bool{}}

	// Root node: MUST contain _aws, a Metadata object.
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return nil, errors.New(`the root has no "_aws" object`)
	}
	// Metadata: MUST contain CloudWatchMetrics and Timestamp; no other
	// members (objects of the specification MUST NOT contain additional
	// members).
	for k := range aws {
		if k != "CloudWatchMetrics" && k != "Timestamp" {
			fail("_aws has a member the specification does not define: %q", k)
		}
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		fail("_aws.Timestamp is missing or not a number")
	} else if n, err := ts.Int64(); err != nil || strings.ContainsAny(ts.String(), ".eE") {
		fail("_aws.Timestamp %s is not an integer number of milliseconds", ts)
	} else if n < 1e12 || n > 1e13 {
		fail("_aws.Timestamp %d is not milliseconds since 1970 (seconds?)", n)
	} else {
		doc.Timestamp = n
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok {
		fail("_aws.CloudWatchMetrics is missing or not an array")
	}
	if ok && len(directives) == 0 {
		fail("_aws.CloudWatchMetrics is empty: the document defines no metric")
	}
	dimensionKeys, metricNames := map[string]bool{}, map[string]bool{}
	for i, raw := range directives {
		d, ok := raw.(map[string]any)
		if !ok {
			fail("CloudWatchMetrics[%d] is not an object", i)
			continue
		}
		for k := range d {
			if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
				fail("CloudWatchMetrics[%d] has a member the specification does not define: %q", i, k)
			}
		}
		// Namespace: a string (the schema: 1..1024; CloudWatch: 1..255).
		ns, ok := d["Namespace"].(string)
		switch {
		case !ok:
			fail("CloudWatchMetrics[%d].Namespace is missing or not a string", i)
		case ns == "" || utf8.RuneCountInString(ns) > maxNamespace || len(ns) > 255:
			fail("CloudWatchMetrics[%d].Namespace %q must have 1..255 characters", i, ns)
		default:
			doc.Namespace = ns
		}
		// Dimensions: an array of DimensionSets (the schema: at least one),
		// each an array of at most 30 strings, each a root member whose
		// value is a string of at most 1024 characters.
		sets, ok := d["Dimensions"].([]any)
		if !ok || len(sets) == 0 {
			fail("CloudWatchMetrics[%d].Dimensions is missing, not an array or empty", i)
		}
		for j, rs := range sets {
			set, ok := rs.([]any)
			if !ok {
				fail("CloudWatchMetrics[%d].Dimensions[%d] is not an array", i, j)
				continue
			}
			if len(set) > maxDimensionKeys {
				fail("CloudWatchMetrics[%d].Dimensions[%d] has %d keys: more than %d", i, j, len(set), maxDimensionKeys)
			}
			keys := []string{}
			seen := map[string]bool{}
			for _, rk := range set {
				k, ok := rk.(string)
				if !ok || k == "" || utf8.RuneCountInString(k) > maxReference {
					fail("CloudWatchMetrics[%d].Dimensions[%d]: %v is not a reference of 1..%d characters", i, j, rk, maxReference)
					continue
				}
				if seen[k] {
					fail("CloudWatchMetrics[%d].Dimensions[%d] names %q twice", i, j, k)
				}
				seen[k] = true
				keys = append(keys, k)
				dimensionKeys[k] = true
				switch v, present := root[k]; {
				case !present:
					fail("dimension %q has no root member", k)
				case !isString(v):
					fail("dimension %q: its root member is not a string: %v", k, v)
				case v.(string) == "" || utf8.RuneCountInString(v.(string)) > maxDimensionValue:
					fail("dimension %q: its value must have 1..%d characters", k, maxDimensionValue)
				default:
					doc.Values[k] = v.(string)
				}
			}
			doc.Dimensions = append(doc.Dimensions, keys)
		}
		// Metrics: at most 100 MetricDefinitions: Name (a reference to a
		// root member that is a number or an array of at most 100
		// numbers), optional Unit (a CloudWatch unit) and optional
		// StorageResolution (1 or 60); nothing else.
		defs, ok := d["Metrics"].([]any)
		if !ok {
			fail("CloudWatchMetrics[%d].Metrics is missing or not an array", i)
		}
		if len(defs) > maxMetrics {
			fail("CloudWatchMetrics[%d].Metrics has %d definitions: more than %d", i, len(defs), maxMetrics)
		}
		for j, rd := range defs {
			def, ok := rd.(map[string]any)
			if !ok {
				fail("CloudWatchMetrics[%d].Metrics[%d] is not an object", i, j)
				continue
			}
			for k := range def {
				if k != "Name" && k != "Unit" && k != "StorageResolution" {
					fail("CloudWatchMetrics[%d].Metrics[%d] has a member the specification does not define: %q", i, j, k)
				}
			}
			name, ok := def["Name"].(string)
			if !ok || name == "" || utf8.RuneCountInString(name) > maxMetricName || len(name) > 255 {
				fail("CloudWatchMetrics[%d].Metrics[%d].Name %v must be a string of 1..255 characters", i, j, def["Name"])
				continue
			}
			if metricNames[name] {
				fail("metric %q is defined twice", name)
			}
			metricNames[name] = true
			if u, present := def["Unit"]; present {
				if s, ok := u.(string); !ok || !units.MatchString(s) {
					fail("metric %q: Unit %v is not a CloudWatch unit", name, u)
				} else {
					doc.Units[name] = s
				}
			}
			if r, present := def["StorageResolution"]; present {
				if n, ok := r.(json.Number); !ok || (n.String() != "1" && n.String() != "60") {
					fail("metric %q: StorageResolution %v must be the integer 1 or 60", name, r)
				}
			}
			target, present := root[name]
			if !present {
				fail("metric %q has no root member", name)
				continue
			}
			values, array, err := numbers(target)
			if err != nil {
				fail("metric %q: %v", name, err)
				continue
			}
			doc.Metrics[name], doc.Arrays[name] = values, array
		}
	}
	for k := range dimensionKeys {
		if metricNames[k] {
			fail("%q is both a dimension and a metric", k)
		}
	}
	return doc, errors.Join(errs...)
}

func isString(v any) bool { _, ok := v.(string); return ok }

// numbers reads a metric target: a number, or an array of 1..100 numbers.
func numbers(v any) ([]float64, bool, error) {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return nil, false, fmt.Errorf("%s is not a number", v)
		}
		return []float64{f}, false, nil
	case []any:
		if len(v) == 0 || len(v) > maxValues {
			return nil, true, fmt.Errorf("an array of %d values: it must hold 1..%d", len(v), maxValues)
		}
		out := make([]float64, 0, len(v))
		for _, e := range v {
			n, ok := e.(json.Number)
			if !ok {
				return nil, true, fmt.Errorf("the array holds %v, not a number", e)
			}
			f, err := n.Float64()
			if err != nil {
				return nil, true, err
			}
			out = append(out, f)
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%v is neither a number nor an array of numbers", v)
}
