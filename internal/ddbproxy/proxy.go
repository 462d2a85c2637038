package ddbproxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Mode is how the proxy answers the requests that arrive while it is set.
type Mode int

// Modes. The zero Mode is Pass.
const (
	// Pass forwards every request to Config.Target and copies the answer
	// back unchanged.
	Pass Mode = iota
	// Throttle answers 400 ProvisionedThroughputExceededException (data
	// plane) or ThrottlingException (control plane) without forwarding.
	Throttle
	// ServerError answers 500 InternalServerError and 503
	// ServiceUnavailableException in turn without forwarding.
	ServerError
	// Hang reads the request and holds it unanswered until the client gives
	// up (dropped), Config.HangFor passes or the mode leaves Hang (both:
	// forwarded).
	Hang
)

var modeNames = [...]string{Pass: "Pass", Throttle: "Throttle", ServerError: "ServerError", Hang: "Hang"}

// String returns the mode's name, e.g. "Throttle".
func (m Mode) String() string {
	if m.valid() {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) valid() bool { return m >= 0 && int(m) < len(modeNames) }

// DefaultAddr is Config.Addr's default: a free port on IPv4 loopback.
const DefaultAddr = "127.0.0.1:0"

// ErrNotLoopback reports a Config.Addr that is not a loopback address. The
// proxy forwards signed requests unauthenticated, so it must not be
// reachable from another machine.
var ErrNotLoopback = errors.New("ddbproxy: listen address is not loopback")

// Config configures Start.
type Config struct {
	// Target is the upstream base URL, e.g. http://127.0.0.1:8000 (DynamoDB
	// Local). A path in it prefixes every request's path. Required.
	Target string
	// Addr is the listen address; it must be a loopback address
	// (127.0.0.0/8, ::1 or localhost). Default: DefaultAddr.
	Addr string
	// HangFor is how long Hang holds a request before it forwards it anyway.
	// Default (zero): no limit — the request is held until the client gives
	// up or the mode leaves Hang.
	HangFor time.Duration
	// Seed seeds the random choices of SetThrottleFraction: the same seed
	// and the same order of requests throttle the same requests. Default
	// (zero): a fixed seed.
	Seed uint64
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	return c
}

// validate checks a Config that already has its defaults and returns the
// parsed Target.
func (c Config) validate() (*url.URL, error) {
	var errs []error
	var target *url.URL
	if c.Target == "" {
		errs = append(errs, errors.New("ddbproxy: Config.Target is required"))
	} else if u, err := url.Parse(c.Target); err != nil {
		errs = append(errs, fmt.Errorf("ddbproxy: Config.Target: %w", err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("ddbproxy: Config.Target %q must be an http or https URL with a host", c.Target))
	} else {
		target = u
	}
	if err := checkLoopback(c.Addr); err != nil {
		errs = append(errs, err)
	}
	if c.HangFor < 0 {
		errs = append(errs, errors.New("ddbproxy: Config.HangFor must not be negative"))
	}
	return target, errors.Join(errs...)
}

// checkLoopback accepts host:port addresses whose host is localhost or a
// loopback IP. An empty host (":0") would listen on every interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: Config.Addr %q: %v", ErrNotLoopback, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: Config.Addr %q (use 127.0.0.1, ::1 or localhost)", ErrNotLoopback, addr)
	}
	return nil
}

// Stats counts the requests a Proxy received since Start or the last Reset.
type Stats struct {
	// Total is every request received.
	Total int
	// Requests counts requests by DynamoDB operation, the part of the
	// X-Amz-Target header after the dot ("PutItem"); requests without one
	// count under "".
	Requests map[string]int
	// ByMode counts requests by the mode that was set when they arrived;
	// a request that SetThrottleFraction's draw throttled in Pass counts
	// under Throttle.
	ByMode map[Mode]int
	// Forwarded counts requests passed on to Config.Target: those that
	// arrived in Pass, and held ones released by HangFor or a mode change.
	Forwarded int
	// Abandoned counts held requests that ended without being forwarded
	// because their client gave up (or the proxy closed).
	Abandoned int
}

func newStats() Stats {
	return Stats{Requests: map[string]int{}, ByMode: map[Mode]int{}}
}

// Proxy is a running fault proxy. Its methods are safe for concurrent use.
type Proxy struct {
	cfg       Config
	url       string
	srv       *http.Server
	transport *http.Transport
	forwarder *httputil.ReverseProxy
	served    chan error // Serve's result

	// ctx is the base of every request's context; Close cancels it, which
	// drops held requests and aborts forwarded ones.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup // requests being handled; Add only under mu while !closed
	mode     Mode
	release  chan struct{} // closed when the mode leaves Hang; nil unless mode is Hang
	holding  int
	stats    Stats
	throttle fraction // SetThrottleFraction's; guarded by mu

	closeOnce sync.Once
	closeErr  error
}

// Maximum idle upstream connections kept for reuse. Go's default of two per
// host would make every burst of concurrent requests dial afresh.
const maxIdleConns = 128

// Start validates cfg, listens on cfg.Addr and serves in Pass mode until
// Close.
func Start(cfg Config) (*Proxy, error) {
	cfg = cfg.WithDefaults()
	target, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("ddbproxy: listen: %w", err)
	}
	// localhost is resolved by Listen: check what it resolved to.
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		_ = ln.Close()
		return nil, fmt.Errorf("%w: Config.Addr %q listens on %s", ErrNotLoopback, cfg.Addr, ln.Addr())
	}

	p := &Proxy{
		cfg:    cfg,
		url:    "http://" + ln.Addr().String(),
		served: make(chan error, 1),
		stats:  newStats(),
		transport: &http.Transport{
			Proxy:               nil, // never through HTTP_PROXY: the target is local
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        maxIdleConns,
			MaxIdleConnsPerHost: maxIdleConns,
			IdleConnTimeout:     90 * time.Second,
			// Forward the client's Accept-Encoding as it is instead of
			// asking for gzip and decompressing behind its back.
			DisableCompression: true,
		},
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.forwarder = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the Host the client signed
		},
		Transport:    p.transport,
		ErrorHandler: upstreamError,
		ErrorLog:     log.New(io.Discard, "", 0), // body-copy errors of clients that left
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return p.ctx },
	}
	go func() { p.served <- p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's base URL, e.g. http://127.0.0.1:41234: a DynamoDB
// client's BaseEndpoint.
func (p *Proxy) URL() string { return p.url }

// SetMode sets how requests that arrive after the call are answered.
// Requests already being answered keep their mode, except that leaving Hang
// releases every held request: each is then forwarded. SetMode panics on a
// Mode that is not one of the constants.
func (p *Proxy) SetMode(m Mode) {
	if !m.valid() {
		panic(fmt.Sprintf("ddbproxy: SetMode(%v): unknown mode", m))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.mode == Hang && m != Hang:
		close(p.release)
		p.release = nil
	case p.mode != Hang && m == Hang:
		p.release = make(chan struct{})
	}
	p.mode = m
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Stats returns a copy of the counts since Start or the last Reset.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Requests = maps.Clone(p.stats.Requests)
	s.ByMode = maps.Clone(p.stats.ByMode)
	return s
}

// Holding returns how many requests Hang is holding right now.
func (p *Proxy) Holding() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holding
}

// Reset zeroes the counts. ServerError's alternation restarts with a 500;
// the throttle fraction's draws restart from Config.Seed.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = newStats()
	p.throttle.restart()
}

// Close stops listening, drops held requests, aborts the ones being
// forwarded, waits until every handler has returned and closes the upstream
// connections. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		err := p.srv.Close()
		p.handlers.Wait()
		p.transport.CloseIdleConnections()
		if serr := <-p.served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		if err != nil {
			p.closeErr = fmt.Errorf("ddbproxy: close: %w", err)
		}
	})
	return p.closeErr
}

// serve is the proxy's handler: it counts the request under the mode set
// when it arrived and answers in that mode.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	op := operation(r.Header)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	p.handlers.Add(1)
	defer p.handlers.Done()
	mode, release := p.mode, p.release
	if mode == Pass && p.throttle.draw(p.cfg.Seed) {
		mode = Throttle
	}
	nth := p.stats.ByMode[mode] // this request's index among its mode's
	p.stats.Total++
	p.stats.Requests[op]++
	p.stats.ByMode[mode]++
	p.mu.Unlock()

	switch mode {
	case Throttle:
		drain(r)
		throttleError(op).write(w)
	case ServerError:
		drain(r)
		serverErrors[nth%len(serverErrors)].write(w)
	case Hang:
		p.hang(w, r, release)
	default:
		p.forward(w, r)
	}
}

// hang reads the whole body (the client's write completes, as with a server
// that accepted the request and then stalls), then holds the request until
// the client gives up, HangFor passes or release is closed.
func (p *Proxy) hang(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		p.abandon()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))

	var timeout <-chan time.Time
	if p.cfg.HangFor > 0 {
		t := time.NewTimer(p.cfg.HangFor)
		defer t.Stop()
		timeout = t.C
	}
	p.addHolding(1)
	released := true
	select {
	case <-release:
	case <-timeout:
	case <-r.Context().Done():
		released = false
	}
	p.addHolding(-1)
	if !released {
		p.abandon()
	}
	p.forward(w, r)
}

func (p *Proxy) addHolding(n int) {
	p.mu.Lock()
	p.holding += n
	p.mu.Unlock()
}

// abandon counts a held request that is not forwarded and ends it without
// an answer: returning normally would send an empty 200.
func (p *Proxy) abandon() {
	p.mu.Lock()
	p.stats.Abandoned++
	p.mu.Unlock()
	panic(http.ErrAbortHandler)
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.stats.Forwarded++
	p.mu.Unlock()
	p.forwarder.ServeHTTP(w, r)
}

// upstreamError answers a request Target could not: 502, as a load balancer
// in front of a dead host would (the SDK retries it). A request whose client
// has left, or that Close aborted, ends without an answer.
func upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		panic(http.ErrAbortHandler)
	}
	http.Error(w, "ddbproxy: upstream: "+err.Error(), http.StatusBadGateway)
}

// operation reads the operation name from X-Amz-Target
// ("DynamoDB_20120810.PutItem" → "PutItem").
func operation(h http.Header) string {
	t := h.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// drain reads the rest of a request's body before it is answered without
// forwarding, as AWS reads a request before it refuses it.
func drain(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
}
