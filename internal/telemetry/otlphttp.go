package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Why this client and not otlptracehttp's: otlptracehttp's configuration
// package imports google.golang.org/grpc (it shares its options with the
// gRPC exporter), and so does go.opentelemetry.io/proto/otlp's
// collector/trace/v1 (its gRPC service and gateway); grpc imports
// golang.org/x/net/trace, whose init reaches html/template, and so
// text/template's reflect.Value.MethodByName with a name known only at run
// time: the linker then keeps every exported method of every reachable
// type, 16 MB more in every binary that exports traces. otlptrace's
// exporter (the SDK's spans to OTLP's messages) takes any otlptrace.Client:
// this one posts them as protobuf over net/http, configured by the same
// OTEL_EXPORTER_OTLP_* variables as otlptracehttp, with its retry policy.

// The exporter's variables: OTEL_EXPORTER_OTLP_TRACES_x wins over
// OTEL_EXPORTER_OTLP_x.
const (
	envPrefix       = "OTEL_EXPORTER_OTLP_"
	envTracesPrefix = "OTEL_EXPORTER_OTLP_TRACES_"
	envHeaders      = "HEADERS"            // k=v,k2=v2, values URL-encoded
	envCompression  = "COMPRESSION"        // gzip or none
	envTimeout      = "TIMEOUT"            // milliseconds
	envCertificate  = "CERTIFICATE"        // PEM file of the CAs to trust
	envClientCert   = "CLIENT_CERTIFICATE" // PEM file, with CLIENT_KEY's
	envClientKey    = "CLIENT_KEY"
)

// Defaults of the export, otlptracehttp's.
const (
	// DefaultExportTimeout bounds one request (OTEL_EXPORTER_OTLP_TIMEOUT).
	DefaultExportTimeout = 10 * time.Second
	// DefaultRetryInitial, DefaultRetryMax and DefaultRetryElapsed shape the
	// backoff after a 429, 502, 503 or 504 (or the answer's Retry-After).
	DefaultRetryInitial = 5 * time.Second
	DefaultRetryMax     = 30 * time.Second
	DefaultRetryElapsed = time.Minute
	// maxResponseBody is what is read of an answer.
	maxResponseBody = 4 << 20
	contentProtobuf = "application/x-protobuf"
)

// httpClient is an otlptrace.Client: one POST of an
// ExportTraceServiceRequest per batch.
type httpClient struct {
	url     string
	headers map[string]string
	gzip    bool
	http    *http.Client
	retry   retryPolicy
	// stopped interrupts the requests in flight when the exporter stops.
	stopped context.Context
	stop    context.CancelFunc
}

var _ otlptrace.Client = (*httpClient)(nil)

// newHTTPClient reads the exporter's variables from get for endpoint (an
// http:// or https:// URL, used as it is).
func newHTTPClient(endpoint string, get func(string) string) (*httpClient, error) {
	pick := func(name string) (string, string) {
		if v := get(envTracesPrefix + name); v != "" {
			return envTracesPrefix + name, v
		}
		return envPrefix + name, get(envPrefix + name)
	}
	if _, err := url.Parse(endpoint); err != nil {
		return nil, fmt.Errorf("telemetry: OTLP endpoint: %w", err)
	}
	c := &httpClient{url: endpoint, retry: retryPolicy{initial: DefaultRetryInitial, max: DefaultRetryMax, elapsed: DefaultRetryElapsed}}
	if k, v := pick(envHeaders); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: %w", k, err)
		}
		c.headers = h
	}
	switch k, v := pick(envCompression); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("telemetry: %s=%s: gzip or none", k, v)
	}
	timeout := DefaultExportTimeout
	if k, v := pick(envTimeout); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("telemetry: %s=%s: a number of milliseconds is required", k, v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	tlsConf, err := tlsConfig(get)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil && strings.HasPrefix(endpoint, "http://") {
		return nil, fmt.Errorf("telemetry: OTLP endpoint %s: an insecure HTTP endpoint cannot use TLS client configuration", endpoint)
	}
	// net/http's DefaultTransport's settings, in a transport of its own
	// (as otlptracehttp: another package may replace or change the
	// default's).
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       tlsConf,
	}
	c.http = &http.Client{Transport: transport, Timeout: timeout}
	c.stopped, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// parseHeaders reads k=v,k2=v2 (values URL-encoded, as W3C baggage).
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return !isTokenChar(r) }) {
			return nil, fmt.Errorf("%q: name=value pairs separated by commas are required", pair)
		}
		value, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("the value of %s: %w", k, err)
		}
		h[k] = strings.TrimSpace(value)
	}
	return h, nil
}

// isTokenChar reports whether r may be in a header's name (RFC 9110 token).
func isTokenChar(r rune) bool {
	return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// tlsConfig is the CAs and client certificate of the variables (nil: none
// set, the system's CAs).
func tlsConfig(get func(string) string) (*tls.Config, error) {
	var conf tls.Config
	for _, prefix := range []string{envPrefix, envTracesPrefix} { // the traces' win
		if path := get(prefix + envCertificate); path != "" {
			pem, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("telemetry: %s: %w", prefix+envCertificate, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("telemetry: %s: no PEM certificate in %s", prefix+envCertificate, path)
			}
			conf.RootCAs = pool
		}
		cert, key := get(prefix+envClientCert), get(prefix+envClientKey)
		if cert == "" || key == "" {
			continue
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s and %s: %w", prefix+envClientCert, prefix+envClientKey, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	if conf.RootCAs == nil && conf.Certificates == nil {
		return nil, nil
	}
	return &conf, nil
}

// Start has nothing to start: each upload is a request of its own.
func (c *httpClient) Start(ctx context.Context) error { return ctx.Err() }

// Stop interrupts the uploads in flight.
func (c *httpClient) Stop(ctx context.Context) error {
	c.stop()
	return ctx.Err()
}

// retryPolicy is the exponential backoff after a retryable answer.
type retryPolicy struct{ initial, max, elapsed time.Duration }

// UploadTraces posts one batch, retrying what the receiver says may be
// retried (429, 502, 503, 504: after the longer of the backoff and its
// Retry-After) within ctx and the policy's elapsed time.
func (c *httpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := exportRequest(spans)
	if err != nil {
		return fmt.Errorf("telemetry: OTLP request: %w", err)
	}
	if c.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body) // a bytes.Buffer does not fail
		_ = zw.Close()
		body = buf.Bytes()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.stopped, cancel)()
	start, backoff := time.Now(), c.retry.initial
	for {
		err := c.post(ctx, body)
		var retry retryable
		if !errors.As(err, &retry) {
			return err
		}
		// otlptracehttp's backoff: ×1.5 up to the maximum, ±50% jitter.
		wait := max(retry.after, backoff/2+rand.N(backoff))
		backoff = min(backoff*3/2, c.retry.max)
		if time.Since(start)+wait > c.retry.elapsed {
			return fmt.Errorf("telemetry: OTLP export: no retry within %s: %w", c.retry.elapsed, retry.err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("telemetry: OTLP export: %w: %w", context.Cause(ctx), retry.err)
		case <-timer.C:
		}
	}
}

// exportRequest is the protobuf ExportTraceServiceRequest of spans: its one
// field, resource_spans = 1, repeated. (The message's generated package,
// collector/trace/v1, is the one that imports gRPC.)
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	marshal := proto.MarshalOptions{UseCachedSize: true} // the size just computed
	for _, rs := range spans {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(rs)))
		var err error
		if b, err = marshal.MarshalAppend(b, rs); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// retryable is an answer that may be retried, after at least after.
type retryable struct {
	after time.Duration
	err   error
}

func (r retryable) Error() string { return r.err.Error() }

// post sends body once.
func (c *httpClient) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telemetry: OTLP request: %w", err)
	}
	req.Header.Set("User-Agent", "OTel OTLP Exporter Go/"+otlptrace.Version()) // the headers' may replace it
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", contentProtobuf)
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telemetry: OTLP export: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return fmt.Errorf("telemetry: OTLP export to %s: %s, reading the answer: %w", c.url, resp.Status, err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryable{after: retryAfter(resp.Header.Get("Retry-After")),
			err: fmt.Errorf("telemetry: OTLP export to %s: %s (body: %s)", c.url, resp.Status, bytes.TrimSpace(answer))}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("telemetry: OTLP export to %s: %s (body: %s)", c.url, resp.Status, bytes.TrimSpace(answer))
	}
	if resp.Header.Get("Content-Type") != contentProtobuf {
		return nil
	}
	rejected, msg, err := partialSuccess(answer)
	if err != nil {
		return fmt.Errorf("telemetry: OTLP export to %s: the answer: %w", c.url, err)
	}
	if rejected != 0 || msg != "" {
		// As otlptracehttp: the batch was sent; the error reaches
		// OpenTelemetry's error handler.
		return fmt.Errorf("telemetry: OTLP partial success: %d spans rejected: %s", rejected, msg)
	}
	return nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(DefaultRetryElapsed/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success = 1
// (rejected_spans = 1, error_message = 2).
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte) int {
		if num != 1 || typ != protowire.BytesType {
			return protowire.ConsumeFieldValue(num, typ, v)
		}
		inner, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return n
		}
		if err := fields(inner, func(num protowire.Number, typ protowire.Type, v []byte) int {
			switch {
			case num == 1 && typ == protowire.VarintType:
				x, n := protowire.ConsumeVarint(v)
				rejected = int64(x)
				return n
			case num == 2 && typ == protowire.BytesType:
				s, n := protowire.ConsumeString(v)
				msg = s
				return n
			}
			return protowire.ConsumeFieldValue(num, typ, v)
		}); err != nil {
			return -1
		}
		return n
	})
	return rejected, msg, err
}

// fields calls field for each field of the message b, with the bytes from
// its value on; field returns the length of the value (negative: invalid).
func fields(b []byte, field func(protowire.Number, protowire.Type, []byte) int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if n = field(num, typ, b); n < 0 {
			return errors.New("telemetry: a malformed protobuf answer")
		}
		b = b[n:]
	}
	return nil
}
