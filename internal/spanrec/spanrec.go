package spanrec

import (
	"context"
	"crypto/rand"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Provider is a trace.TracerProvider that records every span.
type Provider struct {
	embedded.TracerProvider
	onEnd func(*Span)

	mu    sync.Mutex
	ended []*Span
}

// New returns a Provider that calls onEnd (when not nil) after each span
// ends.
func New(onEnd func(*Span)) *Provider { return &Provider{onEnd: onEnd} }

// Tracer returns a tracer whose spans p records.
func (p *Provider) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{p: p} }

// Ended returns the spans that ended, in order.
func (p *Provider) Ended() []*Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Span(nil), p.ended...)
}

type tracer struct {
	embedded.Tracer
	p *Provider
}

func (tr tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	if cfg.NewRoot() {
		parent = trace.SpanContext{}
	}
	sc := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceFlags: trace.FlagsSampled}
	if !parent.IsValid() {
		_, _ = rand.Read(sc.TraceID[:])
		parent = trace.SpanContext{}
	}
	_, _ = rand.Read(sc.SpanID[:])
	s := &Span{p: tr.p, name: name, parent: parent, sc: trace.NewSpanContext(sc), kind: trace.ValidateSpanKind(cfg.SpanKind())}
	s.SetAttributes(cfg.Attributes()...)
	for _, l := range cfg.Links() {
		s.AddLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// Span is a recorded span.
type Span struct {
	embedded.Span
	p      *Provider
	parent trace.SpanContext
	sc     trace.SpanContext
	kind   trace.SpanKind

	mu     sync.Mutex
	name   string
	attrs  []attribute.KeyValue
	links  []trace.Link
	events []string
	status Status
	done   bool
}

// Status is a span's status.
type Status struct {
	Code        codes.Code
	Description string
}

// Name is the span's name.
func (s *Span) Name() string { s.mu.Lock(); defer s.mu.Unlock(); return s.name }

// Attributes are the span's attributes, one per key.
func (s *Span) Attributes() []attribute.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attribute.KeyValue(nil), s.attrs...)
}

// Links are the span's links.
func (s *Span) Links() []trace.Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]trace.Link(nil), s.links...)
}

// Events are the names of the span's events (RecordError's: "exception").
func (s *Span) Events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// Status is the span's status.
func (s *Span) Status() Status { s.mu.Lock(); defer s.mu.Unlock(); return s.status }

// Parent is the span context of the span's parent (invalid for a root).
func (s *Span) Parent() trace.SpanContext { return s.parent }

// SpanKind is the span's kind (Internal when none was given, as the SDK's).
func (s *Span) SpanKind() trace.SpanKind { return s.kind }

// SpanContext is the span's own context (sampled).
func (s *Span) SpanContext() trace.SpanContext { return s.sc }

// TracerProvider is the provider that recorded the span.
func (s *Span) TracerProvider() trace.TracerProvider { return s.p }

// IsRecording is true until the span ends.
func (s *Span) IsRecording() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.done }

// End records the span as ended (once).
func (s *Span) End(...trace.SpanEndOption) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	s.mu.Unlock()
	s.p.mu.Lock()
	s.p.ended = append(s.p.ended, s)
	s.p.mu.Unlock()
	if s.p.onEnd != nil {
		s.p.onEnd(s)
	}
}

// AddEvent records the event's name.
func (s *Span) AddEvent(name string, _ ...trace.EventOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.events = append(s.events, name)
	}
}

// AddLink adds a link.
func (s *Span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done && l.SpanContext.IsValid() {
		s.links = append(s.links, l)
	}
}

// RecordError records an "exception" event, as the SDK does; the status
// is unchanged.
func (s *Span) RecordError(err error, _ ...trace.EventOption) {
	if err != nil {
		s.AddEvent("exception")
	}
}

// SetStatus raises the status (Unset < Error < Ok); the description is
// kept for Error only.
func (s *Span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || code < s.status.Code {
		return
	}
	st := Status{Code: code}
	if code == codes.Error {
		st.Description = description
	}
	s.status = st
}

// SetName renames the span.
func (s *Span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.name = name
	}
}

// SetAttributes sets attributes, a key's last value winning.
func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
next:
	for _, a := range kv {
		if !a.Valid() {
			continue
		}
		for i := range s.attrs {
			if s.attrs[i].Key == a.Key {
				s.attrs[i] = a
				continue next
			}
		}
		s.attrs = append(s.attrs, a)
	}
}
