package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/ddbworker/ddbworker/effects"
)

// Mode is how the double answers one call.
type Mode int

// Modes.
const (
	OK      Mode = iota
	Decline      // 402: refused, nothing done
	Busy         // 503: nothing done
	Fail500      // performs the effect, then answers 500
	Lose         // performs the effect, then drops the connection
	Hold         // performs the effect, then answers only after Release
)

// Provider is the double.
type Provider struct {
	srv *httptest.Server

	mu      sync.Mutex
	calls   map[string]int      // per key: requests received
	done    map[string][]string // per key: effects performed (charge ids)
	byKey   map[string]string   // idempotent: key → charge id
	keys    []string            // every call's key, in order
	next    int
	mode    func(key string, call int) Mode
	release chan struct{}
	// Entered receives the key of each call that holds (Hold).
	Entered chan string
}

// New starts a double on 127.0.0.1.
func New() *Provider {
	p := &Provider{calls: map[string]int{}, done: map[string][]string{}, byKey: map[string]string{},
		mode: func(string, int) Mode { return OK }, release: make(chan struct{}), Entered: make(chan string, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, true) })
	mux.HandleFunc("POST /sends", func(w http.ResponseWriter, r *http.Request) { p.serve(w, r, false) })
	mux.HandleFunc("GET /tally", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Tally())
	})
	p.srv = httptest.NewServer(mux)
	return p
}

// URL is the double's base URL.
func (p *Provider) URL() string { return p.srv.URL }

// Close stops the double (releasing held calls).
func (p *Provider) Close() {
	p.Release()
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// SetMode chooses how each call is answered: m gets the key and the call's
// number for that key (1 first).
func (p *Provider) SetMode(m func(key string, call int) Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

// Release lets held calls answer (once; later calls do not hold).
func (p *Provider) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request, idempotent bool) {
	key := r.Header.Get("Idempotency-Key")
	_, _ = io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	p.calls[key]++
	p.keys = append(p.keys, key)
	m := p.mode(key, p.calls[key])
	var id string
	switch {
	case m == Decline || m == Busy:
	case idempotent && p.byKey[key] != "":
		id = p.byKey[key]
	default:
		p.next++
		id = fmt.Sprintf("ch_%04d", p.next)
		p.done[key] = append(p.done[key], id)
		if idempotent {
			p.byKey[key] = id
		}
	}
	release := p.release
	p.mu.Unlock()
	switch m {
	case Decline:
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"error":"card_declined"}`))
	case Busy:
		w.WriteHeader(http.StatusServiceUnavailable)
	case Fail500:
		w.WriteHeader(http.StatusInternalServerError)
	case Lose:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
			}
		}
	default:
		if m == Hold {
			p.Entered <- key
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "status": "succeeded"})
	}
}

// Count returns key's tallies: calls received, effects performed.
func (p *Provider) Count(key string) (calls, performed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key], len(p.done[key])
}

// Charges returns the effects performed under key.
func (p *Provider) Charges(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.done[key]...)
}

// Keys returns every call's key in order.
func (p *Provider) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// Tally is the double's counts.
type Tally struct {
	Calls map[string]int      `json:"calls"`
	Done  map[string][]string `json:"done"`
}

// Tally returns a copy of the counts.
func (p *Provider) Tally() Tally {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := Tally{Calls: map[string]int{}, Done: map[string][]string{}}
	for k, v := range p.calls {
		t.Calls[k] = v
	}
	for k, v := range p.done {
		t.Done[k] = append([]string(nil), v...)
	}
	return t
}

// Charge returns the call function of a handler that charges cents at
// baseURL+path ("/charges" or "/sends") with the effect key as the
// Idempotency-Key: the Outcome on a 200, Refused on a 402, NotDone on a
// 503 or a request that could not be built, an error (outcome unclear)
// otherwise.
func Charge(client *http.Client, baseURL, path string, cents int64) effects.CallFunc {
	return func(ctx context.Context, key string) (effects.Outcome, error) {
		body, _ := json.Marshal(map[string]int64{"amount": cents})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(body))
		if err != nil {
			return effects.Outcome{}, effects.NotDone(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return effects.Outcome{}, fmt.Errorf("charge: %w", err) // may have been sent: unclear
		}
		defer resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var out struct{ ID, Status string }
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return effects.Outcome{}, fmt.Errorf("charge: response: %w", err)
			}
			return effects.Outcome{Ref: out.ID, Result: out.Status}, nil
		case http.StatusPaymentRequired:
			return effects.Outcome{}, effects.Refused("CARD_DECLINED", "the card was declined")
		case http.StatusServiceUnavailable:
			return effects.Outcome{}, effects.NotDone(errors.New("provider busy (503)"))
		}
		return effects.Outcome{}, fmt.Errorf("charge: provider answered %d", resp.StatusCode)
	}
}
