package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// export is one request an OTLP receiver decoded.
type export struct {
	header http.Header
	path   string
	req    *collectortrace.ExportTraceServiceRequest
}

// receiver is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes each
// request with the collector's own generated message (gzip too) and answers
// the n-th request with answers[n], or with an empty
// ExportTraceServiceResponse after the last.
type receiver struct {
	srv      *httptest.Server
	exports  chan export
	requests atomic.Int32
}

type answer func(w http.ResponseWriter)

func newReceiver(t *testing.T, tlsConf *tls.Config, answers ...answer) *receiver {
	t.Helper()
	r := &receiver{exports: make(chan export, 16)}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := int(r.requests.Add(1)) - 1
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.exports <- export{header: req.Header.Clone(), path: req.URL.Path, req: &in}
		if n < len(answers) {
			answers[n](w)
			return
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", contentProtobuf)
		_, _ = w.Write(out)
	}))
	if tlsConf != nil {
		r.srv.TLS = tlsConf
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) next(t *testing.T) export {
	t.Helper()
	select {
	case e := <-r.exports:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver got no export")
		return export{}
	}
}

func status(code int, header ...string) answer {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		http.Error(w, "the receiver says "+http.StatusText(code), code)
	}
}

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func getOf(env map[string]string) func(string) string {
	return func(k string) string { return strings.TrimSpace(env[k]) }
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = kv.GetValue().GetStringValue()
	}
	return out
}

// Spans reach an OTLP receiver: FromEnv's provider, flushed, posts one
// protobuf ExportTraceServiceRequest to <endpoint>/v1/traces with the
// headers of OTEL_EXPORTER_OTLP_HEADERS (or _TRACES_HEADERS, which wins
// whole), gzip-compressed when OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION says
// so, carrying the span and the resource.
func TestExportReachesReceiver(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		gzip    bool
		headers map[string]string // want, "" absent
	}{
		{name: "plain, the common headers", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20YWJj, X-Scope-OrgID = team-a "},
			headers: map[string]string{"Authorization": "Basic YWJj", "X-Scope-Orgid": "team-a"}},
		{name: "gzip", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, gzip: true},
		{name: "the traces' variables win", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none",
			"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=3"},
			headers: map[string]string{"A": "", "B": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newReceiver(t, nil)
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.srv.URL, "OTEL_SERVICE_NAME": "svc-env"}
			for k, v := range tc.env {
				env[k] = v
			}
			tr, err := FromEnv(context.Background(), lookupOf(env), "svc", "1.2.3")
			require.NoError(t, err)
			require.True(t, tr.On())
			t.Cleanup(func() { require.NoError(t, tr.Shutdown(5*time.Second)) })
			_, span := tr.Provider.Tracer("test").Start(context.Background(), "op")
			span.End()
			require.NoError(t, tr.Flush(context.Background()))

			got := recv.next(t)
			require.Equal(t, "/v1/traces", got.path)
			require.Equal(t, contentProtobuf, got.header.Get("Content-Type"))
			require.True(t, strings.HasPrefix(got.header.Get("User-Agent"), "OTel OTLP Exporter Go/"), got.header.Get("User-Agent"))
			if tc.gzip {
				require.Equal(t, "gzip", got.header.Get("Content-Encoding"))
			} else {
				require.Empty(t, got.header.Get("Content-Encoding"))
			}
			for k, v := range tc.headers {
				require.Equal(t, v, got.header.Get(k), k)
			}
			require.Len(t, got.req.ResourceSpans, 1)
			rs := got.req.ResourceSpans[0]
			res := attrs(rs.GetResource().GetAttributes())
			require.Equal(t, "svc-env", res["service.name"], "OTEL_SERVICE_NAME wins")
			require.Equal(t, "1.2.3", res["service.version"])
			require.Len(t, rs.ScopeSpans, 1)
			require.Len(t, rs.ScopeSpans[0].Spans, 1)
			s := rs.ScopeSpans[0].Spans[0]
			require.Equal(t, "op", s.Name)
			require.Equal(t, span.SpanContext().TraceID().String(), hex.EncodeToString(s.TraceId))
		})
	}
}

// The request's bytes are the collector's generated message's, field for
// field.
func TestExportRequestIsTheCollectorsMessage(t *testing.T) {
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	spans := []*tracepb.ResourceSpans{
		{Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("a")}}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "one", TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8)},
				{Name: "two", Kind: tracepb.Span_SPAN_KIND_CONSUMER}}}}, SchemaUrl: "https://opentelemetry.io/schemas/1.43.0"},
		{Resource: &resourcepb.Resource{}},
		{},
	}
	for n := range len(spans) + 1 {
		got, err := exportRequest(spans[:n])
		require.NoError(t, err)
		want, err := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: spans[:n]})
		require.NoError(t, err)
		require.Equal(t, want, append([]byte{}, got...), "%d resource spans", n)
		var back collectortrace.ExportTraceServiceRequest
		require.NoError(t, proto.Unmarshal(got, &back))
		require.True(t, proto.Equal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: spans[:n]}, &back))
	}
}

// client is an uploader to recv with fast retries.
func client(t *testing.T, url string, env map[string]string) *httpClient {
	t.Helper()
	c, err := newHTTPClient(url, getOf(env))
	require.NoError(t, err)
	c.retry = retryPolicy{initial: time.Millisecond, max: 2 * time.Millisecond, elapsed: 10 * time.Second}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

var oneSpan = []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "op"}}}}}}

// What the receiver answers decides: 429, 502, 503 and 504 are retried
// (Retry-After honoured, within the policy's time), other failures are
// not, a partial success is reported.
func TestUploadAnswers(t *testing.T) {
	partial := func(rejected int64, msg string) answer {
		return func(w http.ResponseWriter) {
			out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg}})
			w.Header().Set("Content-Type", contentProtobuf)
			_, _ = w.Write(out)
		}
	}
	for _, tc := range []struct {
		name     string
		answers  []answer
		requests int
		err      []string
	}{
		{name: "accepted", requests: 1},
		{name: "retried until accepted", answers: []answer{status(503, "Retry-After", "0"), status(429), status(502), status(504)}, requests: 5},
		{name: "a client error is not retried", answers: []answer{status(400)}, requests: 1, err: []string{"400 Bad Request", "the receiver says Bad Request"}},
		{name: "a server error is not retried", answers: []answer{status(500)}, requests: 1, err: []string{"500 Internal Server Error"}},
		{name: "Retry-After beyond the retry time", answers: []answer{status(429, "Retry-After", "3600")}, requests: 1,
			err: []string{"no retry within 10s", "429 Too Many Requests"}},
		{name: "partial success", answers: []answer{partial(2, "too old")}, requests: 1, err: []string{"partial success: 2 spans rejected: too old"}},
		{name: "an empty partial success is success", answers: []answer{partial(0, "")}, requests: 1},
		{name: "a body that is not protobuf is ignored", answers: []answer{func(w http.ResponseWriter) { _, _ = io.WriteString(w, "{}") }}, requests: 1},
		{name: "a malformed protobuf answer", answers: []answer{func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", contentProtobuf)
			_, _ = w.Write([]byte{0x0a, 0x05, 0x08})
		}}, requests: 1, err: []string{"the answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newReceiver(t, nil, tc.answers...)
			err := client(t, recv.srv.URL+"/v1/traces", nil).UploadTraces(context.Background(), oneSpan)
			require.Equal(t, int32(tc.requests), recv.requests.Load())
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tc.err {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// blockingReceiver holds every request until the test ends; arrived has
// one value per request.
func blockingReceiver(t *testing.T) (url string, arrived chan struct{}) {
	release, arrived := make(chan struct{}), make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL + "/v1/traces", arrived
}

// OTEL_EXPORTER_OTLP_TIMEOUT bounds a request; Stop interrupts the one in
// flight.
func TestUploadTimeoutAndStop(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		url, _ := blockingReceiver(t)
		err := client(t, url, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "50"}).UploadTraces(context.Background(), oneSpan)
		require.ErrorContains(t, err, "Client.Timeout exceeded")
	})
	t.Run("stop", func(t *testing.T) {
		url, arrived := blockingReceiver(t)
		c := client(t, url, nil)
		done := make(chan error, 1)
		go func() { done <- c.UploadTraces(context.Background(), oneSpan) }()
		<-arrived
		require.NoError(t, c.Stop(context.Background()))
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Stop did not interrupt the upload")
		}
	})
}

// pemFile writes blocks to a file of the test's and returns its path.
func pemFile(t *testing.T, name string, blocks ...*pem.Block) string {
	t.Helper()
	var b bytes.Buffer
	for _, block := range blocks {
		require.NoError(t, pem.Encode(&b, block))
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}

// clientCert is a self-signed client certificate (its own CA) and key.
func clientCert(t *testing.T) (cert, key *pem.Block, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	parsed, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(parsed)
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return &pem.Block{Type: "CERTIFICATE", Bytes: der}, &pem.Block{Type: "PRIVATE KEY", Bytes: kder}, pool
}

// OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE is the CAs the client trusts,
// _CLIENT_CERTIFICATE and _CLIENT_KEY its certificate, against a receiver
// that requires one.
func TestUploadTLS(t *testing.T) {
	cert, key, pool := clientCert(t)
	recv := newReceiver(t, &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	serverCA := pemFile(t, "server.pem", &pem.Block{Type: "CERTIFICATE", Bytes: recv.srv.Certificate().Raw})
	certFile, keyFile := pemFile(t, "client.pem", cert), pemFile(t, "client-key.pem", key)
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{name: "trusted, with a client certificate", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA,
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile}},
		{name: "the traces' variables win", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": serverCA,
			"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": keyFile}},
		{name: "the server's CA not trusted", env: map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile},
			err: "certificate signed by unknown authority"},
		{name: "no client certificate", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": serverCA}, err: "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := client(t, recv.srv.URL+"/v1/traces", tc.env).UploadTraces(context.Background(), oneSpan)
			if tc.err == "" {
				require.NoError(t, err)
				require.Len(t, recv.next(t).req.ResourceSpans, 1)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// A variable this exporter cannot use is an error when the export is
// configured, naming it.
func TestHTTPClientConfigErrors(t *testing.T) {
	cert, _, _ := clientCert(t)
	ca := pemFile(t, "ca.pem", cert)
	notPEM := pemFile(t, "not.pem")
	for _, tc := range []struct {
		name     string
		endpoint string
		env      map[string]string
		err      string
	}{
		{name: "a header without a value", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,novalue"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "a header name with a space", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "bad name=1"}, err: "OTEL_EXPORTER_OTLP_TRACES_HEADERS"},
		{name: "a header value badly escaped", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=%zz"}, err: "the value of a"},
		{name: "an unknown compression", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "br"}, err: "OTEL_EXPORTER_OTLP_COMPRESSION=br"},
		{name: "a timeout with a unit", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, err: "OTEL_EXPORTER_OTLP_TIMEOUT=10s"},
		{name: "a negative timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "-1"}, err: "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=-1"},
		{name: "a missing CA file", env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent.pem"}, err: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{name: "a CA file without PEM", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": notPEM}, err: "no PEM certificate"},
		{name: "a client certificate without its key", env: map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": ca, "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM},
			err: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"},
		{name: "not a URL", endpoint: "http://[::1", err: "OTLP endpoint"},
		{name: "TLS settings for an http:// endpoint", endpoint: "http://127.0.0.1:4318/v1/traces",
			env: map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca}, err: "insecure HTTP endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := tc.endpoint
			if endpoint == "" {
				endpoint = "https://127.0.0.1:4318/v1/traces"
			}
			_, err := newHTTPClient(endpoint, getOf(tc.env))
			require.ErrorContains(t, err, tc.err)
			// FromEnv says the same.
			env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err = FromEnv(context.Background(), lookupOf(env), "svc", "")
			require.ErrorContains(t, err, tc.err)
		})
	}
}
