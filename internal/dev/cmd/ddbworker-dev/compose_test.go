// Tests of the container files: Dockerfile, .dockerignore, docker-compose.yml
// and the LocalStack init hook under localstack/.
//
// They need no services: no Docker engine, no LocalStack, no emulators, no
// network, and they must not go through testenv.Main. They parse the files,
// run the hook script with a fake awslocal, and compare what they find with
// the code that defines the contract: the commands and flags of the binary
// each image holds (the production one, or the development one of the
// Dockerfile's dev target), tables.Definition and worker.CreateQueues.
//
//	go test ./internal/dev/cmd/ddbworker-dev -run Compose
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ddbworker/ddbworker"
	"github.com/ddbworker/ddbworker/daemon"
	"github.com/ddbworker/ddbworker/tables"
	"github.com/ddbworker/ddbworker/worker"
)

// The names the compose setup uses; the code's defaults must agree (checked).
const (
	composeTable = "ddbworker"
	composeQueue = "ddbworker-work"
	composeDLQ   = "ddbworker-work-dlq"

	localstackService = "localstack"
	localstackPort    = "4566"
	localstackReadyD  = "/etc/localstack/init/ready.d"
	localstackAccount = "000000000000"
	localstackRegion  = "us-east-1"

	hookFile  = "localstack/init/ready.d/10-ddbworker.sh"
	tableFile = "localstack/table.json"
)

// ---------------------------------------------------------------------------
// docker-compose.yml

func TestComposeEnvNamesRealFlags(t *testing.T) {
	p := loadProject(t)
	for _, s := range p.services() {
		t.Run(s.name, func(t *testing.T) {
			for _, k := range sortedKeys(s.env) {
				if strings.HasPrefix(k, "DDBWORKER_") {
					require.Truef(t, p.isDdbworker(s), "service %s sets %s but does not run the ddbworker image (build: . or image %q)", s.name, k, p.image())
				}
			}
			if !p.isDdbworker(s) {
				return
			}
			args := p.args(t, s)
			cmd := findCommand(t, p.tree(s), args)
			flags := commandFlags(cmd)
			for _, k := range sortedKeys(s.env) {
				if !strings.HasPrefix(k, "DDBWORKER_") {
					continue
				}
				name := flagOfEnv(k)
				_, ok := flags[name]
				require.Truef(t, ok, "service %s: %s names no flag --%s of `ddbworker %s` (its flags: %s)",
					s.name, k, name, strings.Join(args, " "), strings.Join(sortedKeys(flags), ", "))
			}
		})
	}
}

func TestComposeServicesParseWithRealCommands(t *testing.T) {
	p := loadProject(t)
	for _, s := range p.services() {
		if !p.isDdbworker(s) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			args := p.args(t, s)
			got := executeCaptured(t, p.tree(s), s.env, args)
			// Every DDBWORKER_* value reached its flag and parses as its type.
			cmd := findCommand(t, p.tree(s), args)
			for _, k := range sortedKeys(s.env) {
				if !strings.HasPrefix(k, "DDBWORKER_") {
					continue
				}
				f := commandFlags(cmd)[flagOfEnv(k)]
				require.NotNilf(t, f, "service %s: %s names no flag", s.name, k)
				require.NoErrorf(t, f.Value.Set(s.env[k]), "service %s: %s=%q is not a valid --%s (%s)", s.name, k, s.env[k], f.Name, f.Value.Type())
				require.Equalf(t, f.Value.String(), got[f.Name], "service %s: %s=%q did not reach --%s", s.name, k, s.env[k], f.Name)
			}
			// Against LocalStack, every endpoint flag must point at it and
			// the SDK needs credentials and a region.
			for _, name := range sortedKeys(commandFlags(cmd)) {
				if strings.HasSuffix(name, "-endpoint") {
					requireLocalStackURL(t, p, fmt.Sprintf("service %s: --%s (%s)", s.name, name, envName(name)), got[name])
				}
			}
			for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
				require.NotEmptyf(t, s.env[k], "service %s: %s must be set (LocalStack accepts any value)", s.name, k)
			}
			checkResourceFlags(t, p, "service "+s.name, s.env, got)
			require.Equalf(t, "service_healthy", s.dependsOn[localstackService],
				"service %s must depend on %s with condition service_healthy (the hook creates the queues it needs)", s.name, localstackService)
		})
	}
}

// checkResourceFlags: the table and queues a command is pointed at are the
// ones the hook creates, by URLs of the form LocalStack returns.
func checkResourceFlags(t *testing.T, p *project, what string, env, got map[string]string) {
	t.Helper()
	h := p.hookEmpty(t)
	region := got["region"]
	if region == "" {
		region = env["AWS_REGION"]
	}
	if env["AWS_REGION"] != "" {
		require.Equalf(t, env["AWS_REGION"], region, "%s: AWS_REGION and --region differ", what)
	}
	if v, ok := got["table"]; ok {
		require.Equalf(t, h.table, v, "%s: --table is not the table the hook creates", what)
	}
	for flag, want := range map[string]string{"queue-url": h.workQueue, "dlq-url": h.dlq} {
		v, ok := got[flag]
		if !ok || v == "" {
			continue
		}
		requireQueueURL(t, p, fmt.Sprintf("%s: --%s", what, flag), v, region, want)
	}
}

func TestComposeWorker(t *testing.T) {
	p := loadProject(t)
	w := p.service(t, "worker")
	require.Equal(t, []string{"run"}, p.args(t, w), "service worker must run the daemon")
	got := executeCaptured(t, p.tree(w), w.env, p.args(t, w))
	h := p.hookEmpty(t)

	for _, flag := range []string{"queue-url", "dlq-url", "table", "dynamodb-endpoint", "sqs-endpoint", "metrics-addr"} {
		require.NotEmptyf(t, got[flag], "service worker: --%s (%s) must be set", flag, envName(flag))
	}
	require.Equal(t, h.workQueue, lastSegment(got["queue-url"]), "service worker: --queue-url must name the work queue")
	require.Equal(t, h.dlq, lastSegment(got["dlq-url"]), "service worker: --dlq-url must name the work queue's DLQ")

	// The lease is the visibility timeout (DESIGN §6): the worker's must be
	// the queue's.
	vis, err := time.ParseDuration(got["visibility-timeout"])
	require.NoError(t, err, "--visibility-timeout")
	queueVis, err := strconv.Atoi(h.attrs[h.workQueue]["VisibilityTimeout"])
	require.NoError(t, err, "hook: VisibilityTimeout of %s", h.workQueue)
	require.Equal(t, time.Duration(queueVis)*time.Second, vis,
		"service worker: --visibility-timeout must equal the work queue's VisibilityTimeout in the hook")

	// Metrics must listen on all interfaces inside the container and be
	// published (on loopback) on the host.
	host, port, err := net.SplitHostPort(got["metrics-addr"])
	require.NoError(t, err, "--metrics-addr %q", got["metrics-addr"])
	require.Containsf(t, []string{"", "0.0.0.0", "::"}, host,
		"service worker: --metrics-addr %q listens on %q only: the published port cannot reach it from outside the container", got["metrics-addr"], host)
	published := false
	for _, m := range w.ports {
		published = published || m.container == port
	}
	require.Truef(t, published, "service worker: metrics port %s is not published (ports: %+v)", port, w.ports)
	require.Containsf(t, p.dockerfile(t).final().exposed(), port, "Dockerfile: the final stage must EXPOSE the metrics port %s", port)

	if got["terminal-policy"] == string(worker.PolicyDLQ) {
		require.NotEmpty(t, got["dlq-url"], "--terminal-policy dlq needs --dlq-url")
	}
}

func TestComposePortsBoundToLoopback(t *testing.T) {
	p := loadProject(t)
	for _, s := range p.services() {
		require.NotEqualf(t, "host", s.networkMode, "service %s: network_mode host exposes every port", s.name)
		for _, m := range s.ports {
			t.Run(s.name+"/"+m.spec, func(t *testing.T) {
				ip := net.ParseIP(strings.Trim(m.hostIP, "[]"))
				require.Truef(t, ip != nil && ip.IsLoopback(),
					"service %s: port %q is published on all interfaces; bind it to the host's 127.0.0.1 (\"127.0.0.1:%s:%s\")",
					s.name, m.spec, cmp.Or(m.published, m.container), m.container)
			})
		}
	}
}

func TestComposeLocalStack(t *testing.T) {
	p := loadProject(t)
	ls := p.service(t, localstackService)
	require.Regexpf(t, `^localstack/localstack:3\.\d+(\.\d+)?$`, ls.image, "service %s: pin a LocalStack 3.x release tag", ls.name)

	services := strings.Split(ls.env["SERVICES"], ",")
	for i := range services {
		services[i] = strings.TrimSpace(services[i])
	}
	require.Subset(t, services, []string{"sqs", "dynamodb"}, "service %s: SERVICES", ls.name)
	require.Equal(t, "path", ls.env["SQS_ENDPOINT_STRATEGY"],
		"service %s: SQS_ENDPOINT_STRATEGY=path makes queue URLs http://<host>:4566/queue/<region>/<account>/<name>, the form the workers use", ls.name)

	published := false
	for _, m := range ls.ports {
		published = published || m.container == localstackPort
	}
	require.True(t, published, "service %s: port %s must be published (on 127.0.0.1) for tools on the host", ls.name, localstackPort)

	require.NotEmpty(t, ls.healthcheck, "service %s needs a healthcheck: the workers wait for it", ls.name)
	require.Truef(t, strings.Contains(ls.healthcheck, "/_localstack/init/ready") || strings.Contains(ls.healthcheck, "awslocal"),
		"service %s: the healthcheck must wait for the init hooks (/_localstack/init/ready or awslocal): %q", ls.name, ls.healthcheck)
	h := p.hookEmpty(t)
	for _, m := range regexp.MustCompile(`--queue-name\s+(\S+)`).FindAllStringSubmatch(ls.healthcheck, -1) {
		require.Containsf(t, []string{h.workQueue, h.dlq}, m[1], "service %s: the healthcheck waits for a queue the hook does not create", ls.name)
	}

	// ready.d is mounted from a directory that holds only executable hooks.
	src, ok := ls.hostPath(p.root, localstackReadyD)
	require.Truef(t, ok, "service %s: nothing is mounted at %s", ls.name, localstackReadyD)
	st, err := os.Stat(src)
	require.NoErrorf(t, err, "service %s: the source of %s", ls.name, localstackReadyD)
	require.Truef(t, st.IsDir(), "service %s: %s must be mounted from a directory", ls.name, src)
	hooks := 0
	require.NoError(t, filepath.WalkDir(src, func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(p.root, file)
		switch filepath.Ext(file) {
		case ".sh":
			info, err := d.Info()
			require.NoError(t, err)
			require.NotZerof(t, info.Mode()&0o111, "%s must be executable (LocalStack skips it otherwise): chmod +x", rel)
			head, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Truef(t, bytes.HasPrefix(head, []byte("#!")), "%s needs a shebang line", rel)
			hooks++
		case ".py":
			hooks++
		default:
			require.Failf(t, "not a hook in ready.d", "%s: LocalStack runs .sh and .py files of ready.d; keep other files (JSON…) elsewhere", rel)
		}
		return nil
	}))
	require.NotZero(t, hooks, "service %s: %s holds no hook", ls.name, src)
	hook, ok := ls.hostPath(p.root, localstackReadyD+"/"+path.Base(hookFile))
	require.True(t, ok)
	requireSameFile(t, filepath.Join(p.root, hookFile), hook, "the mounted ready.d must hold "+hookFile)
}

// ---------------------------------------------------------------------------
// The init hook, run with a fake awslocal.

func TestComposeHookSyntax(t *testing.T) {
	p := loadProject(t)
	out, err := exec.Command("bash", "-n", filepath.Join(p.root, hookFile)).CombinedOutput()
	require.NoErrorf(t, err, "bash -n %s:\n%s", hookFile, out)
	text := p.read(t, hookFile)
	require.True(t, strings.HasPrefix(text, "#!/bin/bash\n"), "%s must start with #!/bin/bash", hookFile)
	require.Regexp(t, `(?m)^set -euo pipefail$`, text, "%s must stop at the first failure", hookFile)
	require.Contains(t, text, "table.json", "%s must create the table from table.json", hookFile)
}

func TestComposeHookCreatesContract(t *testing.T) {
	p := loadProject(t)
	wantQueues := expectedQueues(t, composeQueue)
	tableJSON := p.tableJSON(t)

	cases := []struct {
		name     string
		existing bool // the table (with TTL) and the queues exist already
	}{
		{"fresh LocalStack", false},
		{"resources exist (hook run again)", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls, out, err := p.runHook(t, tc.existing, "")
			require.NoErrorf(t, err, "the hook failed; its output:\n%s", out)

			// Table: created from table.json when missing, never recreated.
			creates := callsOf(calls, "dynamodb create-table")
			if tc.existing {
				require.Empty(t, creates, "the hook must keep an existing table")
			} else {
				require.Len(t, creates, 1, "the hook must create the table once")
				in, ok := creates[0].arg("--cli-input-json")
				require.True(t, ok, "create-table must take --cli-input-json file://…/table.json")
				require.Truef(t, strings.HasPrefix(in, "file://"), "create-table --cli-input-json %q: want file://<path>", in)
				host, ok := p.service(t, localstackService).hostPath(p.root, strings.TrimPrefix(in, "file://"))
				require.Truef(t, ok, "create-table reads %s, which no volume of service %s mounts", in, localstackService)
				requireSameFile(t, filepath.Join(p.root, tableFile), host, "create-table must read "+tableFile)
			}
			for _, c := range calls {
				if c.service() == "dynamodb" {
					if name, ok := c.arg("--table-name"); ok {
						require.Equalf(t, aws.ToString(tableJSON.TableName), name, "%s: the table name differs from table.json's", c)
					}
				}
			}

			// TTL on tables.DefaultLayout().TTL, enabled unless it is already.
			ttl := callsOf(calls, "dynamodb update-time-to-live")
			if tc.existing {
				require.Empty(t, ttl, "the hook must not re-enable TTL (DynamoDB refuses: already enabled)")
			} else {
				require.Len(t, ttl, 1, "the hook must enable TTL")
				spec, ok := ttl[0].arg("--time-to-live-specification")
				require.True(t, ok, "update-time-to-live needs --time-to-live-specification")
				var ts struct {
					Enabled       *bool
					AttributeName string
				}
				require.NoErrorf(t, strictJSON(spec, &ts), "--time-to-live-specification %q: write it as JSON", spec)
				require.True(t, ts.Enabled != nil && *ts.Enabled, "TTL must be enabled: %s", spec)
				require.Equal(t, tables.DefaultLayout().TTL, ts.AttributeName, "TTL attribute (tables.DefaultLayout().TTL)")
			}

			// Queues: what worker.CreateQueues creates by default, DLQ first.
			require.Equal(t, normalizeQueues(t, wantQueues), normalizeQueues(t, queueWrites(t, calls)),
				"queue names and attributes must be those of worker.CreateQueues(QueueConfig{Name: %q}), in order", composeQueue)
			if tc.existing {
				require.Empty(t, callsOf(calls, "sqs create-queue"), "existing queues get set-queue-attributes, not create-queue")
			}
		})
	}
}

func TestComposeHookStopsOnFailure(t *testing.T) {
	p := loadProject(t)
	cases := []struct {
		fail     string // service/operation[:queue] the fake awslocal fails
		existing bool
	}{
		{"dynamodb/create-table", false},
		{"dynamodb/wait", false},
		{"dynamodb/describe-time-to-live", false},
		{"dynamodb/update-time-to-live", false},
		{"sqs/create-queue:" + composeDLQ, false},
		{"sqs/get-queue-attributes", false},
		{"sqs/create-queue:" + composeQueue, false},
		{"sqs/set-queue-attributes:" + composeQueue, true},
	}
	for _, tc := range cases {
		t.Run(tc.fail, func(t *testing.T) {
			calls, out, err := p.runHook(t, tc.existing, tc.fail)
			require.Errorf(t, err, "the hook must fail when %s fails; its output:\n%s", tc.fail, out)
			require.NotEmpty(t, calls)
			last := calls[len(calls)-1]
			require.Truef(t, last.matches(tc.fail), "the hook must stop at the failed call %s; its last call was %s; output:\n%s", tc.fail, last, out)
		})
	}
}

// ---------------------------------------------------------------------------
// localstack/table.json

func TestComposeTableJSONIsDefinition(t *testing.T) {
	p := loadProject(t)
	got := p.tableJSON(t)
	want := tables.Definition(composeTable, tables.DefaultLayout())

	keys := func(ks []types.KeySchemaElement) []string {
		var out []string
		for _, k := range ks {
			out = append(out, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		return out
	}
	attrs := func(ds []types.AttributeDefinition) []string {
		var out []string
		for _, d := range ds {
			out = append(out, aws.ToString(d.AttributeName)+" "+string(d.AttributeType))
		}
		sort.Strings(out)
		return out
	}
	indexes := func(in *dynamodb.CreateTableInput) map[string]string {
		out := map[string]string{}
		for _, g := range in.GlobalSecondaryIndexes {
			proj := "<none>"
			if g.Projection != nil {
				proj = string(g.Projection.ProjectionType) + " " + strings.Join(slices.Sorted(slices.Values(g.Projection.NonKeyAttributes)), ",")
			}
			out[aws.ToString(g.IndexName)] = strings.Join(keys(g.KeySchema), ", ") + " / " + strings.TrimSpace(proj)
		}
		return out
	}
	cases := []struct {
		field     string
		want, got any
	}{
		{"TableName", aws.ToString(want.TableName), aws.ToString(got.TableName)},
		{"BillingMode", want.BillingMode, got.BillingMode},
		{"KeySchema", keys(want.KeySchema), keys(got.KeySchema)},
		{"AttributeDefinitions (as a set)", attrs(want.AttributeDefinitions), attrs(got.AttributeDefinitions)},
		{"GlobalSecondaryIndexes (name → keys / projection)", indexes(want), indexes(got)},
		{"LocalSecondaryIndexes", len(want.LocalSecondaryIndexes), len(got.LocalSecondaryIndexes)},
		{"ProvisionedThroughput", want.ProvisionedThroughput, got.ProvisionedThroughput},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			require.Equalf(t, tc.want, tc.got, "%s: %s differs from tables.Definition(%q, tables.DefaultLayout())", tableFile, tc.field, composeTable)
		})
	}
	// Anything else Definition may set one day (streams, SSE, tags…).
	norm := func(in *dynamodb.CreateTableInput) *dynamodb.CreateTableInput {
		c := *in
		c.AttributeDefinitions = slices.Clone(in.AttributeDefinitions)
		slices.SortFunc(c.AttributeDefinitions, func(a, b types.AttributeDefinition) int {
			return strings.Compare(aws.ToString(a.AttributeName), aws.ToString(b.AttributeName))
		})
		c.GlobalSecondaryIndexes = slices.Clone(in.GlobalSecondaryIndexes)
		slices.SortFunc(c.GlobalSecondaryIndexes, func(a, b types.GlobalSecondaryIndex) int {
			return strings.Compare(aws.ToString(a.IndexName), aws.ToString(b.IndexName))
		})
		return &c
	}
	require.Equal(t, norm(want), norm(got), "%s must be the CreateTable input of tables.Definition(%q, tables.DefaultLayout())", tableFile, composeTable)
}

// ---------------------------------------------------------------------------
// Dockerfile and .dockerignore

func TestComposeDockerfile(t *testing.T) {
	p := loadProject(t)
	df := p.dockerfile(t)
	require.GreaterOrEqual(t, len(df.stages), 2, "Dockerfile: build and run in separate stages")
	final := df.final()
	build := df.builder()
	require.NotNil(t, build, "Dockerfile: no stage runs `go build`")

	goMinor := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(p.read(t, "go.mod"))
	require.NotNil(t, goMinor, "go.mod has no go line")
	buildRun := build.run("go build")
	outRe := regexp.MustCompile(`\s-o\s+(\S+)`).FindStringSubmatch(buildRun)

	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"builder is golang:<go.mod's minor>-bookworm, no digest", func(t *testing.T) {
			m := regexp.MustCompile(`^golang:(\d+\.\d+)(\.\d+)?-bookworm$`).FindStringSubmatch(build.from)
			require.NotNilf(t, m, "builder FROM %q: want golang:%s-bookworm", build.from, goMinor[1])
			require.Equal(t, goMinor[1], m[1], "builder Go version must match go.mod's go line")
		}},
		{"go mod download in its own layer, before the sources", func(t *testing.T) {
			mods := build.index(func(in instruction) bool {
				return in.cmd == "COPY" && strings.Contains(in.args, "go.mod") && strings.Contains(in.args, "go.sum")
			})
			dl := build.index(func(in instruction) bool { return in.cmd == "RUN" && strings.Contains(in.args, "go mod download") })
			src := build.index(func(in instruction) bool {
				return in.cmd == "COPY" && slices.Contains(strings.Fields(in.args), ".") && !strings.Contains(in.args, "go.mod")
			})
			require.True(t, mods >= 0 && dl > mods, "COPY go.mod go.sum, then RUN go mod download")
			require.Truef(t, src > dl, "COPY . . must come after go mod download (instructions %d, %d)", dl, src)
		}},
		{"static, trimmed build of ./cmd/ddbworker", func(t *testing.T) {
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath"} {
				require.Containsf(t, buildRun, want, "builder RUN %q", buildRun)
			}
			require.Regexpf(t, `\s\./cmd/ddbworker(\s|$)`, buildRun, "builder RUN %q must build ./cmd/ddbworker", buildRun)
			require.Subset(t, strings.Fields(ldflagsOf(t, buildRun)), []string{"-s", "-w"}, "-ldflags")
			require.NotNil(t, outRe, "go build needs -o <path>")
		}},
		{"final stage is distroless static, non-root", func(t *testing.T) {
			require.Regexp(t, `^gcr\.io/distroless/static(-debian\d+)?:nonroot$`, final.from, "final FROM")
			user := final.last("USER")
			require.NotEmpty(t, user, "final stage needs USER nonroot:nonroot")
			name := strings.SplitN(user, ":", 2)[0]
			require.NotContains(t, []string{"root", "0"}, name, "final stage USER must not be root")
		}},
		{"final stage copies the binary to the entrypoint", func(t *testing.T) {
			entry := final.execForm(t, "ENTRYPOINT")
			require.Equal(t, []string{"/ddbworker"}, entry, "ENTRYPOINT")
			require.NotNil(t, outRe)
			copied := final.index(func(in instruction) bool {
				if in.cmd != "COPY" {
					return false
				}
				var from string
				var paths []string
				for _, f := range strings.Fields(in.args) {
					if v, ok := strings.CutPrefix(f, "--from="); ok {
						from = v
					} else if !strings.HasPrefix(f, "--") {
						paths = append(paths, f)
					}
				}
				return (from == build.name || from == strconv.Itoa(build.pos)) && slices.Equal(paths, []string{outRe[1], entry[0]})
			})
			require.GreaterOrEqualf(t, copied, 0, "final stage needs COPY --from=%s %s %s", build.name, outRe[1], entry[0])
		}},
		{"CMD runs a real command", func(t *testing.T) {
			args := final.execForm(t, "CMD")
			require.Equal(t, []string{"run"}, args, "CMD")
			findCommand(t, productionTree, args)
		}},
		{"the production image has no development build", func(t *testing.T) {
			// The image is the final stage and every stage it comes from; a
			// `--target dev` stage may build internal/dev/cmd/ddbworker-dev, the default
			// may not.
			for _, st := range df.ancestry(final) {
				for _, in := range st.instr {
					if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
						require.NotContainsf(t, in.args, "ddbworker-dev",
							"Dockerfile: %s in stage %s, part of the default image: the development tools (demo, bench, chaos, send, emulators, fault injection) would ship",
							in.cmd, cmp.Or(st.name, strconv.Itoa(st.pos)))
					}
				}
			}
			require.NotContainsf(t, buildRun, "-tags", "the production go build takes no build tags: %q", buildRun)
			require.Contains(t, df.ancestry(final), build, "the final stage must copy the binary of the stage that runs go build")
		}},
		{"metrics listen on every interface of the container", func(t *testing.T) {
			env := final.keyValues(t, "ENV")
			addr, ok := env["DDBWORKER_METRICS_ADDR"]
			require.True(t, ok, "final stage needs ENV DDBWORKER_METRICS_ADDR=0.0.0.0:9090: the daemon's default, 127.0.0.1:9090, is unreachable from outside the container")
			host, port, err := net.SplitHostPort(addr)
			require.NoError(t, err, "DDBWORKER_METRICS_ADDR %q", addr)
			require.Containsf(t, []string{"", "0.0.0.0", "::"}, host, "DDBWORKER_METRICS_ADDR %q listens on %q only", addr, host)
			require.Containsf(t, final.exposed(), port, "the final stage must EXPOSE the metrics port %s", port)
			// Every DDBWORKER_* the image sets is a flag of its command and
			// reaches it.
			ddb := map[string]string{}
			for k, v := range env {
				if strings.HasPrefix(k, "DDBWORKER_") {
					ddb[k] = v
				}
			}
			args := final.execForm(t, "CMD")
			got := executeCaptured(t, productionTree, ddb, args)
			flags := commandFlags(findCommand(t, productionTree, args))
			for _, k := range sortedKeys(ddb) {
				f := flags[flagOfEnv(k)]
				require.NotNilf(t, f, "Dockerfile: ENV %s names no flag of `ddbworker %s`", k, strings.Join(args, " "))
				require.NoErrorf(t, f.Value.Set(ddb[k]), "Dockerfile: ENV %s=%q is not a valid --%s", k, ddb[k], f.Name)
				require.Equalf(t, f.Value.String(), got[f.Name], "Dockerfile: ENV %s did not reach --%s", k, f.Name)
			}
		}},
		{"OCI labels, from build arguments", func(t *testing.T) {
			labels := final.keyValues(t, "LABEL")
			require.Equal(t, "ddbworker", labels["org.opencontainers.image.title"])
			require.Equal(t, "Apache-2.0", df.args["LICENSES"], "the image says the repository's licence")
			license, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "LICENSE"))
			require.NoError(t, err)
			require.Contains(t, string(license), "Apache License\n                           Version 2.0, January 2004")
			require.NotEmpty(t, labels["org.opencontainers.image.description"])
			for _, tc := range []struct{ label, arg string }{{"source", "SOURCE"}, {"version", "VERSION"}, {"revision", "REVISION"}, {"licenses", "LICENSES"}} {
				k := "org.opencontainers.image." + tc.label
				require.Equalf(t, "${"+tc.arg+"}", labels[k], "LABEL %s must come from the build argument %s", k, tc.arg)
				require.Truef(t, final.declares(tc.arg), "the final stage must declare ARG %s (for LABEL %s)", tc.arg, k)
				require.Containsf(t, df.args, tc.arg, "declare ARG %s before the first FROM, with its default, so that every stage shares it", tc.arg)
			}
		}},
		{"the version reaches the binary", func(t *testing.T) {
			require.Truef(t, build.declares("VERSION"), "the builder stage must declare ARG VERSION")
			const v = "v0.0.0-composetest"
			ld := ldflagsOf(t, build.run("go build"))
			stamped := strings.Fields(df.expand(build, ld, map[string]string{"VERSION": v}))
			require.Subset(t, stamped, []string{"-X", "main.version=" + v}, "go build -ldflags must set main.version from ARG VERSION: %q", ld)
			// Built as the Dockerfile builds it, the binary reports it.
			bin := filepath.Join(t.TempDir(), "ddbworker")
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.Join(stamped, " "), "-o", bin, "./cmd/ddbworker")
			cmd.Dir = p.root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			out, err = exec.Command(bin, "--version").CombinedOutput()
			require.NoError(t, err, string(out))
			require.Equalf(t, "ddbworker version "+v+"\n", string(out),
				"-X main.version=%s did not reach --version: cmd/ddbworker/main.go needs `var version string` passed as daemon.App.Version", v)
		}},
		{"no shell HEALTHCHECK on distroless", func(t *testing.T) {
			hc := final.last("HEALTHCHECK")
			require.Falsef(t, hc != "" && hc != "NONE" && !strings.Contains(hc, "["),
				"HEALTHCHECK %q needs a shell, which distroless has not", hc)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.check)
	}
}

func TestComposeDockerignore(t *testing.T) {
	p := loadProject(t)
	var patterns []string
	for _, l := range strings.Split(p.read(t, ".dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			require.Falsef(t, strings.HasPrefix(l, "!"), ".dockerignore: this test does not understand exceptions (%s)", l)
			patterns = append(patterns, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/"))
		}
	}
	// ignored reports whether a path relative to the context is excluded
	// (enough of Docker's rules for these patterns: ** only as a prefix).
	ignored := func(rel string) bool {
		for _, pat := range patterns {
			for dir := rel; dir != "."; dir = filepath.Dir(dir) {
				if ok, _ := filepath.Match(pat, dir); ok {
					return true
				}
				if rest, found := strings.CutPrefix(pat, "**/"); found {
					if ok, _ := filepath.Match(rest, filepath.Base(dir)); ok {
						return true
					}
				}
			}
		}
		return false
	}
	type ignoreCase struct {
		path    string
		ignored bool
	}
	cases := []ignoreCase{
		{".git", true},
		{"go.mod", false},
		{"go.sum", false},
		{"cmd/ddbworker/main.go", false},
		{"tables/tables.go", false},
		{"ddbworker", true}, // what `go build ./cmd/ddbworker` leaves at the root
		{"bin", true},
	}
	// Every node_modules in the tree, and every Go package, as they are now.
	require.NoError(t, filepath.WalkDir(p.root, func(file string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p.root, file)
		switch {
		case d.Name() == "node_modules": // a directory or a link to one
			cases = append(cases, ignoreCase{rel, true})
			if d.IsDir() {
				return filepath.SkipDir
			}
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(file, ".go") && !strings.HasSuffix(file, "_test.go"):
			cases = append(cases, ignoreCase{rel, false})
		}
		return nil
	}))
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			require.Equalf(t, tc.ignored, ignored(tc.path), ".dockerignore: %s must be ignored: %v (patterns %q)", tc.path, tc.ignored, patterns)
		})
	}
}

// ---------------------------------------------------------------------------
// Commands the docs tell people to type.

func TestComposeDocumentedCommands(t *testing.T) {
	p := loadProject(t)
	runRe := regexp.MustCompile("docker compose(?: --profile \\S+)* run --rm ([\\w.-]+)([^#\n`]*)")
	execRe := regexp.MustCompile("docker compose exec ([\\w.-]+) (/[^\\s`]+)")
	found := 0
	for _, doc := range []string{"localstack/README.md", "docker-compose.yml"} {
		text := p.read(t, doc)
		for _, m := range runRe.FindAllStringSubmatch(text, -1) {
			found++
			t.Run(doc+": "+strings.TrimSpace(m[0]), func(t *testing.T) {
				s := p.service(t, m[1])
				require.Truef(t, p.isDdbworker(s), "%s runs service %s, which is not ddbworker", doc, s.name)
				args := strings.Fields(m[2])
				if len(args) == 0 {
					args = p.args(t, s)
				}
				got := executeCaptured(t, p.tree(s), s.env, args)
				checkResourceFlags(t, p, doc, s.env, got)
			})
		}
		for _, m := range execRe.FindAllStringSubmatch(text, -1) {
			t.Run(doc+": "+m[0], func(t *testing.T) {
				host, ok := p.service(t, m[1]).hostPath(p.root, m[2])
				require.Truef(t, ok, "%s: %s is not mounted in service %s", doc, m[2], m[1])
				st, err := os.Stat(host)
				require.NoError(t, err, doc)
				require.NotZerof(t, st.Mode()&0o111, "%s: %s is not executable", doc, host)
			})
		}
	}
	require.NotZero(t, found, "the README shows no `docker compose run --rm worker send …`")
}

// TestComposeNamesAreCodeDefaults: the names in the compose setup are the
// defaults of `ddbworker tables create` and `ddbworker queues create`, so
// those commands and the hook describe the same resources.
func TestComposeNamesAreCodeDefaults(t *testing.T) {
	cases := []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"tables", "create"}, "table", composeTable},
		{[]string{"queues", "create"}, "queue", composeQueue},
		{[]string{"run"}, "table", composeTable},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " ")+" --"+tc.flag, func(t *testing.T) {
			f := commandFlags(findCommand(t, productionTree, tc.args))[tc.flag]
			require.NotNilf(t, f, "`ddbworker %s` has no --%s", strings.Join(tc.args, " "), tc.flag)
			require.Equal(t, tc.want, f.DefValue)
		})
	}
	qs := expectedQueues(t, composeQueue)
	require.Equal(t, []string{composeDLQ, composeQueue}, []string{qs[0].name, qs[1].name}, "worker.CreateQueues names the DLQ <queue>-dlq")
}

// ---------------------------------------------------------------------------
// The command tree.

// productionTree is the command line of the production binary (the
// default image: cmd/ddbworker, the operator command line, whose App is
// this one's: no handlers, no flags of its own); developmentTree that of
// bin/ddbworker-dev (the Dockerfile's dev target): the example service
// with the development tools.
func productionTree() *cobra.Command {
	return daemon.Command(daemon.App{Name: "ddbworker", Table: "ddbworker",
		Register: func(*ddbworker.Registry, daemon.Env) error { return nil }})
}

func developmentTree() *cobra.Command { return daemon.Command(app()) }

// tree is the command line of the binary service s runs.
func (p *project) tree(s *service) func() *cobra.Command {
	if s.build != nil && s.build.target == "dev" {
		return developmentTree
	}
	return productionTree
}

// findCommand returns the command args name in the command line tree
// builds, failing unless args start with a real subcommand.
func findCommand(t *testing.T, tree func() *cobra.Command, args []string) *cobra.Command {
	t.Helper()
	root := tree()
	cmd, _, err := root.Find(args)
	require.NoErrorf(t, err, "`ddbworker %s`", strings.Join(args, " "))
	require.NotSamef(t, root, cmd, "`ddbworker %s` names no subcommand", strings.Join(args, " "))
	require.Truef(t, cmd.Runnable(), "`ddbworker %s` is not runnable", strings.Join(args, " "))
	return cmd
}

// commandFlags are a command's own and inherited flags by name.
func commandFlags(cmd *cobra.Command) map[string]*pflag.Flag {
	out := map[string]*pflag.Flag{}
	add := func(f *pflag.Flag) { out[f.Name] = f }
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return out
}

// flagOfEnv maps DDBWORKER_SOME_FLAG to some-flag (the inverse of envName).
func flagOfEnv(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "DDBWORKER_")), "_", "-")
}

// executeCaptured runs `ddbworker args` with env as the environment (and no
// other DDBWORKER_* variable) up to the command's RunE, which is replaced by
// one that returns the value of every flag. Hooks (env binding, validation)
// run as in production.
func executeCaptured(t *testing.T, tree func() *cobra.Command, env map[string]string, args []string) map[string]string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DDBWORKER_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	root := tree()
	cmd, _, err := root.Find(args)
	require.NoError(t, err)
	got := map[string]string{}
	cmd.Run = nil
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		for name, f := range commandFlags(c) {
			got[name] = f.Value.String()
		}
		return nil
	}
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoErrorf(t, root.ExecuteContext(ctx), "`ddbworker %s` with the service's environment", strings.Join(args, " "))
	require.NotEmptyf(t, got, "`ddbworker %s`: RunE never ran", strings.Join(args, " "))
	return got
}

// ---------------------------------------------------------------------------
// Queues and URLs.

type queueWrite struct {
	name  string
	attrs map[string]string
}

// expectedQueues are the CreateQueue calls of worker.CreateQueues with the
// default QueueConfig, against a fake SQS that answers like the fake
// awslocal.
func expectedQueues(t *testing.T, name string) []queueWrite {
	t.Helper()
	api := &recordingQueues{}
	_, err := worker.CreateQueues(context.Background(), api, worker.QueueConfig{Name: name})
	require.NoError(t, err)
	require.Len(t, api.writes, 2)
	return api.writes
}

type recordingQueues struct{ writes []queueWrite }

func (r *recordingQueues) CreateQueue(_ context.Context, in *sqs.CreateQueueInput, _ ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	name := aws.ToString(in.QueueName)
	r.writes = append(r.writes, queueWrite{name: name, attrs: in.Attributes})
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(fakeQueueURL(name))}, nil
}

func (r *recordingQueues) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, errors.New("recordingQueues: a fresh CreateQueues never looks a queue up")
}

func (r *recordingQueues) SetQueueAttributes(context.Context, *sqs.SetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	return nil, errors.New("recordingQueues: a fresh CreateQueues never sets attributes")
}

func (r *recordingQueues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": fakeQueueARN(lastSegment(aws.ToString(in.QueueUrl)))}}, nil
}

// The fake awslocal answers with these (LocalStack's, with the path strategy).
func fakeQueueURL(name string) string {
	return "http://localhost:4566/queue/" + localstackRegion + "/" + localstackAccount + "/" + name
}
func fakeQueueARN(name string) string {
	return "arn:aws:sqs:" + localstackRegion + ":" + localstackAccount + ":" + name
}

// normalizeQueues decodes RedrivePolicy (a JSON document in a string), so
// that formatting does not matter.
func normalizeQueues(t *testing.T, qs []queueWrite) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, q := range qs {
		m := map[string]any{"(name)": q.name}
		for k, v := range q.attrs {
			m[k] = v
			if k == "RedrivePolicy" {
				var doc map[string]any
				require.NoErrorf(t, json.Unmarshal([]byte(v), &doc), "queue %s: RedrivePolicy %q", q.name, v)
				m[k] = doc
			}
		}
		out = append(out, m)
	}
	return out
}

// queueWrites are the queues the hook created or updated, in order.
func queueWrites(t *testing.T, calls []awsCall) []queueWrite {
	t.Helper()
	var out []queueWrite
	for _, c := range calls {
		var name string
		switch c.op() {
		case "sqs create-queue":
			name, _ = c.arg("--queue-name")
		case "sqs set-queue-attributes":
			u, _ := c.arg("--queue-url")
			name = lastSegment(u)
		default:
			continue
		}
		raw, ok := c.arg("--attributes")
		require.Truef(t, ok, "%s: no --attributes", c)
		attrs := map[string]string{}
		require.NoErrorf(t, strictJSON(raw, &attrs), "%s: --attributes %q must be a JSON object of strings", c, raw)
		out = append(out, queueWrite{name: name, attrs: attrs})
	}
	return out
}

// requireQueueURL: LocalStack's path-strategy URL of queue want, on the
// LocalStack service.
func requireQueueURL(t *testing.T, p *project, what, raw, region, want string) {
	t.Helper()
	requireLocalStackURL(t, p, what, raw)
	u, _ := url.Parse(raw)
	wantPath := "/queue/" + region + "/" + localstackAccount + "/" + want
	require.Equalf(t, wantPath, u.Path, "%s %q: want http://%s:%s%s (SQS_ENDPOINT_STRATEGY=path)", what, raw, localstackService, localstackPort, wantPath)
}

func requireLocalStackURL(t *testing.T, p *project, what, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoErrorf(t, err, "%s %q", what, raw)
	require.Equalf(t, "http", u.Scheme, "%s %q", what, raw)
	require.Equalf(t, localstackService+":"+localstackPort, u.Host, "%s %q must point at service %s, port %s", what, raw, localstackService, localstackPort)
	p.service(t, localstackService) // which exists
}

func lastSegment(u string) string { return u[strings.LastIndex(u, "/")+1:] }

// ---------------------------------------------------------------------------
// Running the hook.

type awsCall []string // awslocal's arguments

func (c awsCall) String() string { return "awslocal " + strings.Join(c, " ") }
func (c awsCall) service() string {
	if len(c) == 0 {
		return ""
	}
	return c[0]
}
func (c awsCall) op() string {
	if len(c) < 2 {
		return strings.Join(c, " ")
	}
	return c[0] + " " + c[1]
}
func (c awsCall) arg(flag string) (string, bool) {
	for i := 0; i+1 < len(c); i++ {
		if c[i] == flag {
			return c[i+1], true
		}
	}
	return "", false
}

// matches a failure spec "service/operation" or "service/operation:queue".
func (c awsCall) matches(spec string) bool {
	op, queue, _ := strings.Cut(spec, ":")
	if strings.Replace(op, "/", " ", 1) != c.op() {
		return false
	}
	if queue == "" {
		return true
	}
	name, ok := c.arg("--queue-name")
	if !ok {
		u, _ := c.arg("--queue-url")
		name = lastSegment(u)
	}
	return name == queue
}

func callsOf(calls []awsCall, op string) []awsCall {
	var out []awsCall
	for _, c := range calls {
		if c.op() == op {
			out = append(out, c)
		}
	}
	return out
}

// fakeAwslocal logs its arguments and answers like LocalStack (queue URLs of
// the path strategy), honouring only the --query/--output text pairs the hook
// may use, so a missing --output text shows up as a wrong value.
const fakeAwslocal = `#!/bin/bash
set -u
{ printf '%s\x1f' "$@"; printf '\x1e'; } >>"$FAKE_AWSLOCAL_LOG"
arg() { local want=$1; shift; while (($# > 1)); do [[ $1 == "$want" ]] && { printf '%s' "$2"; return 0; }; shift; done; return 1; }
op="$1 ${2:-}"
queue=$(arg --queue-name "$@" || { u=$(arg --queue-url "$@" || true); echo "${u##*/}"; })
for f in ${FAKE_AWSLOCAL_FAIL:-}; do
  if [[ $f == "$1/${2:-}" || $f == "$1/${2:-}:$queue" ]]; then
    echo "An error occurred (InternalFailure) when calling $op: injected by compose_test.go" >&2; exit 254
  fi
done
query=$(arg --query "$@" || true); output=$(arg --output "$@" || true)
answer() { # answer QUERY TEXT JSON
  if [[ -z $query ]]; then printf '%s\n' "$3"; return; fi
  if [[ $query == "$1" && $output == text ]]; then printf '%s\n' "$2"; return; fi
  echo "fake awslocal: unsupported --query $query --output $output for $op" >&2; exit 2
}
existing=${FAKE_AWSLOCAL_EXISTING:-}
base=http://localhost:4566/queue/us-east-1/000000000000
case $op in
"dynamodb describe-table")
  [[ -n $existing ]] || { echo "An error occurred (ResourceNotFoundException) when calling the DescribeTable operation: Cannot do operations on a non-existent table" >&2; exit 254; }
  echo '{"Table": {"TableStatus": "ACTIVE"}}' ;;
"dynamodb create-table") echo '{"TableDescription": {"TableStatus": "ACTIVE"}}' ;;
"dynamodb wait") ;;
"dynamodb describe-time-to-live")
  s=DISABLED; [[ -n $existing ]] && s=ENABLED
  answer TimeToLiveDescription.TimeToLiveStatus "$s" "{\"TimeToLiveDescription\": {\"TimeToLiveStatus\": \"$s\"}}" ;;
"dynamodb update-time-to-live") echo '{}' ;;
"sqs get-queue-url")
  [[ -n $existing ]] || { echo "An error occurred (AWS.SimpleQueueService.NonExistentQueue) when calling the GetQueueUrl operation: The specified queue does not exist." >&2; exit 254; }
  answer QueueUrl "$base/$queue" "{\"QueueUrl\": \"$base/$queue\"}" ;;
"sqs create-queue") answer QueueUrl "$base/$queue" "{\"QueueUrl\": \"$base/$queue\"}" ;;
"sqs set-queue-attributes") ;;
"sqs get-queue-attributes")
  arn=arn:aws:sqs:us-east-1:000000000000:$queue
  answer Attributes.QueueArn "$arn" "{\"Attributes\": {\"QueueArn\": \"$arn\"}}" ;;
*) echo "fake awslocal: unexpected call: $*" >&2; exit 2 ;;
esac
`

// runHook runs the hook (through its shebang) with the fake awslocal first
// on PATH; fail names calls to fail (see awsCall.matches).
func (p *project) runHook(t *testing.T, existing bool, fail string) ([]awsCall, string, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "awslocal"), []byte(fakeAwslocal), 0o755))
	logFile := filepath.Join(dir, "calls.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(p.root, hookFile))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir,
		"FAKE_AWSLOCAL_LOG="+logFile,
		"FAKE_AWSLOCAL_FAIL="+fail,
		"FAKE_AWSLOCAL_EXISTING="+map[bool]string{true: "1"}[existing],
	)
	out, err := cmd.CombinedOutput()
	raw, rerr := os.ReadFile(logFile)
	if rerr != nil && !os.IsNotExist(rerr) {
		require.NoError(t, rerr)
	}
	var calls []awsCall
	for _, rec := range strings.Split(string(raw), "\x1e") {
		if rec == "" {
			continue
		}
		calls = append(calls, strings.Split(strings.TrimSuffix(rec, "\x1f"), "\x1f"))
	}
	return calls, string(out), err
}

// hookResult is what the hook creates on a fresh LocalStack.
type hookResult struct {
	table     string
	workQueue string // the queue with a RedrivePolicy
	dlq       string // its target
	attrs     map[string]map[string]string
}

func (p *project) hookEmpty(t *testing.T) hookResult {
	t.Helper()
	if p.hook != nil {
		return *p.hook
	}
	calls, out, err := p.runHook(t, false, "")
	require.NoErrorf(t, err, "the hook failed; its output:\n%s", out)
	h := hookResult{table: aws.ToString(p.tableJSON(t).TableName), attrs: map[string]map[string]string{}}
	for _, q := range queueWrites(t, calls) {
		h.attrs[q.name] = q.attrs
		if rp, ok := q.attrs["RedrivePolicy"]; ok {
			var doc struct{ DeadLetterTargetArn string }
			require.NoErrorf(t, json.Unmarshal([]byte(rp), &doc), "the hook's RedrivePolicy of %s is not JSON: %s", q.name, rp)
			h.workQueue = q.name
			h.dlq = doc.DeadLetterTargetArn[strings.LastIndex(doc.DeadLetterTargetArn, ":")+1:]
		}
	}
	require.NotEmpty(t, h.workQueue, "the hook creates no queue with a RedrivePolicy")
	require.Containsf(t, h.attrs, h.dlq, "the hook's RedrivePolicy targets %q, which it does not create", h.dlq)
	p.hook = &h
	return h
}

func strictJSON(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// ---------------------------------------------------------------------------
// The project's files.

type project struct {
	root     string
	compose  map[string]*service
	hook     *hookResult
	df       *dockerfile
	tableDef *dynamodb.CreateTableInput
}

func loadProject(t *testing.T) *project {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "repository root not found from cmd/ddbworker")
	p := &project{root: root}
	p.compose = parseCompose(t, p.read(t, "docker-compose.yml"))
	return p
}

func (p *project) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.root, rel))
	require.NoError(t, err)
	return string(b)
}

func (p *project) services() []*service {
	var out []*service
	for _, k := range sortedKeys(p.compose) {
		out = append(out, p.compose[k])
	}
	return out
}

func (p *project) service(t *testing.T, name string) *service {
	t.Helper()
	s, ok := p.compose[name]
	require.Truef(t, ok, "docker-compose.yml has no service %s", name)
	return s
}

// image is the tag the compose file gives the image it builds from the
// Dockerfile ("" when untagged).
func (p *project) image() string {
	for _, s := range p.services() {
		if s.build != nil && s.image != "" {
			return s.image
		}
	}
	return ""
}

// isDdbworker: built from the repository's Dockerfile, or its image.
func (p *project) isDdbworker(s *service) bool {
	if s.build != nil {
		return filepath.Clean(filepath.Join(p.root, s.build.context)) == p.root && cmp.Or(s.build.dockerfile, "Dockerfile") == "Dockerfile"
	}
	return s.image != "" && s.image == p.image()
}

// args are the arguments /ddbworker gets in service s.
func (p *project) args(t *testing.T, s *service) []string {
	t.Helper()
	final := p.dockerfile(t).final()
	entry := final.execForm(t, "ENTRYPOINT")
	cmd := final.execForm(t, "CMD")
	if s.entrypoint != nil {
		require.Falsef(t, len(s.entrypoint) == 0 || s.entrypoint[0] != entry[0], "service %s: entrypoint %q does not run %s", s.name, s.entrypoint, entry[0])
		entry = s.entrypoint
		cmd = nil
	}
	if s.command != nil {
		cmd = s.command
	}
	return append(slices.Clone(entry[1:]), cmd...)
}

func (p *project) tableJSON(t *testing.T) *dynamodb.CreateTableInput {
	t.Helper()
	if p.tableDef == nil {
		var in dynamodb.CreateTableInput
		require.NoErrorf(t, strictJSON(p.read(t, tableFile), &in), "%s must be CreateTable input JSON (the API's field names)", tableFile)
		p.tableDef = &in
	}
	return p.tableDef
}

func requireSameFile(t *testing.T, want, got, msg string) {
	t.Helper()
	a, err := os.Stat(want)
	require.NoError(t, err, msg)
	b, err := os.Stat(got)
	require.NoError(t, err, msg)
	require.Truef(t, os.SameFile(a, b), "%s (%s is not %s)", msg, got, want)
}

// ---------------------------------------------------------------------------
// docker-compose.yml, decoded.

type service struct {
	name        string
	image       string
	build       *buildSpec
	entrypoint  []string
	command     []string
	env         map[string]string
	ports       []portMapping
	volumes     []mount
	dependsOn   map[string]string // service → condition
	healthcheck string
	networkMode string
}

type buildSpec struct{ context, dockerfile, target string }

type portMapping struct{ spec, hostIP, published, container string }

type mount struct{ source, target string }

// hostPath maps a path inside the container to the host through the bind
// mounts (the most specific one wins).
func (s *service) hostPath(root, p string) (string, bool) {
	best := -1
	var out string
	for _, m := range s.volumes {
		rel, ok := strings.CutPrefix(path.Clean(p), path.Clean(m.target))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) || len(m.target) <= best {
			continue
		}
		if !strings.HasPrefix(m.source, ".") && !strings.HasPrefix(m.source, "/") {
			continue // a named volume
		}
		best = len(m.target)
		out = filepath.Join(root, m.source, filepath.FromSlash(rel))
		if filepath.IsAbs(m.source) {
			out = filepath.Join(m.source, filepath.FromSlash(rel))
		}
	}
	return out, best >= 0
}

func parseCompose(t *testing.T, text string) map[string]*service {
	t.Helper()
	var file struct {
		Services map[string]struct {
			Image       string      `yaml:"image"`
			Build       yaml.Node   `yaml:"build"`
			Entrypoint  yaml.Node   `yaml:"entrypoint"`
			Command     yaml.Node   `yaml:"command"`
			Environment yaml.Node   `yaml:"environment"`
			Ports       []yaml.Node `yaml:"ports"`
			Volumes     []yaml.Node `yaml:"volumes"`
			DependsOn   yaml.Node   `yaml:"depends_on"`
			Healthcheck struct {
				Test yaml.Node `yaml:"test"`
			} `yaml:"healthcheck"`
			NetworkMode string `yaml:"network_mode"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(text), &file), "docker-compose.yml")
	require.NotEmpty(t, file.Services, "docker-compose.yml has no services")
	out := map[string]*service{}
	for name, raw := range file.Services {
		s := &service{name: name, image: raw.Image, networkMode: raw.NetworkMode, env: map[string]string{}, dependsOn: map[string]string{}}
		where := "docker-compose.yml: service " + name
		switch raw.Build.Kind {
		case 0:
		case yaml.ScalarNode:
			s.build = &buildSpec{context: raw.Build.Value}
		default:
			var b struct{ Context, Dockerfile, Target string }
			require.NoError(t, raw.Build.Decode(&b), where+": build")
			s.build = &buildSpec{context: cmp.Or(b.Context, "."), dockerfile: b.Dockerfile, target: b.Target}
		}
		s.entrypoint = commandLine(t, where+": entrypoint", &raw.Entrypoint)
		s.command = commandLine(t, where+": command", &raw.Command)
		switch raw.Environment.Kind {
		case 0:
		case yaml.MappingNode:
			for i := 0; i+1 < len(raw.Environment.Content); i += 2 {
				k, v := raw.Environment.Content[i], raw.Environment.Content[i+1]
				require.Equalf(t, yaml.ScalarNode, v.Kind, "%s: environment %s", where, k.Value)
				s.env[k.Value] = v.Value
			}
		case yaml.SequenceNode:
			for _, n := range raw.Environment.Content {
				k, v, _ := strings.Cut(n.Value, "=")
				s.env[k] = v
			}
		default:
			require.Failf(t, "bad environment", where)
		}
		for _, n := range raw.Ports {
			s.ports = append(s.ports, parsePort(t, where, &n))
		}
		for _, n := range raw.Volumes {
			switch n.Kind {
			case yaml.ScalarNode:
				f := strings.Split(n.Value, ":")
				require.GreaterOrEqualf(t, len(f), 2, "%s: volume %q", where, n.Value)
				s.volumes = append(s.volumes, mount{source: f[0], target: f[1]})
			default:
				var m struct{ Source, Target string }
				require.NoError(t, n.Decode(&m), where+": volume")
				s.volumes = append(s.volumes, mount{source: m.Source, target: m.Target})
			}
		}
		switch raw.DependsOn.Kind {
		case 0:
		case yaml.SequenceNode:
			for _, n := range raw.DependsOn.Content {
				s.dependsOn[n.Value] = "service_started"
			}
		default:
			var m map[string]struct{ Condition string }
			require.NoError(t, raw.DependsOn.Decode(&m), where+": depends_on")
			for k, v := range m {
				s.dependsOn[k] = cmp.Or(v.Condition, "service_started")
			}
		}
		if hc := commandLine(t, where+": healthcheck", &raw.Healthcheck.Test); hc != nil {
			s.healthcheck = strings.Join(hc, " ")
		}
		out[name] = s
	}
	return out
}

// commandLine decodes a list, or a string split on blanks; nil when absent.
func commandLine(t *testing.T, where string, n *yaml.Node) []string {
	t.Helper()
	switch n.Kind {
	case 0:
		return nil
	case yaml.ScalarNode:
		return strings.Fields(n.Value)
	default:
		out := []string{}
		require.NoError(t, n.Decode(&out), where)
		return out
	}
}

func parsePort(t *testing.T, where string, n *yaml.Node) portMapping {
	t.Helper()
	if n.Kind == yaml.MappingNode {
		var m struct {
			Target, Published string
			HostIP            string `yaml:"host_ip"`
		}
		require.NoError(t, n.Decode(&m), where+": ports")
		return portMapping{spec: fmt.Sprintf("%s:%s:%s", m.HostIP, m.Published, m.Target), hostIP: m.HostIP, published: m.Published, container: m.Target}
	}
	spec := n.Value
	rest, _, _ := strings.Cut(spec, "/") // protocol
	pm := portMapping{spec: spec}
	if strings.HasPrefix(rest, "[") { // [::1]:9090:9090
		end := strings.Index(rest, "]")
		require.Greaterf(t, end, 0, "%s: port %q", where, spec)
		pm.hostIP, rest = rest[:end+1], strings.TrimPrefix(rest[end+1:], ":")
		pm.published, pm.container, _ = strings.Cut(rest, ":")
		return pm
	}
	f := strings.Split(rest, ":")
	switch len(f) {
	case 1:
		pm.container = f[0]
	case 2:
		pm.published, pm.container = f[0], f[1]
	case 3:
		pm.hostIP, pm.published, pm.container = f[0], f[1], f[2]
	default:
		require.Failf(t, "bad port", "%s: port %q", where, spec)
	}
	return pm
}

// ---------------------------------------------------------------------------
// Dockerfile, parsed (enough for this file: no heredocs; build arguments
// expanded only where a check asks, by expand).

type instruction struct{ cmd, args string }

type stage struct {
	pos   int
	from  string
	name  string
	instr []instruction
}

type dockerfile struct {
	args   map[string]string // ARGs before the first FROM, with their defaults
	stages []*stage
}

func (p *project) dockerfile(t *testing.T) *dockerfile {
	t.Helper()
	if p.df != nil {
		return p.df
	}
	df := &dockerfile{args: map[string]string{}}
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			f := strings.Fields(args)
			st := &stage{pos: len(df.stages), from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
			return
		}
		if len(df.stages) == 0 {
			require.Equalf(t, "ARG", cmd, "Dockerfile: %s before FROM (only ARG may come first)", cmd)
			k, v, _ := strings.Cut(args, "=")
			df.args[k] = unquote(v)
			return
		}
		st := df.stages[len(df.stages)-1]
		st.instr = append(st.instr, instruction{cmd: cmd, args: args})
	}
	for _, l := range strings.Split(p.read(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments, also inside continuations
		}
		if c, ok := strings.CutSuffix(trimmed, "\\"); ok {
			logical.WriteString(c + " ")
			continue
		}
		logical.WriteString(trimmed)
		flush()
	}
	flush()
	require.NotEmpty(t, df.stages, "Dockerfile has no FROM")
	p.df = df
	return df
}

func (d *dockerfile) final() *stage { return d.stages[len(d.stages)-1] }

// builder is the stage that runs go build.
func (d *dockerfile) builder() *stage {
	for _, s := range d.stages {
		if s.run("go build") != "" {
			return s
		}
	}
	return nil
}

// run returns the first RUN that contains s.
func (s *stage) run(sub string) string {
	for _, in := range s.instr {
		if in.cmd == "RUN" && strings.Contains(in.args, sub) {
			return in.args
		}
	}
	return ""
}

func (s *stage) index(match func(instruction) bool) int {
	return slices.IndexFunc(s.instr, match)
}

// last returns the arguments of the stage's last cmd instruction.
func (s *stage) last(cmd string) string {
	out := ""
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = in.args
		}
	}
	return out
}

// execForm decodes the stage's last cmd, which must be in JSON (exec) form:
// distroless has no shell for the shell form.
func (s *stage) execForm(t *testing.T, cmd string) []string {
	t.Helper()
	raw := s.last(cmd)
	require.NotEmptyf(t, raw, "Dockerfile: the final stage has no %s", cmd)
	var out []string
	require.NoErrorf(t, json.Unmarshal([]byte(raw), &out), "Dockerfile: %s %s must be in exec (JSON) form: distroless has no shell", cmd, raw)
	require.NotEmptyf(t, out, "Dockerfile: empty %s", cmd)
	return out
}

// ldflagsOf returns the -ldflags value of a go build command line.
func ldflagsOf(t *testing.T, cmdline string) string {
	t.Helper()
	m := regexp.MustCompile(`-ldflags[= ]+(?:"([^"]*)"|'([^']*)'|(\S+))`).FindStringSubmatch(cmdline)
	require.NotNilf(t, m, "go build needs -ldflags=\"-s -w …\": %q", cmdline)
	return m[1] + m[2] + m[3]
}

// stage returns the stage named (or numbered) ref, nil if none.
func (d *dockerfile) stage(ref string) *stage {
	for _, s := range d.stages {
		if s.name == ref || strconv.Itoa(s.pos) == ref {
			return s
		}
	}
	return nil
}

// ancestry is s and every stage its image or files come from: its FROM
// when that names a stage, and each COPY --from, transitively.
func (d *dockerfile) ancestry(s *stage) []*stage {
	out := []*stage{}
	var visit func(*stage)
	visit = func(s *stage) {
		if s == nil || slices.Contains(out, s) {
			return
		}
		out = append(out, s)
		visit(d.stage(s.from))
		for _, in := range s.instr {
			for _, f := range strings.Fields(in.args) {
				if v, ok := strings.CutPrefix(f, "--from="); ok && in.cmd == "COPY" {
					visit(d.stage(v))
				}
			}
		}
	}
	visit(s)
	return out
}

// expand substitutes $NAME and ${NAME} in text where NAME is a build
// argument the stage declares: set's value (a --build-arg), else the
// stage's ARG default, else the global one.
func (d *dockerfile) expand(s *stage, text string, set map[string]string) string {
	return regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`).ReplaceAllStringFunc(text, func(m string) string {
		name := strings.Trim(m, "${}")
		if !s.declares(name) {
			return m // the shell's
		}
		if v, ok := set[name]; ok {
			return v
		}
		for _, in := range s.instr {
			if k, v, ok := strings.Cut(in.args, "="); in.cmd == "ARG" && ok && k == name {
				return unquote(v)
			}
		}
		return d.args[name]
	})
}

// declares reports whether the stage declares ARG name.
func (s *stage) declares(name string) bool {
	return s.index(func(in instruction) bool {
		k, _, _ := strings.Cut(in.args, "=")
		return in.cmd == "ARG" && k == name
	}) >= 0
}

// keyValues are the KEY=value pairs of the stage's cmd instructions (ENV,
// LABEL), values unquoted and not expanded.
func (s *stage) keyValues(t *testing.T, cmd string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, in := range s.instr {
		if in.cmd != cmd {
			continue
		}
		for _, w := range words(in.args) {
			k, v, ok := strings.Cut(w, "=")
			require.Truef(t, ok, "Dockerfile: %s %s: write KEY=value", cmd, in.args)
			out[k] = v
		}
	}
	return out
}

// words splits s at blanks outside double quotes, dropping the quotes.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func unquote(s string) string {
	if w := words(s); len(w) == 1 {
		return w[0]
	}
	return s
}

func (s *stage) exposed() []string {
	var out []string
	for _, in := range s.instr {
		if in.cmd == "EXPOSE" {
			for _, f := range strings.Fields(in.args) {
				port, _, _ := strings.Cut(f, "/")
				out = append(out, port)
			}
		}
	}
	return out
}

// ---------------------------------------------------------------------------

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// envName is the environment variable of a flag (the daemon binds every
// flag --some-flag to DDBWORKER_SOME_FLAG).
func envName(flag string) string {
	return "DDBWORKER_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// A service that runs a development tool (send, demo, bench, chaos) or the
// example service (run: the production image, cmd/ddbworker, registers no
// handlers) builds the Dockerfile's dev target: the production image has no
// such commands, and must not be overwritten by one that has.
func TestComposeDevToolsUseTheDevTarget(t *testing.T) {
	p := loadProject(t)
	images := map[string]string{} // image → target
	for _, s := range p.services() {
		if !p.isDdbworker(s) || s.build == nil {
			continue
		}
		args := p.args(t, s)
		if len(args) > 0 && slices.Contains([]string{"send", "demo", "bench", "chaos"}, args[0]) {
			require.Equalf(t, "dev", s.build.target, "service %s runs %q: it needs build.target dev", s.name, args[0])
		} else if len(args) > 0 && args[0] == "run" {
			// The production image (cmd/ddbworker) registers no handlers:
			// a worker runs the example service, the dev image's.
			require.Equalf(t, "dev", s.build.target, "service %s runs the example service: it needs build.target dev", s.name)
		} else {
			require.Emptyf(t, s.build.target, "service %s runs the production image", s.name)
		}
		if prev, ok := images[s.image]; ok {
			require.Equalf(t, prev, s.build.target, "image %s is built from two targets: one would overwrite the other", s.image)
		}
		images[s.image] = s.build.target
	}
}
