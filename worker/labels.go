package worker

import (
	"regexp"
	"sync"
)

// Metric labels are bounded: producer input never becomes a label value.

// Label values that stand for many.
const (
	labelUnknownType = "(unknown)"
	labelOtherCode   = "OTHER"
)

// maxCodeLabels is how many distinct failure codes get their own label
// value; later ones are counted as OTHER.
const maxCodeLabels = 100

var codePattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// labels maps message types and failure codes to bounded label values.
type labels struct {
	types map[string]bool
	mu    sync.Mutex
	codes map[string]bool
}

func newLabels(routes map[string]route) *labels {
	l := &labels{types: make(map[string]bool, len(routes)), codes: map[string]bool{}}
	for t := range routes {
		l.types[t] = true
	}
	return l
}

// messageType is t for a registered type, "" for a message without one
// (undecodable), and one value for every other.
func (l *labels) messageType(t string) string {
	switch {
	case t == "":
		return ""
	case l.types[t]:
		return t
	}
	return labelUnknownType
}

// code is c when it looks like a code (upper case, digits, underscores, at
// most 64) and fewer than maxCodeLabels codes were seen; OTHER otherwise.
func (l *labels) code(c string) string {
	if !codePattern.MatchString(c) {
		return labelOtherCode
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.codes[c] {
		return c
	}
	if len(l.codes) >= maxCodeLabels {
		return labelOtherCode
	}
	l.codes[c] = true
	return c
}
